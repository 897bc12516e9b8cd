package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skillpilot/skillpilot/internal/testenv"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/mcpserver"
)

// Main runs `master mcp` (the master-mcp binary, package mcpserver) with
// its own arguments and exit code, and lists it in the help.
func TestMCPSubcommand(t *testing.T) {
	t.Setenv(MCPEnv, testenv.BuildBinary(t, testenv.MasterMCP))
	var out, errb bytes.Buffer
	if rc := Main([]string{"mcp", "--help"}, strings.NewReader(""), &out, &errb); rc != master.ExitOK ||
		!strings.HasPrefix(out.String(), "usage: master mcp --session DIR") {
		t.Fatalf("mcp --help: rc %d out %q err %q", rc, out.String(), errb.String())
	}
	out.Reset()
	errb.Reset()
	if rc := Main([]string{"mcp", "--no-such-flag"}, strings.NewReader(""), &out, &errb); rc != master.ExitUsage ||
		!strings.HasPrefix(errb.String(), "master mcp: ") {
		t.Fatalf("mcp --no-such-flag: rc %d err %q", rc, errb.String())
	}
	out.Reset()
	Main([]string{"help"}, nil, &out, &errb)
	if !strings.HasSuffix(out.String(), "\nMore commands:\n  mcp "+mcpserver.Usage+"\n") || mcpUsage != mcpserver.Usage {
		t.Fatalf("help:\n%s", out.String())
	}
}

// TestMCPBinaryMissing: without master-mcp, master mcp says where it looked
// and how to get it, and exits 1; the master binary itself does not link
// the MCP SDK (the point of the split: docs/benchmarks-log.md, "CLI start after the MCP split").
func TestMCPBinaryMissing(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(MCPEnv, "")
	t.Setenv("PATH", t.TempDir())
	var out, errb bytes.Buffer
	if rc := Main([]string{"mcp", "--session", t.TempDir()}, strings.NewReader(""), &out, &errb); rc != master.ExitIO ||
		!strings.Contains(errb.String(), "master-mcp") || !strings.Contains(errb.String(), MCPEnv) {
		t.Fatalf("rc %d err %q", rc, errb.String())
	}
	deps, err := exec.Command(goBin, "list", "-deps", testenv.Master).Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, heavy := range []string{"github.com/modelcontextprotocol/go-sdk/mcp", "encoding/gob", "net/http"} {
		if strings.Contains("\n"+string(deps), "\n"+heavy+"\n") {
			t.Errorf("the master binary links %s", heavy)
		}
	}
}

// TestMCPEnvIsMaster: SP_MASTER_MCP naming master itself (here the test
// binary, which is master's Main) is an error that names the variable,
// not master's own "no command given"; so is one naming
// nothing.
func TestMCPEnvIsMaster(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{self, filepath.Join(t.TempDir(), "nothing-here")} {
		t.Setenv(MCPEnv, v)
		var out, errb bytes.Buffer
		rc := Main([]string{"mcp", "--session", t.TempDir()}, strings.NewReader(""), &out, &errb)
		if rc != master.ExitIO || !strings.Contains(errb.String(), MCPEnv+"="+v) || strings.Contains(errb.String(), "no command given") {
			t.Errorf("%s=%s: rc %d err %q", MCPEnv, v, rc, errb.String())
		}
	}
}

package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/mcpserver"
)

// Main runs `master mcp` (package mcpserver) with its own arguments and
// exit code, and lists it in the help. (It replaces the test of
// RegisterSubcommand, which is gone: this package wires mcp itself.)
func TestMCPSubcommand(t *testing.T) {
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
	if !strings.HasSuffix(out.String(), "\nMore commands:\n  mcp "+mcpserver.Usage+"\n") {
		t.Fatalf("help:\n%s", out.String())
	}
}

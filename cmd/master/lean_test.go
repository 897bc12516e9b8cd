package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/skillpilot/skillpilot/internal/testenv"
)

// heavy are the packages the lean master must not link (issue 44): their
// initialisation (templates, compression tables, a diff library's, the
// MCP SDK's) is what report, standin, diff and mcp need, and every other
// command would pay for it at its start.
var heavy = []string{"html/template", "text/template", "compress/flate", "net/url", "net/http",
	"github.com/aymanbagabas/go-udiff", "github.com/modelcontextprotocol/go-sdk/mcp",
	testenv.Module + "/review", testenv.Module + "/review/report", testenv.Module + "/review/diff",
	testenv.Module + "/review/standin", testenv.Module + "/mcpserver"}

func deps(t *testing.T, tags ...string) []string {
	t.Helper()
	args := []string{"list", "-deps"}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	out, err := exec.Command("go", append(args, ".")...).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	return strings.Fields(string(out))
}

// The lean master (make build) links none of the heavy packages; the full
// CLI (master-history, go install ./cmd/master) links the history ones.
func TestLeanMasterDeps(t *testing.T) {
	t.Parallel()
	lean, full := deps(t, "lean"), deps(t)
	for _, p := range heavy {
		if slices.Contains(lean, p) {
			t.Errorf("the lean master links %s", p)
		}
	}
	for _, p := range []string{"html/template", testenv.Module + "/review/report", testenv.Module + "/review/diff"} {
		if !slices.Contains(full, p) {
			t.Errorf("the full CLI does not link %s: is this test still looking at the right packages?", p)
		}
	}
}

// The lean master runs report, standin and diff in master-history beside
// it, on the same arguments and streams, with its exit code; without it,
// it says what is missing and where it looked.
func TestLeanMasterRunsHistory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	lean := filepath.Join(dir, "master")
	testenv.LinkBinary(t, testenv.BuildBinary(t, testenv.Master, testenv.WithTags("lean")), lean)
	testenv.LinkBinary(t, testenv.BuildBinary(t, testenv.MasterHistory), filepath.Join(dir, "master-history"))
	for _, verb := range []string{"report", "standin", "diff"} {
		var out bytes.Buffer
		cmd := exec.Command(lean, "help", verb)
		cmd.Stdout = &out
		if err := cmd.Run(); err != nil || !strings.HasPrefix(out.String(), "usage: master "+verb) {
			t.Errorf("master help %s: %v\n%s", verb, err, out.String())
		}
	}
	cmd := exec.Command(lean, "diff", "--json", t.TempDir(), t.TempDir())
	if err := cmd.Run(); cmd.ProcessState.ExitCode() != 5 {
		t.Errorf("master diff of two non-sessions: %v, want master-history's exit 5", err)
	}
	if err := os.Remove(filepath.Join(dir, "master-history")); err != nil {
		t.Fatal(err)
	}
	// Exit 10, an installation's fault: diff's 1 would say "the runs
	// differ" to a script that checks it.
	for _, argv := range [][]string{{"report", "--session", t.TempDir()}, {"diff", t.TempDir(), t.TempDir()}} {
		var stderr bytes.Buffer
		cmd = exec.Command(lean, argv...)
		cmd.Env, cmd.Stderr = append(os.Environ(), "PATH=/nonexistent"), &stderr
		if err := cmd.Run(); cmd.ProcessState.ExitCode() != 10 || !strings.Contains(stderr.String(), "SP_MASTER_HISTORY") {
			t.Errorf("master %s without master-history: %v, %q", argv[0], err, stderr.String())
		}
	}
	out, err := exec.Command(lean, "--version").Output()
	if err != nil || !strings.HasPrefix(string(out), "master ") {
		t.Errorf("--version: %q %v", out, err)
	}
}

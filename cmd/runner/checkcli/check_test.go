package checkcli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/skillpilot/skillpilot/internal/testenv"
	"github.com/skillpilot/skillpilot/toolcheck"
)

// runCheck runs `runner check ARGS` in-process, with its temporary
// session under a directory of the test's.
func runCheck(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	t.Setenv("TMPDIR", t.TempDir())
	var out, errb strings.Builder
	code = Main(args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestCheckUsage: what runner check refuses, each with exit 2 and the
// reason, before it starts anything; --help is exit 0.
func TestCheckUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--session", "/tmp/x", "--", "tclsh"}, "it makes a temporary session of its own"},
		{[]string{"--kind", "zz"}, `unknown kind "zz"`},
		{[]string{"--start-timout", "1m"}, "did you mean --start-timeout?"},
		{[]string{"--", "/nonexistent/tool"}, "/nonexistent/tool does not exist"},
		{[]string{"--", "no-such-tool-here"}, "no-such-tool-here is not found on $PATH"},
		{[]string{"--init", "/nonexistent/init.tcl", "--", "tclsh"}, "--init"},
		{[]string{"--driver", "/nonexistent/d.json"}, "--driver"},
	} {
		code, _, stderr := runCheck(t, tc.args...)
		if code != ExitUsage || !strings.Contains(stderr, tc.msg) {
			t.Errorf("runner check %v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr, ExitUsage, tc.msg)
		}
		if ents, _ := os.ReadDir(os.Getenv("TMPDIR")); len(ents) != 0 {
			t.Errorf("runner check %v made %d files though it was refused", tc.args, len(ents))
		}
	}
	code, stdout, _ := runCheck(t, "--help")
	if code != ExitOK || !strings.Contains(stdout, "usage: runner check") || !strings.Contains(stdout, "--start-timeout") {
		t.Fatalf("--help: exit %d\n%s", code, stdout)
	}
}

// TestCheckTclsh: runner check on tclsh prints a row per check, every one
// holding, the recommended command line and flags, and exits 0; the
// temporary session is gone. With --json the same report is one JSON
// document.
func TestCheckTclsh(t *testing.T) {
	testenv.NeedTool(t, "tclsh", "tcl")
	code, stdout, stderr := runCheck(t, "--", "tclsh")
	if code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, tt := range toolcheck.Titles {
		want := "yes"
		if !regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(tt.Title) + ` +` + want + ` `).MatchString(stdout) {
			t.Errorf("no row %q that holds in:\n%s", tt.Title, stdout)
		}
	}
	for _, want := range []string{
		"runner check: tclsh (kind tcl)\n",
		"error \"sp check: an error\"",
		"Ctrl-C: the tool died of it and was restarted",
		"\nRecommended:\n  runner --session DIR -- tclsh\n",
		"  cancel_policy ctrl_c: ",
		"  --start-timeout 1m: the default is enough",
		"(exit 0).\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the table lacks %q:\n%s", want, stdout)
		}
	}
	if ents, _ := os.ReadDir(os.Getenv("TMPDIR")); len(ents) != 0 {
		t.Errorf("the temporary session was left though every check held: %v", ents)
	}

	code, stdout, _ = runCheck(t, "--json", "--", "tclsh")
	var rep toolcheck.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || code != ExitOK || !rep.OK || len(rep.Checks) != len(toolcheck.Titles) {
		t.Fatalf("--json: exit %d, %v:\n%s", code, err, stdout)
	}
	if c := rep.Checks[7]; c.Name != "cancel" || c.KeptState == nil || *c.KeptState || c.ToolRestarted == nil || !*c.ToolRestarted {
		t.Fatalf("--json cancel row %+v: tclsh dies of Ctrl-C", c)
	}
	if rep.Recommend.CancelPolicy != "ctrl_c" || strings.Join(rep.Recommend.Command, " ") != "runner --session DIR -- tclsh" {
		t.Fatalf("--json recommended %+v", rep.Recommend)
	}
}

// TestCheckFailedStart: a tool that exits at start is a start-up that
// does not hold, in the tool's own words; the checks after it are not
// run; exit 1; the session is kept and named for its logs.
func TestCheckFailedStart(t *testing.T) {
	code, stdout, _ := runCheck(t, "--", "sh", "-c", "echo 'Failed to check out license FAKE (queued)'; exit 1")
	if code != ExitError {
		t.Fatalf("exit %d, want 1:\n%s", code, stdout)
	}
	for _, want := range []string{"start-up", "NO", "Failed to check out license FAKE (queued)", "the tool exited with code 1",
		"the tool did not start", "The check's session is kept for its logs: ", "Not every guarantee holds on this tool (exit 1): start-up."} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the table lacks %q:\n%s", want, stdout)
		}
	}
	kept := regexp.MustCompile(`kept for its logs: (\S+)`).FindStringSubmatch(stdout)
	if kept == nil {
		t.Fatal("no kept session named")
	}
	if _, err := os.Stat(filepath.Join(kept[1], "log", "meta.log")); err != nil {
		t.Fatalf("the kept session has no log: %v", err)
	}
}

package conformance

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/internal/testenv"
	"github.com/skillpilot/skillpilot/master"
)

// goDuration matches what the status view prints for a time (Go's
// Duration.String after rounding): it differs between two calls a moment
// apart, so both outputs print it as D.
var aliveReason = regexp.MustCompile(`alive \([^)]*\)`)

var goDuration = regexp.MustCompile(`\b[0-9]+(\.[0-9]+)?(ns|µs|ms|s)\b|\b[0-9]+h[0-9]+m[0-9.]+s\b|\b[0-9]+m[0-9.]+s\b`)

// TestPythonStatusLayout: the Python CLI's status prints the Go CLI's
// lines, word for word, on the same session (a running command with a
// prompt, a finished and a failed command, a lease, retention), and the
// Go, Python and Tcl masters' status documents have the same keys.
func TestPythonStatusLayout(t *testing.T) {
	t.Parallel()
	py := testenv.NeedTool(t, "python3", "python3")
	testenv.NeedTool(t, "tclsh", "tcl")
	bin := MakeBin(t)
	dir := filepath.Join(t.TempDir(), "sess")
	// Retention on, with a spool cap in GiB: the retention line and key.
	runner := exec.Command(filepath.Join(bin, "runner"), "--session", dir, "--heartbeat", "200ms",
		"--keep-results", "14d", "--keep-last", "200000", "--max-spool-bytes", "8GiB")
	if err := runner.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = runner.Process.Kill(); _ = runner.Wait() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := master.WaitReady(ctx, dir, master.WaitOptions{}); err != nil {
		t.Fatal(err)
	}
	s, err := master.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Run(ctx, "puts done; expr 1", master.SubmitOptions{TraceID: "flow-9/sta"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run(ctx, "error boom", master.SubmitOptions{}); err == nil {
		t.Fatal("error boom: no error")
	}
	if _, err := s.WriteLease("status-layout", 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	c, err := s.Submit(ctx, `puts -nonewline "Overwrite? (y/n) "; flush stdout; after 60000`, master.SubmitOptions{TraceID: "flow-9/write"})
	if err != nil {
		t.Fatal(err)
	}
	for {
		st, err := s.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.CurrentCmdID == c.ID && st.CurrentLastLine != "" {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the command never ran with its prompt: %+v", st)
		case <-time.After(20 * time.Millisecond):
		}
	}
	status := func(argv ...string) string {
		var flags []string
		if argv[len(argv)-1] == "--json" {
			argv, flags = argv[:len(argv)-1], []string{"--json"}
		}
		cmd := exec.Command(argv[0], append(append(argv[1:], "status", "--session", dir), flags...)...)
		cmd.Env = append(os.Environ(), "PYTHONPATH="+repoPath(t, "clients/python"), "PYTHONDONTWRITEBYTECODE=1")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%v: %v\n%s", argv, err, out)
		}
		// The reason for "alive" may differ: the Go master also takes a
		// held lock and a fresh heartbeat on a local filesystem as alive at
		// once, the Python master watches the counter (PROTOCOL.md §8).
		return aliveReason.ReplaceAllString(goDuration.ReplaceAllString(string(out), "D"), "alive (R)")
	}
	// The two CLIs look one after the other at a live session: a heartbeat
	// between them may move a figure (the running command's output bytes
	// are refreshed on every heartbeat). The layouts must agree on some
	// pair of looks within a few heartbeats, and then on every line.
	var goOut, pyOut string
	for try := 0; try < 20; try++ {
		goOut = status(filepath.Join(bin, "master"))
		pyOut = status(py, "-m", "skillpilot")
		if pyOut == goOut {
			break
		}
		time.Sleep(150 * time.Millisecond)
	}
	if pyOut != goOut {
		t.Fatalf("python status differs from the Go CLI's:\n--- go\n%s--- python\n%s", goOut, pyOut)
	}
	// The --json documents have the same keys, nested ones included.
	var goKeys, pyKeys []string
	for try := 0; try < 20; try++ {
		goKeys = jsonKeys(t, status(filepath.Join(bin, "master"), "--json"))
		pyKeys = jsonKeys(t, status(py, "-m", "skillpilot", "--json"))
		if slices.Equal(goKeys, pyKeys) {
			break
		}
		time.Sleep(150 * time.Millisecond)
	}
	if !slices.Equal(goKeys, pyKeys) {
		t.Errorf("status --json keys differ:\n go     %q\n python %q", goKeys, pyKeys)
	}
	// The Tcl master's status dict has the same keys (and reason,
	// current_cmd_id always), its nested dicts' too.
	tclsh := testenv.NeedTool(t, "tclsh", "tcl")
	script := filepath.Join(t.TempDir(), "keys.tcl")
	if err := os.WriteFile(script, []byte(`lappend auto_path [lindex $argv 0]
package require skillpilot
set st [skillpilot::status [lindex $argv 1]]
foreach k [dict keys $st] {
    puts $k
    if {$k in {lease retention current_labels}} { foreach s [dict keys [dict get $st $k]] { puts $k.$s } }
}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	var tclKeys []string
	for try := 0; try < 20; try++ {
		out, err := exec.Command(tclsh, script, repoPath(t, "clients/tcl"), dir).Output()
		if err != nil {
			t.Fatalf("tcl status: %v", err)
		}
		tclKeys = slices.DeleteFunc(strings.Fields(string(out)), func(k string) bool {
			return (k == "reason" || k == "current_cmd_id") && !slices.Contains(goKeys, k)
		})
		slices.Sort(tclKeys)
		if slices.Equal(goKeys, tclKeys) {
			break
		}
		goKeys = jsonKeys(t, status(filepath.Join(bin, "master"), "--json"))
		time.Sleep(150 * time.Millisecond)
	}
	if !slices.Equal(goKeys, tclKeys) {
		t.Errorf("status keys differ:\n go  %q\n tcl %q", goKeys, tclKeys)
	}
	for _, want := range []string{"running   " + c.ID, "retention keeps results for 14d, the last 200000, spool 8.0 GiB (grace D); 2 results kept, 0 pruned by this runner", `at: "Overwrite? (y/n) "`, "lease     status-layout: D left (ttl D)",
		"error (", "done      2 commands since the runner started", ", trace flow-9/write at:", ", trace flow-9/sta"} {
		if !strings.Contains(goOut, want) {
			t.Errorf("status lacks %q:\n%s", want, goOut)
		}
	}
	_, _ = s.Cancel(ctx, c.ID)
}

// jsonKeys lists a JSON document's keys, nested objects' as parent.key,
// sorted.
func jsonKeys(t *testing.T, doc string) []string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(doc), &m); err != nil {
		t.Fatalf("status --json: %v\n%s", err, doc)
	}
	var keys []string
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			keys = append(keys, prefix+k)
			if sub, ok := v.(map[string]any); ok {
				walk(prefix+k+".", sub)
			}
		}
	}
	walk("", m)
	slices.Sort(keys)
	return keys
}

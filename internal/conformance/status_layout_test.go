package conformance

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
// prompt, a finished and a failed command, a lease).
func TestPythonStatusLayout(t *testing.T) {
	t.Parallel()
	py := testenv.NeedTool(t, "python3", "python3")
	testenv.NeedTool(t, "tclsh", "tcl")
	bin := MakeBin(t)
	dir := filepath.Join(t.TempDir(), "sess")
	runner := exec.Command(filepath.Join(bin, "runner"), "--session", dir, "--heartbeat", "200ms")
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
		cmd := exec.Command(argv[0], append(argv[1:], "status", "--session", dir)...)
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
	for _, want := range []string{"running   " + c.ID, `at: "Overwrite? (y/n) "`, "lease     status-layout: D left (ttl D)",
		"error (", "done      2 commands since the runner started", ", trace flow-9/write at:", ", trace flow-9/sta"} {
		if !strings.Contains(goOut, want) {
			t.Errorf("status lacks %q:\n%s", want, goOut)
		}
	}
	_, _ = s.Cancel(ctx, c.ID)
}

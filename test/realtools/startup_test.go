package realtools

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/internal/sessioncheck"
	"github.com/skillpilot/skillpilot/internal/testenv"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
)

// TestStartRejected: a tool that answers the start-up at its prompt with
// errors (Yosys given Tcl) is given up on after two such starts, although
// --max-restarts allows five, with exit code 4 and the tool's own lines
// in the reason in state.json, meta.log and the runner's stderr.
func TestStartRejected(t *testing.T) {
	testenv.Slow(t, "real EDA shells")
	testenv.NeedTool(t, "yosys", "yosys")
	rp := testenv.StartRunner(t, testenv.RunnerOptions{NoWait: true, Args: []string{"--kind", "tcl", "--", "yosys"},
		Check: sessioncheck.Options{}})
	err := rp.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 4 {
		t.Fatalf("runner exit %v, want exit code 4", err)
	}
	st, err := testenv.ReadState(rp.Dir)
	if err != nil {
		t.Fatal(err)
	}
	const said = "ERROR: No such command: namespace"
	for _, want := range []string{said, "rejected the same way by 2 starts in a row", "--kind tcl"} {
		if !strings.Contains(st.Reason, want) {
			t.Errorf("state.json reason %q lacks %q", st.Reason, want)
		}
	}
	starts, failed := 0, 0
	f, err := os.Open(filepath.Join(rp.Dir, protocol.FileMeta))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if strings.Contains(l, `"event":"tool_start"`) {
			starts++
		}
		if strings.Contains(l, `"start_failed"`) && strings.Contains(l, said) {
			failed++
		}
	}
	if starts != 2 || failed != 2 {
		t.Fatalf("meta.log: %d tool starts and %d start_failed events quoting the tool, want 2 and 2", starts, failed)
	}
	s, err := master.Open(rp.Dir)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := s.Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ms.Reason, said) || !strings.Contains(ms.AliveReason, said) {
		t.Fatalf("master status does not quote the tool: reason %q, alive %q", ms.Reason, ms.AliveReason)
	}
}

// TestSlowStartServes: a tool still starting (a whole line, then seconds
// of silence; progress dots without a newline) is not taken for one that
// rejects the start-up: it serves once it is ready.
func TestSlowStartServes(t *testing.T) {
	testenv.Slow(t, "real EDA shells")
	testenv.NeedTool(t, "tclsh", "tcl")
	for name, script := range map[string]string{
		"silent after a line": `echo "checking out a licence"; sleep 3; exec tclsh`,
		"progress dots":       `printf "loading the design"; for i in 1 2 3 4 5 6; do sleep 0.5; printf .; done; echo; exec tclsh`,
	} {
		t.Run(name, func(t *testing.T) {
			_, s := session(t, nil, "sh", "-c", script)
			res, out := run(t, s, "puts ready", master.SubmitOptions{})
			must(t, "first command", res, out, protocol.StatusOK, "ready\n")
			st, err := s.ReadState()
			if err != nil || st.ToolStarts != 1 {
				t.Fatalf("tool_starts %d (%v), want 1: the slow start was not retried", st.ToolStarts, err)
			}
		})
	}
}

// TestLicenceWait: a tool that prints "Checking out license FAKE_EDA..."
// without a newline and then reads nothing for longer than the old
// rejection took (four quiet rounds, about 8 s) is still starting: it is
// not given up on, and it serves once its licence comes. Meanwhile the
// runner's loop goes on: the heartbeat beats and a cancel of a queued
// command is answered, although the start-up it typed waits in a terminal
// nobody reads.
func TestLicenceWait(t *testing.T) {
	testenv.Slow(t, "a 10 s licence wait")
	testenv.NeedTool(t, "tclsh", "tcl")
	gate := filepath.Join(t.TempDir(), "licence")
	// The tool waits for a file the test creates, not for a time: the test
	// decides when the licence comes (never before it has checked the
	// runner during the wait).
	script := `printf "Checking out license FAKE_EDA..."; while [ ! -e '` + gate + `' ]; do sleep 0.1; done; printf " done\nFAKE_EDA 1.0\n"; exec tclsh`
	rp := testenv.StartRunner(t, testenv.RunnerOptions{NoWait: true, Args: []string{"--max-restarts", "0", "--", "sh", "-c", script}})
	for deadline := time.Now().Add(testenv.LongWait); ; time.Sleep(20 * time.Millisecond) {
		if _, err := testenv.ReadState(rp.Dir); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("no state.json: %v", err)
		}
	}
	s, err := master.Open(rp.Dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	c, err := s.Submit(ctx, "puts licensed", master.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	queued, err := s.Submit(ctx, "puts never", master.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Wait past the old verdict (0.5+1+2+4 s of quiet rounds), watching the
	// heartbeat move.
	var lastBeat int64
	beats := 0
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		hb, err := testenv.ReadHeartbeat(rp.Dir)
		if err != nil {
			continue
		}
		if hb.Counter != lastBeat {
			beats++
			lastBeat = hb.Counter
		}
		st, err := s.ReadState()
		if err == nil && (st.Phase == protocol.PhaseStopped || st.Phase == protocol.PhaseError) {
			t.Fatalf("the runner judged a licence wait as a failed start: phase %s, %s", st.Phase, st.Reason)
		}
	}
	if beats < 5 {
		t.Fatalf("the heartbeat moved %d times in 10 s of licence wait (every 200 ms expected)", beats)
	}
	rep, err := s.Cancel(ctx, queued.ID)
	if err != nil || rep.Outcome != protocol.OutcomeCancelledQueued {
		t.Fatalf("a cancel during the licence wait: %+v %v, want cancelled_queued", rep, err)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := c.Wait(ctx, master.WaitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := c.Output(0, -1)
	must(t, "after the licence", res, string(out), protocol.StatusOK, "licensed\n")
	st, err := s.ReadState()
	if err != nil || st.ToolStarts != 1 {
		t.Fatalf("tool_starts %d (%v), want 1", st.ToolStarts, err)
	}
}

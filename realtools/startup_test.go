package realtools

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

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

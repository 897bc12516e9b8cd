package standin_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skillpilot/skillpilot/protocol"
	"github.com/skillpilot/skillpilot/review"
	"github.com/skillpilot/skillpilot/review/diff"
	"github.com/skillpilot/skillpilot/review/internal/sessiontest"
	"github.com/skillpilot/skillpilot/review/standin"
)

// edaProcs is what the flow defines first, as an EDA flow loads its
// helpers: procs that print reports and return values.
const edaProcs = `proc report_timing {args} {
    puts "Path 1: slack -0.042 (VIOLATED)"
    puts "Path 2: slack 0.118 (MET)"
    return [llength $args]
}
proc place_design {} { error "ERROR: (IMPL-17) placement failed: 12 cells overlap" }
set design top
puts "design $design loaded"`

// flow runs the EDA-like flow on the runner serving dir and returns its
// commands in order. A repeated payload (clock microseconds) is answered
// differently each time, twice before the cancel and the exit that restart
// the tool, once after: the stand-in must not start its replay over.
func flow(t *testing.T, r *sessiontest.Runner) []sessiontest.Cmd {
	t.Helper()
	dir := r.Dir
	var cmds []sessiontest.Cmd
	step := func(payload string) sessiontest.Cmd {
		c := sessiontest.Cmd{Seq: int64(len(cmds) + 1), ID: fmt.Sprintf("step%02d", len(cmds)+1), Payload: payload}
		cmds = append(cmds, c)
		return c
	}
	run := func(payload string) {
		c := step(payload)
		sessiontest.Submit(t, dir, c)
		sessiontest.WaitResult(t, dir, c)
	}
	run(edaProcs)
	run("report_timing -max_paths 5 -nworst 1")
	run("place_design")                                                                    // fails
	run("expr {6 * 7}")                                                                    // a value
	run("set s \"héllo ✓ \\u00e9\"")                                                       // a non-ASCII value
	run(`puts -nonewline "progress 10%\rprogress 100%\n"`)                                 // a lone CR
	run(`set line [string repeat x 63]; for {set i 0} {$i < 16384} {incr i} {puts $line}`) // 1 MiB
	run("clock microseconds")
	run("clock microseconds")
	c := step("puts {routing...}; flush stdout; after 60000") // cancelled
	sessiontest.Submit(t, dir, c)
	sessiontest.WaitOutput(t, dir, c, int64(len("routing..."))) // The newline is held back until more output comes.
	sessiontest.Cancel(t, dir, c.ID)
	sessiontest.WaitResult(t, dir, c)
	run("exit 3") // the tool exits: restarted, init rerun
	run("clock microseconds")
	to := step("puts {waiting for a license}; flush stdout; after 60000") // times out
	to.TimeoutS = 0.3
	sessiontest.Submit(t, dir, to)
	sessiontest.WaitResult(t, dir, to)
	run("exec kill -KILL [pid]") // the tool dies of a signal
	run("return -code break")
	run("puts {all done}")
	return cmds
}

// readResult reads the result of c in dir.
func readResult(t *testing.T, dir string, c sessiontest.Cmd) *protocol.Result {
	t.Helper()
	return sessiontest.WaitResult(t, dir, c)
}

func fileSHA(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func load(t *testing.T, dir string) *review.Session {
	t.Helper()
	s, err := review.Load(dir, review.Options{Payloads: true})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func generate(t *testing.T, path string, opt standin.Options, dirs ...string) standin.Stats {
	t.Helper()
	var sessions []*review.Session
	for _, d := range dirs {
		sessions = append(sessions, load(t, d))
	}
	var buf bytes.Buffer
	st, err := standin.Generate(&buf, sessions, opt)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestStandinReplaysRecordedFlow is the stand-in's test: record an EDA-like flow
// on real tclsh, generate the stand-in, run the same flow through a runner
// on plain tclsh with the stand-in, and require the same status, value and
// output sha256 for every command; master diff's comparison agrees, and
// finds a planted difference.
func TestStandinReplaysRecordedFlow(t *testing.T) {
	sessiontest.RequireTclsh(t)
	base := t.TempDir()
	recDir, repDir := filepath.Join(base, "recorded"), filepath.Join(base, "replayed")
	rec := sessiontest.Start(t, recDir, "--", "tclsh")
	cmds := flow(t, rec)
	rec.Stop()

	file := filepath.Join(base, "standin.tcl")
	st := generate(t, file, standin.Options{}, recDir)
	// Recorded: every command of the flow (none is skipped).
	if st.Recordings != len(cmds) || len(st.Skipped) != 0 {
		t.Fatalf("stand-in holds %d recordings (skipped %v), the flow ran %d", st.Recordings, st.Skipped, len(cmds))
	}

	rep := sessiontest.Start(t, repDir, "--init", file, "--", "tclsh")
	flow(t, rep)
	rep.Stop()

	for _, c := range cmds {
		a, b := readResult(t, recDir, c), readResult(t, repDir, c)
		if a.Status != b.Status || a.ExitReason != b.ExitReason {
			t.Errorf("%s %q: recorded %s/%s, replayed %s/%s (%v)", c.ID, c.Payload, a.Status, a.ExitReason, b.Status, b.ExitReason, b.Error)
		}
		if (a.Value == nil) != (b.Value == nil) || a.Value != nil && *a.Value != *b.Value {
			t.Errorf("%s %q: recorded value %v, replayed %v", c.ID, c.Payload, show(a.Value), show(b.Value))
		}
		if a.OutputSHA256 != b.OutputSHA256 || a.Stats.Bytes != b.Stats.Bytes {
			t.Errorf("%s %q: output differs: recorded %d bytes %s, replayed %d bytes %s", c.ID, c.Payload,
				a.Stats.Bytes, a.OutputSHA256[:12], b.Stats.Bytes, b.OutputSHA256[:12])
		}
		// The result's sha256 is the file's.
		if got := fileSHA(t, filepath.Join(repDir, b.OutputPath)); got != b.OutputSHA256 {
			t.Errorf("%s: output file sha256 %s, result says %s", c.ID, got, b.OutputSHA256)
		}
	}
	// The flow really had what the issue asks for.
	want := map[string]protocol.Status{"step03": protocol.StatusError, "step10": protocol.StatusCancelled, "step11": protocol.StatusError,
		"step13": protocol.StatusTimeout, "step14": protocol.StatusError}
	for id, s := range want {
		if r := readResult(t, repDir, sessiontest.Cmd{Seq: seqOf(id), ID: id}); r.Status != s {
			t.Errorf("%s replayed as %s, want %s", id, r.Status, s)
		}
	}
	if r := readResult(t, recDir, cmds[6]); r.Stats.Bytes != 1<<20 {
		t.Errorf("the big command printed %d bytes, want 1 MiB", r.Stats.Bytes)
	}
	// Three recordings of one payload answered in order across two tool
	// restarts: the replayed values are the recorded ones, which differ.
	vals := map[string]bool{}
	for _, i := range []int{7, 8, 11} {
		vals[*readResult(t, repDir, cmds[i]).Value] = true
	}
	if len(vals) != 3 {
		t.Errorf("clock microseconds replayed %d distinct values, want the 3 recorded ones in order", len(vals))
	}
	if r := readResult(t, repDir, cmds[13]); r.ExitReason != protocol.ReasonToolDied || r.Signal != "SIGKILL" {
		t.Errorf("the killed tool replayed as %s %q", r.ExitReason, r.Signal)
	}
	if st, err := sessiontest.ReadState(repDir); err != nil || st.ToolStarts < 5 {
		t.Errorf("the replay restarted the tool %d times, want 4 (cancel, exit, timeout, kill): %v", st.ToolStarts-1, err)
	}

	// diff: the recorded and replayed runs agree.
	d := diff.Compare(load(t, recDir), load(t, repDir))
	if !d.Agree || d.Matched != len(cmds) {
		var b bytes.Buffer
		diff.WriteText(&b, d)
		t.Fatalf("diff of recorded and replayed runs: agree=%v matched=%d\n%s", d.Agree, d.Matched, b.String())
	}
	// A planted difference: one line of a report and the value.
	planted := filepath.Join(base, "planted")
	if out, err := exec.Command("cp", "-a", repDir, planted).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	plant(t, planted, cmds[1], "Path 2: slack 0.118 (MET)", "Path 2: slack -0.007 (VIOLATED)", "2")
	d = diff.Compare(load(t, recDir), load(t, planted))
	if d.Agree || d.Different != 1 || len(d.Differences) != 1 {
		t.Fatalf("the planted difference was not found: %+v", d)
	}
	p := d.Differences[0]
	if strings.Join(p.Differs, ",") != "value,output" || !strings.Contains(p.OutputDiff, "-Path 2: slack 0.118 (MET)") ||
		!strings.Contains(p.OutputDiff, "+Path 2: slack -0.007 (VIOLATED)") {
		t.Errorf("difference reported as %v:\n%s", p.Differs, p.OutputDiff)
	}
}

func seqOf(id string) int64 {
	var n int64
	fmt.Sscanf(id, "step%d", &n)
	return n
}

func show(v *string) string {
	if v == nil {
		return "(none)"
	}
	return fmt.Sprintf("%q", *v)
}

// plant edits a finished command of a session copy: a line of its output
// (keeping its result's sha256 and size consistent) and its value.
func plant(t *testing.T, dir string, c sessiontest.Cmd, old, new, value string) {
	t.Helper()
	res := readResult(t, dir, c)
	outPath := filepath.Join(dir, res.OutputPath)
	b, err := os.ReadFile(outPath)
	if err != nil {
		t.Fatal(err)
	}
	nb := bytes.Replace(b, []byte(old), []byte(new), 1)
	if bytes.Equal(nb, b) {
		t.Fatalf("%q not in the output of %s", old, c.ID)
	}
	sum := sha256.Sum256(nb)
	res.OutputSHA256, res.Stats.Bytes, res.Value = hex.EncodeToString(sum[:]), int64(len(nb)), &value
	rb, err := jsonMarshal(res)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(outPath, nb, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, protocol.DirResult, c.Name()), rb, 0o600); err != nil {
		t.Fatal(err)
	}
}

package standin_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
	"github.com/skillpilot/skillpilot/review"
	"github.com/skillpilot/skillpilot/review/internal/sessiontest"
	"github.com/skillpilot/skillpilot/review/standin"
)

// record runs payloads one after the other on a fresh runner on tclsh.
func record(t *testing.T, dir string, payloads ...string) []*protocol.Result {
	t.Helper()
	r := sessiontest.Start(t, dir, "--", "tclsh")
	var out []*protocol.Result
	for i, p := range payloads {
		c := sessiontest.Cmd{Seq: int64(i + 1), ID: "r" + string(rune('a'+i)), Payload: p}
		sessiontest.Submit(t, dir, c)
		out = append(out, sessiontest.WaitResult(t, dir, c))
	}
	r.Stop()
	return out
}

// replay runs payloads on a runner with the stand-in file as init script.
func replay(t *testing.T, dir, file string, payloads ...string) []*protocol.Result {
	t.Helper()
	r := sessiontest.Start(t, dir, "--init", file, "--", "tclsh")
	var out []*protocol.Result
	for i, p := range payloads {
		c := sessiontest.Cmd{Seq: int64(i + 1), ID: "p" + string(rune('a'+i)), Payload: p}
		sessiontest.Submit(t, dir, c)
		out = append(out, sessiontest.WaitResult(t, dir, c))
	}
	r.Stop()
	return out
}

func value(r *protocol.Result) string {
	if r.Value == nil {
		return "(none)"
	}
	return *r.Value
}

// TestStandinMatching covers the documented matching rule: recordings of
// one payload are replayed in recorded order across the sessions given
// (in the order given), then the last repeats; an unrecorded payload fails
// with an error naming it, or runs in tclsh with --on-unknown tcl.
func TestStandinMatching(t *testing.T) {
	sessiontest.RequireTclsh(t)
	base := t.TempDir()
	a, b := filepath.Join(base, "a"), filepath.Join(base, "b")
	ra := record(t, a, "clock microseconds", "puts first; clock microseconds")
	rb := record(t, b, "clock microseconds")
	recorded := []string{value(ra[0]), value(rb[0])}
	if recorded[0] == recorded[1] {
		t.Fatal("two recordings of clock microseconds are equal")
	}

	strict := filepath.Join(base, "strict.tcl")
	generate(t, strict, standin.Options{}, a, b)
	got := replay(t, filepath.Join(base, "s1"), strict,
		"clock microseconds", "clock microseconds", "clock microseconds", "puts unrecorded; expr 1", "puts first; clock microseconds")
	for i, want := range []string{recorded[0], recorded[1], recorded[1]} {
		if value(got[i]) != want {
			t.Errorf("occurrence %d answered %q, want %q (recordings %v, in order, then the last)", i+1, value(got[i]), want, recorded)
		}
	}
	un := got[3]
	if un.Status != protocol.StatusError || un.Error == nil || !strings.Contains(un.Error.Message, "not recorded") ||
		!strings.Contains(un.Error.Message, "puts unrecorded; expr 1") {
		t.Errorf("an unrecorded command gave %s: %+v", un.Status, un.Error)
	}
	if value(got[4]) != value(ra[1]) || got[4].OutputSHA256 != ra[1].OutputSHA256 {
		t.Errorf("a payload recorded once: got %q, recorded %q", value(got[4]), value(ra[1]))
	}

	// Deleting the positions file starts the replay over in the same session.
	pos, _ := filepath.Glob(filepath.Join(base, "s1", "log", "standin-*.positions"))
	if len(pos) != 1 {
		t.Fatalf("positions files: %v", pos)
	}
	if err := os.Remove(pos[0]); err != nil {
		t.Fatal(err)
	}
	r := sessiontest.Start(t, filepath.Join(base, "s1"), "--init", strict, "--", "tclsh")
	again := sessiontest.Cmd{Seq: 10, ID: "again", Payload: "clock microseconds"}
	sessiontest.Submit(t, r.Dir, again)
	if v := value(sessiontest.WaitResult(t, r.Dir, again)); v != recorded[0] {
		t.Errorf("after deleting the positions file: %q, want the first recording %q", v, recorded[0])
	}
	r.Stop()

	lenient := filepath.Join(base, "lenient.tcl")
	generate(t, lenient, standin.Options{OnUnknown: "tcl"}, a)
	got = replay(t, filepath.Join(base, "s2"), lenient, "puts unrecorded; expr {6*7}")
	if got[0].Status != protocol.StatusOK || value(got[0]) != "42" {
		t.Errorf("--on-unknown tcl: %s %q %+v", got[0].Status, value(got[0]), got[0].Error)
	}
}

// TestStandinTiming: with --timing recorded (or scale=F) an answer takes at
// least the recorded time (× F). Only lower bounds are checked.
func TestStandinTiming(t *testing.T) {
	sessiontest.RequireTclsh(t)
	base := t.TempDir()
	rec := filepath.Join(base, "rec")
	r := record(t, rec, "after 400; expr 1")
	if r[0].Stats.DurationMS < 400 {
		t.Fatalf("recorded %dms", r[0].Stats.DurationMS)
	}
	for _, tc := range []struct {
		timing string
		min    int64
	}{{"recorded", r[0].Stats.DurationMS}, {"scale=0.5", r[0].Stats.DurationMS / 2}} {
		file := filepath.Join(base, tc.timing+".tcl")
		generate(t, file, standin.Options{Timing: tc.timing}, rec)
		got := replay(t, filepath.Join(base, "rep-"+tc.timing), file, "after 400; expr 1")
		if got[0].Stats.DurationMS < tc.min || value(got[0]) != "1" {
			t.Errorf("--timing %s: took %dms (want at least %dms), value %q", tc.timing, got[0].Stats.DurationMS, tc.min, value(got[0]))
		}
	}
}

// TestStandinOutsideRunner: sourced into a plain tclsh, the stand-in says
// how to use it instead of failing obscurely.
func TestStandinOutsideRunner(t *testing.T) {
	sessiontest.RequireTclsh(t)
	base := t.TempDir()
	rec := filepath.Join(base, "rec")
	record(t, rec, "expr 1")
	file := filepath.Join(base, "s.tcl")
	generate(t, file, standin.Options{}, rec)
	out, err := exec.Command("tclsh", file).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || !strings.Contains(string(out), "runner --init FILE") {
		t.Errorf("tclsh %s: %v\n%s", file, err, out)
	}
}

// TestStandinHostilePositionsFile: a symlink where the positions file
// belongs is refused (the init fails with the reason in state.json; no
// command runs), never followed.
func TestStandinHostilePositionsFile(t *testing.T) {
	sessiontest.RequireTclsh(t)
	base := t.TempDir()
	rec := filepath.Join(base, "rec")
	record(t, rec, "expr 1")
	file := filepath.Join(base, "s.tcl")
	st := generate(t, file, standin.Options{}, rec)
	dir := filepath.Join(base, "rep")
	if err := os.MkdirAll(filepath.Join(dir, "log"), 0o700); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(base, "victim")
	if err := os.WriteFile(target, []byte("keep me\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(dir, "log", "standin-"+st.ID+".positions")); err != nil {
		t.Fatal(err)
	}
	r := sessiontest.StartNoWait(t, dir, "--init", file, "--", "tclsh")
	r.WaitPhase(protocol.PhaseError)
	state, err := sessiontest.ReadState(dir)
	if err != nil || !strings.Contains(state.Reason, "not a regular file") {
		t.Errorf("state: %+v %v", state, err)
	}
	if b, _ := os.ReadFile(target); string(b) != "keep me\n" {
		t.Errorf("the symlink's target was changed: %q", b)
	}
}

// TestGenerateRefusesAndSkips: options are checked; commands that never
// reached the tool are not embedded; a shell session is refused.
func TestGenerateRefusesAndSkips(t *testing.T) {
	for _, bad := range []standin.Options{{Timing: "fast"}, {Timing: "scale=-1"}, {OnUnknown: "ignore"}} {
		if _, err := standin.Generate(&bytes.Buffer{}, nil, bad); !errors.Is(err, standin.ErrUsage) {
			t.Errorf("%+v: %v, want ErrUsage", bad, err)
		}
	}
	sessiontest.RequireTclsh(t)
	dir := filepath.Join(t.TempDir(), "s")
	r := sessiontest.Start(t, dir, "--", "tclsh")
	blocker := sessiontest.Cmd{Seq: 1, ID: "blocker", Payload: "puts go; flush stdout; after 60000"}
	queued := sessiontest.Cmd{Seq: 2, ID: "queued", Payload: "expr 2"}
	sessiontest.Submit(t, dir, blocker)
	sessiontest.Submit(t, dir, queued)
	sessiontest.WaitOutput(t, dir, blocker, 2)
	sessiontest.Cancel(t, dir, queued.ID)
	sessiontest.WaitResult(t, dir, queued)
	sessiontest.Cancel(t, dir, blocker.ID)
	sessiontest.WaitResult(t, dir, blocker)
	if err := sessiontest.WriteAtomic(filepath.Join(dir, protocol.DirQueue, "cmd_3_bad.json"), []byte(`{"seq":3}`)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(sessiontest.LongWait)
	for { // Its result has the file's own name.
		if _, err := os.Stat(filepath.Join(dir, protocol.DirResult, "cmd_3_bad.json")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no result for the invalid command file")
		}
		time.Sleep(10 * time.Millisecond)
	}
	r.Stop()
	s, err := review.Load(dir, review.Options{Payloads: true})
	if err != nil {
		t.Fatal(err)
	}
	st, err := standin.Generate(&bytes.Buffer{}, []*review.Session{s}, standin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Recordings != 1 || len(st.Skipped) != 2 {
		t.Errorf("recordings %d, skipped %v: want the blocker only, the queued and the invalid command skipped", st.Recordings, st.Skipped)
	}
	s.Commands[0].Kind = protocol.KindSh
	if _, err := standin.Generate(&bytes.Buffer{}, []*review.Session{s}, standin.Options{}); err == nil || !strings.Contains(err.Error(), "shell") {
		t.Errorf("a shell session: %v", err)
	}
}

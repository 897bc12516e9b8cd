package runner

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/skillpilot/skillpilot/protocol"
)

// A runner whose session directory is deleted, and a new runner started at
// the same path: the first stops with its tool (exit 5,
// session_lost), writes nothing into the new session and answers none of
// its requests; the second serves it and is the one a stop stops.
func TestSessionDeletedOldRunnerStops(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "s")
	old := startRunnerProc(t, "--session", dir, "--heartbeat", "100ms")
	writeCmd(t, dir, 1, "long", "puts go; flush stdout; after 600000")
	hh := &harness{t: t, dir: dir}
	hh.waitFor("busy", func() bool { return hh.state().Phase == protocol.PhaseBusy })
	oldState := hh.state()
	oldTool := oldState.ToolPID
	// The runner may write a temporary file into tmp/ while it is being
	// emptied, as under rm -rf: try again (TestGoneRmRfBusySession too).
	var err error
	for i := 0; i < 20; i++ {
		if err = os.RemoveAll(dir); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	second := startRunnerProc(t, "--session", dir, "--heartbeat", "100ms")
	if code := old.ExitCode(); code != ExitLost {
		t.Fatalf("the old runner exited %d, want %d (session lost); stderr:\n%s", code, ExitLost, old.Log())
	}
	if !strings.Contains(old.Log(), "the session was taken away") {
		t.Errorf("stderr does not say why:\n%s", old.Log())
	}
	hh.waitFor("the old tool to die with its runner", func() bool { return !pidAlive(oldTool) || zombie(oldTool) })
	// The new session is the second runner's alone.
	name := writeCmd(t, dir, 1, "fresh", "expr 6*7")
	if r := waitResultFile(t, dir, name); r.Status != protocol.StatusOK || *r.Value != "42" {
		t.Fatalf("%+v", r)
	}
	for _, e := range readEvents(t, dir) {
		if e.Event == protocol.EvRunnerStart && e.Detail["session_id"] == oldState.SessionID {
			t.Fatalf("the old runner wrote into the new session: %+v", e)
		}
		if e.Event == protocol.EvRunnerStop {
			t.Fatalf("a runner_stop in the new session while its runner serves: %+v", e)
		}
	}
	if st := hh.state(); st.SessionID == oldState.SessionID || st.Phase == protocol.PhaseStopped {
		t.Fatalf("state.json of the new session: %+v", st)
	}
	os.WriteFile(filepath.Join(dir, protocol.FileStop), nil, 0o600)
	if code := second.ExitCode(); code != 0 {
		t.Fatalf("the second runner exited %d", code)
	}
	checkNoOrphans(t, dir)
}

// A runner whose lock file is replaced by one another process holds (a new
// runner after state/ was cleaned up) stops at its next heartbeat; so does
// one whose lock file is merely deleted or replaced (TestGoneLockStopsRunner).
func TestLockTakenOldRunnerStops(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "s")
	p := startRunnerProc(t, "--session", dir, "--heartbeat", "100ms")
	hh := &harness{t: t, dir: dir}
	hh.waitFor("idle", func() bool { return hh.state().Phase == protocol.PhaseIdle })
	lock := filepath.Join(dir, protocol.FileLock)
	if err := os.Remove(lock); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(lock, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	if code := p.ExitCode(); code != ExitLost {
		t.Fatalf("exit %d, want %d; stderr:\n%s", code, ExitLost, p.Log())
	}
	st := hh.state()
	if st.Phase != protocol.PhaseStopped || st.Error == nil || st.Error.Code != protocol.CodeSessionLost {
		t.Fatalf("%+v %+v", st, st.Error)
	}
	checkNoOrphans(t, dir)
}

package testenv

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/internal/sessioncheck"
	"github.com/skillpilot/skillpilot/protocol"
)

// LongWait bounds every wait of this package: an anti-hang guard, not a
// timing assertion.
const LongWait = 120 * time.Second

// stopGrace is how long the cleanup waits after SIGTERM (a graceful stop)
// before it kills the runner; forceGrace after a force stop.
const (
	stopGrace  = 90 * time.Second
	forceGrace = 30 * time.Second
)

// RunnerOptions say how [StartRunner] starts a runner process. The zero
// value runs tclsh on a new session with a fast heartbeat and poll, waits
// until it serves, and checks the session with [sessioncheck.Options]{}
// when the test ends.
type RunnerOptions struct {
	// Dir is the session directory; "" makes a new one under t.TempDir().
	Dir string
	// Binary is the runner executable; "" builds cmd/runner ([BuildBinary]).
	Binary string
	// Flags come first ("": --heartbeat 200ms --poll 200ms).
	Flags []string
	// Args follow the flags: more flags, then "--" and the tool's argv
	// (nil: "--", "tclsh", which the test then needs).
	Args []string
	// Env is added to the runner's environment.
	Env []string
	// WorkDir is the runner's working directory, and so the tool's
	// ("": the test's).
	WorkDir string
	// NoWait returns as soon as the process has started, without waiting
	// for state.json to say idle or busy.
	NoWait bool
	// Check is what the session-invariant check at cleanup is told.
	Check sessioncheck.Options
	// NoCheck, when not empty, skips that check and says why (a test that
	// leaves the session mid-state on purpose). It is logged.
	NoCheck string
	// Stderr, when set, receives the runner's stderr (its stdout stays
	// in the log [RunnerProcess.Log] reads).
	Stderr io.Writer
	// AtEnd is how the cleanup ends a runner still running (default
	// [EndTerm]).
	AtEnd Ending
}

// Ending is how the cleanup of [StartRunner] ends a runner still running.
type Ending int

const (
	// EndTerm sends SIGTERM (a graceful stop), then SIGKILL after 90 s.
	EndTerm Ending = iota
	// EndKill sends SIGKILL at once (a crash: the runner's own tests).
	EndKill
	// EndForceStop writes a force stop (ctl/stop.json), then sends
	// SIGKILL after 30 s (the benchmarks).
	EndForceStop
)

// RunnerProcess is a runner process serving Dir: the one wrapper of a
// runner process the tests of every package use.
type RunnerProcess struct {
	Dir   string
	t     testing.TB
	cmd   *exec.Cmd
	done  chan error
	log   *os.File
	atEnd Ending
}

// StartRunner starts a runner process on a session (o.Dir or a new one)
// and, unless o.NoWait, waits until it serves. When the test ends the
// runner is stopped (SIGTERM, a graceful stop, then SIGKILL after 90 s),
// its output (stdout and stderr) is logged if the test failed, and then
// the session-invariant check runs on the session (o.Check; o.NoCheck
// opts out with a reason).
func StartRunner(t testing.TB, o RunnerOptions) *RunnerProcess {
	t.Helper()
	if o.Dir == "" {
		o.Dir = filepath.Join(t.TempDir(), "sess")
	}
	if o.Binary == "" {
		o.Binary = BuildBinary(t, Runner)
	}
	if o.Flags == nil {
		o.Flags = []string{"--heartbeat", "200ms", "--poll", "200ms"}
	}
	if o.Args == nil {
		NeedTool(t, "tclsh", "tcl")
		o.Args = []string{"--", "tclsh"}
	}
	if o.NoCheck != "" {
		SkipCheck(t, o.Dir, o.NoCheck)
	} else {
		CheckSession(t, o.Dir, o.Check) // Registered first: runs after the stop below.
	}
	logf, err := os.CreateTemp("", "testenv-runner-log")
	if err != nil {
		t.Fatal(err)
	}
	args := append(append([]string{"--session", o.Dir}, o.Flags...), o.Args...)
	cmd := exec.Command(o.Binary, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if o.Stderr != nil {
		cmd.Stderr = o.Stderr
	}
	cmd.Env = append(os.Environ(), o.Env...)
	cmd.Dir = o.WorkDir
	if err := cmd.Start(); err != nil {
		logf.Close()
		os.Remove(logf.Name())
		t.Fatal(err)
	}
	r := &RunnerProcess{Dir: o.Dir, t: t, cmd: cmd, done: make(chan error, 1), log: logf, atEnd: o.AtEnd}
	go func() { r.done <- cmd.Wait() }()
	t.Cleanup(func() {
		r.stop()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("runner log (%s):\n%s", o.Dir, b)
		}
		logf.Close()
		os.Remove(logf.Name())
	})
	if !o.NoWait {
		r.WaitPhase(protocol.PhaseIdle, protocol.PhaseBusy)
	}
	return r
}

// exited reports whether the process has exited (and been waited for).
func (r *RunnerProcess) exited() bool {
	select {
	case err := <-r.done:
		r.done <- err
		return true
	default:
		return false
	}
}

// stop ends a runner still running as r.atEnd says.
func (r *RunnerProcess) stop() {
	if r.exited() {
		return
	}
	grace := stopGrace
	switch r.atEnd {
	case EndKill:
		_ = r.cmd.Process.Kill()
		r.done <- <-r.done
		return
	case EndForceStop:
		grace = forceGrace
		_ = WriteAtomic(filepath.Join(r.Dir, protocol.FileStop), []byte(`{"mode":"force"}`)) // Then the kill below.
	default:
		_ = r.cmd.Process.Signal(syscall.SIGTERM)
	}
	select {
	case err := <-r.done:
		r.done <- err
		return
	case <-time.After(grace):
	}
	if r.atEnd == EndTerm {
		r.t.Errorf("runner on %s ignored SIGTERM for %v: killed", r.Dir, grace)
	}
	_ = r.cmd.Process.Kill()
	r.done <- <-r.done
}

// WaitPhase waits until state.json shows one of phases; it fails the test
// if the runner exits first.
func (r *RunnerProcess) WaitPhase(phases ...protocol.Phase) {
	r.t.Helper()
	deadline := time.Now().Add(LongWait)
	for time.Now().Before(deadline) {
		if st, err := ReadState(r.Dir); err == nil {
			for _, p := range phases {
				if st.Phase == p {
					return
				}
			}
		}
		select {
		case err := <-r.done:
			r.done <- err
			r.t.Fatalf("runner exited while waiting for phase %v: %v", phases, err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	r.t.Fatalf("runner never reached phase %v", phases)
}

// Stop asks for a graceful stop (ctl/stop.json) and waits for the exit.
func (r *RunnerProcess) Stop() {
	r.t.Helper()
	if err := WriteAtomic(filepath.Join(r.Dir, protocol.FileStop), []byte(`{"mode":"graceful"}`)); err != nil {
		r.t.Fatal(err)
	}
	r.Wait()
}

// Wait waits for the runner to exit by itself (stop, lease expiry) and
// returns how it exited.
func (r *RunnerProcess) Wait() error {
	r.t.Helper()
	select {
	case err := <-r.done:
		r.done <- err
		return err
	case <-time.After(LongWait):
		r.t.Fatal("runner did not exit")
		return nil
	}
}

// End ends the runner now, as the test's end would ([RunnerOptions.AtEnd]);
// a runner already gone is left as it is.
func (r *RunnerProcess) End() { r.stop() }

// ExitCode waits for the runner to exit by itself, as [RunnerProcess.Wait]
// does, and returns its exit code: -1 when a signal ended it.
func (r *RunnerProcess) ExitCode() int {
	r.t.Helper()
	err := r.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		r.t.Fatal(err)
	}
	return 0
}

// Signal sends sig to the runner process.
func (r *RunnerProcess) Signal(sig os.Signal) error { return r.cmd.Process.Signal(sig) }

// Pid is the runner's process id.
func (r *RunnerProcess) Pid() int { return r.cmd.Process.Pid }

// Log is what the runner has printed so far (stdout, and stderr unless
// [RunnerOptions.Stderr] took it).
func (r *RunnerProcess) Log() string {
	b, _ := os.ReadFile(r.log.Name()) // Gone only after the cleanup.
	return string(b)
}

// Kill kills the runner with SIGKILL (a crash) and waits for it; the tool
// dies with its PTY.
func (r *RunnerProcess) Kill() {
	r.t.Helper()
	_ = r.cmd.Process.Signal(syscall.SIGKILL)
	r.done <- <-r.done
}

// ReadState reads state/state.json of the session at dir.
func ReadState(dir string) (protocol.State, error) {
	var st protocol.State
	b, err := os.ReadFile(filepath.Join(dir, protocol.FileState))
	if err == nil {
		err = json.Unmarshal(b, &st)
	}
	return st, err
}

// ReadHeartbeat reads state/heartbeat.json of the session at dir.
func ReadHeartbeat(dir string) (protocol.Heartbeat, error) {
	var hb protocol.Heartbeat
	b, err := os.ReadFile(filepath.Join(dir, protocol.FileHeartbeat))
	if err == nil {
		err = json.Unmarshal(b, &hb)
	}
	return hb, err
}

// WriteAtomic writes path through a temporary dot-file and a rename, as a
// master does.
func WriteAtomic(path string, data []byte) error {
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

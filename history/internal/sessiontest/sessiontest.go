// Package sessiontest drives a real runner process on a real tool for the
// tests of the history packages. It talks to the session through files only,
// as any master may: command files renamed into queue/, results polled in
// result/, the legacy ctl/cancel.json and ctl/stop.json.
package sessiontest

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
)

// LongWait bounds every wait: an anti-hang guard, not a timing assertion.
const LongWait = 120 * time.Second

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// Binary returns the path of a runner binary built (without the race
// detector, so a long flow stays fast) once per test process.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "sessiontest")
		if buildErr != nil {
			return
		}
		out, err := exec.Command("go", "build", "-o", binDir, "github.com/skillpilot/skillpilot/cmd/runner").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("build runner: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(binDir, "runner")
}

// Cleanup removes the built binary; call it from TestMain after m.Run.
func Cleanup() {
	if binDir != "" {
		os.RemoveAll(binDir)
	}
}

// RequireTclsh fails (under CI=true) or skips the test when tclsh is missing.
func RequireTclsh(t testing.TB) {
	t.Helper()
	Require(t, "tclsh", "tcl")
}

// Require fails under CI (env CI=true) or skips with a message naming the
// apt package when the program is not on PATH.
func Require(t testing.TB, prog, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(prog)
	if err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is required (apt-get install %s)", prog, pkg)
	}
	t.Skipf("%s not found: install the Debian package %s", prog, pkg)
	return ""
}

// Runner is a runner process serving Dir.
type Runner struct {
	Dir  string
	t    testing.TB
	cmd  *exec.Cmd
	done chan error
	log  *os.File
}

// Start starts a runner on dir with args (e.g. "--init", file, "--", "tclsh")
// and waits until it serves the session.
func Start(t testing.TB, dir string, args ...string) *Runner {
	t.Helper()
	r := StartNoWait(t, dir, args...)
	r.WaitPhase(protocol.PhaseIdle, protocol.PhaseBusy)
	return r
}

// StartNoWait starts a runner on dir without waiting for it to serve.
func StartNoWait(t testing.TB, dir string, args ...string) *Runner {
	t.Helper()
	logf, err := os.CreateTemp("", "runner-log")
	if err != nil {
		t.Fatal(err)
	}
	full := append([]string{"--session", dir, "--heartbeat", "200ms", "--poll", "200ms"}, args...)
	cmd := exec.Command(Binary(t), full...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &Runner{Dir: dir, t: t, cmd: cmd, done: make(chan error, 1), log: logf}
	go func() { r.done <- cmd.Wait() }()
	t.Cleanup(func() {
		if r.cmd.ProcessState == nil {
			_ = r.cmd.Process.Kill()
			<-r.done
		}
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("runner log:\n%s", b)
		}
		logf.Close()
		os.Remove(logf.Name())
	})
	return r
}

// WaitPhase waits until state.json shows one of phases.
func (r *Runner) WaitPhase(phases ...protocol.Phase) {
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
func (r *Runner) Stop() {
	r.t.Helper()
	if err := WriteAtomic(filepath.Join(r.Dir, protocol.FileStop), []byte(`{"mode":"graceful"}`)); err != nil {
		r.t.Fatal(err)
	}
	r.Wait()
}

// Wait waits for the runner to exit by itself (stop, lease expiry).
func (r *Runner) Wait() {
	r.t.Helper()
	select {
	case <-r.done:
	case <-time.After(LongWait):
		r.t.Fatal("runner did not exit")
	}
}

// Kill kills the runner with SIGKILL (a crash) and waits for it; the tool
// dies with its PTY.
func (r *Runner) Kill() {
	r.t.Helper()
	_ = r.cmd.Process.Signal(syscall.SIGKILL)
	<-r.done
}

// ReadState reads state/state.json.
func ReadState(dir string) (protocol.State, error) {
	var st protocol.State
	b, err := os.ReadFile(filepath.Join(dir, protocol.FileState))
	if err == nil {
		err = json.Unmarshal(b, &st)
	}
	return st, err
}

// WriteAtomic writes path through a temporary dot-file and a rename.
func WriteAtomic(path string, data []byte) error {
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// Cmd is a command to submit.
type Cmd struct {
	Seq          int64
	ID           string
	Payload      string
	TimeoutS     float64
	CancelPolicy protocol.CancelPolicy
}

// Name is the command's file name.
func (c Cmd) Name() string { return protocol.CommandName(c.Seq, c.ID) }

// Submit writes the command into queue/ (temp file + rename), with
// submitted_at set to now.
func Submit(t testing.TB, dir string, c Cmd) {
	t.Helper()
	cmd := protocol.Command{ProtocolVersion: protocol.Version, CmdID: c.ID, Seq: c.Seq, Kind: protocol.KindTcl,
		Payload: c.Payload, TimeoutS: c.TimeoutS, CancelPolicy: c.CancelPolicy, SubmittedAt: protocol.Now(), Submitter: "sessiontest"}
	b, err := json.Marshal(cmd)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteAtomic(filepath.Join(dir, protocol.DirQueue, c.Name()), b); err != nil {
		t.Fatal(err)
	}
}

// WaitResult waits for the command's result and returns it.
func WaitResult(t testing.TB, dir string, c Cmd) *protocol.Result {
	t.Helper()
	p := filepath.Join(dir, protocol.DirResult, c.Name())
	deadline := time.Now().Add(LongWait)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(p)
		if err == nil {
			var res protocol.Result
			if err := json.Unmarshal(b, &res); err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			return &res
		}
		if !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no result for %s", c.Name())
	return nil
}

// WaitOutput waits until the running command c has printed at least n bytes.
func WaitOutput(t testing.TB, dir string, c Cmd, n int64) {
	t.Helper()
	p := filepath.Join(dir, protocol.DirOutput, protocol.OutputName(c.Name()))
	deadline := time.Now().Add(LongWait)
	for time.Now().Before(deadline) {
		if fi, err := os.Stat(p); err == nil && fi.Size() >= n {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s never printed %d bytes", c.Name(), n)
}

// Cancel asks the runner to cancel cmd_id (legacy ctl/cancel.json).
func Cancel(t testing.TB, dir, id string) {
	t.Helper()
	b, _ := json.Marshal(map[string]string{"cmd_id": id})
	if err := WriteAtomic(filepath.Join(dir, protocol.FileCancel), b); err != nil {
		t.Fatal(err)
	}
}

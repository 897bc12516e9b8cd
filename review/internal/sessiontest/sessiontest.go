// Package sessiontest drives a real runner process on a real tool for the
// tests of the review packages, on top of internal/testenv (which builds
// the runner, starts and stops it, and checks every session it served). It talks to the session through files only,
// as any master may: command files renamed into queue/, results polled in
// result/, the legacy ctl/cancel.json and ctl/stop.json.
package sessiontest

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/internal/testenv"
	"github.com/skillpilot/skillpilot/protocol"
)

// LongWait bounds every wait: an anti-hang guard, not a timing assertion.
const LongWait = testenv.LongWait

// RequireTclsh fails (under CI=true) or skips the test when tclsh is missing.
func RequireTclsh(t testing.TB) {
	t.Helper()
	testenv.NeedTool(t, "tclsh", "tcl")
}

// Runner is a runner process serving Dir.
type Runner = testenv.RunnerProcess

// Start starts a runner on dir with args (e.g. "--init", file, "--", "tclsh")
// and waits until it serves the session. When the test ends the runner is
// stopped and the session-invariant check runs on dir ([testenv.StartRunner]).
func Start(t testing.TB, dir string, args ...string) *Runner {
	t.Helper()
	return testenv.StartRunner(t, testenv.RunnerOptions{Dir: dir, Args: args})
}

// StartNoWait starts a runner on dir without waiting for it to serve.
func StartNoWait(t testing.TB, dir string, args ...string) *Runner {
	t.Helper()
	return testenv.StartRunner(t, testenv.RunnerOptions{Dir: dir, Args: args, NoWait: true})
}

// ReadState reads state/state.json.
func ReadState(dir string) (protocol.State, error) { return testenv.ReadState(dir) }

// WriteAtomic writes path through a temporary dot-file and a rename.
func WriteAtomic(path string, data []byte) error { return testenv.WriteAtomic(path, data) }

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

package master

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/internal/testrunner"
	"github.com/skillpilot/skillpilot/protocol"
)

// Issue 26.9: a wait whose runner stopped on purpose ends without waiting
// out WaitForRunner, says the command stays queued, and Withdraw takes the
// command back (once); a claimed or finished command is not withdrawn.
func TestWaitStoppedRunnerAndWithdraw(t *testing.T) {
	dir := startRunner(t)
	s, _ := Open(dir)
	done, err := s.Run(ctx(t), "expr 1", SubmitOptions{CmdID: "d1"})
	if err != nil || done == nil {
		t.Fatal(err)
	}
	if _, err := s.Stop(ctx(t), protocol.StopGraceful, true); err != nil {
		t.Fatal(err)
	}
	s.WaitForRunner = time.Hour // longWait (the test's context) ends long before: only the stop ends the wait.
	c, err := s.Submit(ctx(t), "puts never", SubmitOptions{CmdID: "q1"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Wait(ctx(t))
	if !errors.Is(err, ErrRunnerNotAlive) || !strings.Contains(err.Error(), "q1 stays queued") || strings.Contains(err.Error(), "no live runner seen") {
		t.Fatalf("Wait: %v", err)
	}
	if _, err := c.Follow(ctx(t), &strings.Builder{}, 0); !errors.Is(err, ErrRunnerNotAlive) {
		t.Fatalf("Follow: %v", err)
	}
	if err := c.Withdraw(); err != nil {
		t.Fatalf("Withdraw: %v", err)
	}
	if s.exists(protocol.DirQueue + "/" + c.Name) {
		t.Fatal("the command is still queued")
	}
	if err := c.Withdraw(); !errors.Is(err, ErrUnknownCmdID) {
		t.Fatalf("a second Withdraw: %v", err)
	}
	d, _ := s.Command("d1")
	if err := d.Withdraw(); !errors.Is(err, ErrAlreadyFinished) {
		t.Fatalf("Withdraw of a finished command: %v", err)
	}
	if _, exit := Classify(ErrNotQueued); exit != ExitNothingToDo {
		t.Fatalf("ErrNotQueued exits %d", exit)
	}
}

// WaitReady is how a caller waits for a runner to be started again: on a
// session whose runner stopped on purpose it keeps the whole grace (only
// waits for a command, output or a reply end early).
func TestWaitReadyKeepsGraceAfterStop(t *testing.T) {
	dir := startRunner(t)
	s, _ := Open(dir)
	if _, err := WaitReady(ctx(t), dir); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Stop(ctx(t), protocol.StopGraceful, true); err != nil {
		t.Fatal(err)
	}
	ready := make(chan error, 1)
	go func() {
		_, err := WaitReadyFor(ctx(t), dir, longWait)
		ready <- err
	}()
	time.Sleep(2 * stoppedGrace) // Setup, not an assertion: the wait outlives stoppedGrace before a runner starts.
	testrunner.Start(t, dir)
	if err := <-ready; err != nil {
		t.Fatalf("WaitReady: %v", err)
	}
}

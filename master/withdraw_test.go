package master

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/internal/testrunner"
	"github.com/skillpilot/skillpilot/protocol"
)

// A wait whose runner stopped on purpose ends without waiting
// out WaitForRunner, says the command stays queued, and Withdraw takes the
// command back (once); a claimed or finished command is not withdrawn.
func TestWaitStoppedRunnerAndWithdraw(t *testing.T) {
	dir := startRunner(t)
	s, _ := Open(dir)
	done, err := s.Run(ctx(t), "expr 1", SubmitOptions{CmdID: "d1"})
	if err != nil || done == nil {
		t.Fatal(err)
	}
	if _, err := stopWait(ctx(t), s, protocol.StopGraceful); err != nil {
		t.Fatal(err)
	}
	s.WaitForRunner = time.Hour // longWait (the test's context) ends long before: only the stop ends the wait.
	c, err := s.Submit(ctx(t), "puts never", SubmitOptions{CmdID: "q1"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Wait(ctx(t), WaitOptions{})
	if !errors.Is(err, ErrRunnerNotAlive) || !strings.Contains(err.Error(), "q1 stays queued") || strings.Contains(err.Error(), "no live runner seen") {
		t.Fatalf("Wait: %v", err)
	}
	if _, err := c.Follow(ctx(t), &strings.Builder{}, 0); !errors.Is(err, ErrRunnerNotAlive) {
		t.Fatalf("Follow: %v", err)
	}
	if err := c.Withdraw(); err != nil {
		t.Fatalf("Withdraw: %v", err)
	}
	if s.io.Exists(protocol.DirQueue + "/" + c.Name) {
		t.Fatal("the command is still queued")
	}
	if err := c.Withdraw(); !errors.Is(err, ErrAlreadyWithdrawn) { // Not "unknown".
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

// A wait or a follow of a command that another master withdraws ends with
// ErrUnknownCmdID saying so (it never runs), not at its timeout; so does
// Output, which has no file to read. The runner is busy meanwhile.
func TestWaitWithdrawnMeanwhile(t *testing.T) {
	dir := startRunner(t)
	s, _ := Open(dir)
	long, err := s.Submit(ctx(t), "after 60000", SubmitOptions{CmdID: "long"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = s.Cancel(ctx(t), long.ID) }()
	c, err := s.Submit(ctx(t), "expr 7", SubmitOptions{CmdID: "q"})
	if err != nil {
		t.Fatal(err)
	}
	waited, followed := make(chan error, 1), make(chan error, 1)
	go func() { _, err := c.Wait(ctx(t), WaitOptions{}); waited <- err }()
	go func() { _, err := c.Follow(ctx(t), io.Discard, 0); followed <- err }()
	other, _ := Open(dir) // Another master.
	if _, err := other.Withdraw("q"); err != nil {
		t.Fatal(err)
	}
	for name, ch := range map[string]chan error{"Wait": waited, "Follow": followed} {
		if err := <-ch; !errors.Is(err, ErrUnknownCmdID) || !strings.Contains(err.Error(), "withdrawn") {
			t.Errorf("%s: %v, want ErrUnknownCmdID saying it was withdrawn", name, err)
		}
	}
	if _, err := c.Output(0, 0); !errors.Is(err, ErrUnknownCmdID) {
		t.Errorf("Output: %v", err)
	}
}

// WaitReady is how a caller waits for a runner to be started again: on a
// session whose runner stopped on purpose it keeps the whole grace (only
// waits for a command, output or a reply end early).
func TestWaitReadyKeepsGraceAfterStop(t *testing.T) {
	dir := startRunner(t)
	s, _ := Open(dir)
	if _, err := WaitReady(ctx(t), dir, WaitOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := stopWait(ctx(t), s, protocol.StopGraceful); err != nil {
		t.Fatal(err)
	}
	ready := make(chan error, 1)
	go func() {
		_, err := WaitReady(ctx(t), dir, WaitOptions{WaitForRunner: longWait})
		ready <- err
	}()
	time.Sleep(2 * stoppedGrace) // Setup, not an assertion: the wait outlives stoppedGrace before a runner starts.
	testrunner.Start(t, dir)
	if err := <-ready; err != nil {
		t.Fatalf("WaitReady: %v", err)
	}
}

// TestWithdrawNames: one rule for naming a command: a command
// file's name, or a path ending in one, is exactly that file, even when
// another queued file has the same cmd_id; a cmd_id is the first file with
// it, the lowest seq. A second withdraw, by any form, is ErrAlreadyWithdrawn,
// and anything else is a usage error.
func TestWithdrawNames(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s")
	for _, d := range protocol.Dirs {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var cmds []*Command
	for i := 0; i < 3; i++ {
		c, err := s.Submit(ctx(t), "puts never", SubmitOptions{CmdID: "dup"})
		if err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, c)
	}
	queued := func() (names []string) {
		for _, c := range cmds {
			if s.io.Exists(protocol.DirQueue + "/" + c.Name) {
				names = append(names, c.Name)
			}
		}
		return names
	}
	got, err := s.Withdraw(cmds[2].Name) // The later file, by its name.
	if err != nil || got.Name != cmds[2].Name {
		t.Fatalf("Withdraw(%s): %v %v", cmds[2].Name, got, err)
	}
	if q := queued(); len(q) != 2 || q[0] != cmds[0].Name || q[1] != cmds[1].Name {
		t.Fatalf("after withdrawing %s, queued: %v", cmds[2].Name, q)
	}
	if got, err := s.Withdraw(protocol.DirQueue + "/" + cmds[1].Name); err != nil || got.Name != cmds[1].Name {
		t.Fatalf("Withdraw(queue/%s): %v %v", cmds[1].Name, got, err)
	}
	if got, err := s.Withdraw("dup"); err != nil || got.Name != cmds[0].Name {
		t.Fatalf("Withdraw(dup): %v %v", got, err)
	}
	if q := queued(); len(q) != 0 {
		t.Fatalf("still queued: %v", q)
	}
	for _, ref := range []string{"dup", cmds[0].Name, protocol.DirQueue + "/" + cmds[2].Name, filepath.Join(dir, "queue", cmds[1].Name)} {
		if _, err := s.Withdraw(ref); !errors.Is(err, ErrAlreadyWithdrawn) {
			t.Errorf("a second Withdraw(%s): %v", ref, err)
		} else if code, exit := Classify(err); code != "already_withdrawn" || exit != ExitNothingToDo {
			t.Errorf("already withdrawn is %s, exit %d", code, exit)
		}
	}
	if _, err := s.Withdraw("cmd_9_nothing.json"); !errors.Is(err, ErrUnknownCmdID) {
		t.Errorf("Withdraw of a name nobody queued: %v", err)
	}
	for _, ref := range []string{"queue/not-a-command", "a b", "", "queue/cmd_x_y.json"} {
		if _, err := s.Withdraw(ref); !errors.Is(err, ErrUsage) {
			t.Errorf("Withdraw(%q): %v, want a usage error", ref, err)
		}
	}
}

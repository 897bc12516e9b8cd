package master

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/internal/testenv"
	"github.com/skillpilot/skillpilot/protocol"
	"github.com/skillpilot/skillpilot/runner"
)

// runnerProc starts a runner as a process of its own (the test binary in
// runner mode), so that a test can kill it.
func runnerProc(t testing.TB, args ...string) *exec.Cmd {
	t.Helper()
	c := exec.Command(os.Args[0], args...)
	c.Env = append(os.Environ(), "MASTER_RUNNER_HELPER=1")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = c.Wait(); close(done) }()
	t.Cleanup(func() { _ = c.Process.Kill(); <-done })
	return c
}

func readyIn(t testing.TB, dir string) *Session {
	t.Helper()
	if _, err := WaitReady(ctx(t), dir, WaitOptions{WaitForRunner: longWait}); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Every cancel outcome comes back to the caller, typed.
func TestCancelOutcomes(t *testing.T) {
	s := readyIn(t, startRunner(t))
	if _, err := s.CancelCurrent(ctx(t)); !errors.Is(err, ErrIdle) {
		t.Fatalf("idle: %v", err)
	}
	done, err := s.Run(ctx(t), "expr 1", SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	long, _ := s.Submit(ctx(t), "puts go; flush stdout; after 60000", SubmitOptions{})
	queued, _ := s.Submit(ctx(t), "puts never", SubmitOptions{})
	if _, err := s.WaitFor(ctx(t), regexpMust(`go`), 0); err != nil {
		t.Fatal(err)
	}
	rep, err := s.Cancel(ctx(t), queued.ID)
	if err != nil || rep.Outcome != protocol.OutcomeCancelledQueued || rep.CmdID != queued.ID {
		t.Fatalf("queued: %+v %v", rep, err)
	}
	_, err = s.Cancel(ctx(t), "no-such-command")
	var re *RequestError
	if !errors.Is(err, ErrUnknownCmdID) || !errors.As(err, &re) || re.Reply.Outcome != protocol.OutcomeNotFound {
		t.Fatalf("unknown: %v", err)
	}
	if code, exit := Classify(err); code != CodeUnknownCmdID || exit != ExitUnknownCmdID {
		t.Fatalf("classify: %s %d", code, exit)
	}
	_, err = s.Cancel(ctx(t), done.CmdID)
	if !errors.Is(err, ErrAlreadyFinished) {
		t.Fatalf("finished: %v", err)
	}
	if _, exit := Classify(err); exit != ExitNothingToDo {
		t.Fatalf("exit %d", exit)
	}
	rep, err = s.CancelCurrent(ctx(t))
	if err != nil || rep.Outcome != protocol.OutcomeCancelledRunning || rep.CmdID != long.ID {
		t.Fatalf("running: %+v %v", rep, err)
	}
	if _, err := long.Wait(ctx(t), WaitOptions{}); !errors.Is(err, ErrCancelled) {
		t.Fatal(err)
	}
	if _, err := queued.Wait(ctx(t), WaitOptions{}); !errors.Is(err, ErrCancelled) {
		t.Fatal(err)
	}
	if _, err := s.Cancel(ctx(t), "bad id"); Classify2(err) != ExitUsage {
		t.Fatalf("invalid cmd_id: %v", err)
	}
}

func Classify2(err error) int { _, e := Classify(err); return e }

// Five cancels in a row from five masters at --poll 250ms with
// polling only (the NFS default): every one is delivered with its outcome.
func TestFiveCancelsInARow(t *testing.T) {
	dir := startRunner(t, func(c *runner.Config) { c.Poll = 250 * time.Millisecond; c.Watch = runner.WatchPoll })
	s := readyIn(t, dir)
	long, _ := s.Submit(ctx(t), "puts go; flush stdout; after 60000", SubmitOptions{})
	var queued []*Command
	for i := 0; i < 5; i++ {
		c, _ := s.Submit(ctx(t), "puts never", SubmitOptions{})
		queued = append(queued, c)
	}
	if _, err := s.WaitFor(ctx(t), regexpMust(`go`), 0); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 5)
	for i, c := range queued {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := Open(dir) // one master each
			if err == nil {
				var rep *protocol.ControlReply
				rep, err = m.Cancel(ctx(t), c.ID)
				if err == nil && rep.Outcome != protocol.OutcomeCancelledQueued {
					err = fmt.Errorf("outcome %s", rep.Outcome)
				}
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("cancel %d: %v", i, err)
		}
		if r, err := queued[i].Wait(ctx(t), WaitOptions{}); !errors.Is(err, ErrCancelled) || r.ExitReason != protocol.ReasonCancelledQueued {
			t.Errorf("%s: %+v %v", queued[i].ID, r, err)
		}
	}
	// And five in a row from one master.
	for i := 0; i < 5; i++ {
		if _, err := s.Cancel(ctx(t), queued[i].ID); !errors.Is(err, ErrAlreadyFinished) {
			t.Errorf("again %d: %v", i, err)
		}
	}
	if _, err := s.Cancel(ctx(t), long.ID); err != nil {
		t.Fatal(err)
	}
}

// Stop with no live runner says so and leaves nothing behind, so
// the next runner serves normally; the same for a session that has queue/
// but no ctl/ or state/, where lease still works.
func TestStopWithoutRunnerWritesNothing(t *testing.T) {
	dir := startRunner(t)
	s := readyIn(t, dir)
	if _, err := stopWait(ctx(t), s, protocol.StopGraceful); err != nil {
		t.Fatal(err)
	}
	before, _ := readNames(filepath.Join(dir, protocol.DirCtl))
	for _, stop := range []func() error{
		func() error { _, err := s.Stop(ctx(t), protocol.StopForce); return err },
		func() error { _, err := s.Cancel(ctx(t), "x"); return err },
		func() error { _, err := s.CancelCurrent(ctx(t)); return err },
	} {
		if err := stop(); !errors.Is(err, ErrRunnerNotAlive) {
			t.Fatalf("%v", err)
		}
	}
	after, _ := readNames(filepath.Join(dir, protocol.DirCtl))
	if len(after) != len(before) {
		t.Fatalf("ctl/ changed from %v to %v", before, after)
	}
	r, err := runner.Open(runner.Config{Session: dir, Heartbeat: 100 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(context.Background(), nil) }()
	if res, err := s.Run(ctx(t), "expr 2", SubmitOptions{}); err != nil || *res.Value != "2" {
		t.Fatalf("the next runner: %v", err)
	}
	if _, err := stopWait(ctx(t), s, protocol.StopGraceful); err != nil {
		t.Fatal(err)
	}
	<-done

	bare := t.TempDir()
	os.Mkdir(filepath.Join(bare, protocol.DirQueue), 0o700)
	b, err := Open(bare)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Stop(ctx(t), protocol.StopGraceful); !errors.Is(err, ErrRunnerNotAlive) {
		t.Fatalf("bare stop: %v", err)
	}
	if _, err := b.Cancel(ctx(t), "x"); !errors.Is(err, ErrRunnerNotAlive) {
		t.Fatalf("bare cancel: %v", err)
	}
	if _, err := os.Stat(filepath.Join(bare, protocol.DirCtl)); !os.IsNotExist(err) {
		t.Fatalf("ctl/ created: %v", err)
	}
	if _, err := b.WriteLease("l1", time.Minute); err != nil {
		t.Fatalf("lease on a bare session: %v", err)
	}
}

// Every wait notices a dead runner, after the grace.
func TestWaitsNoticeDeadRunner(t *testing.T) {
	testenv.Slow(t, "waits for a dead runner's graces")
	grace := 700 * time.Millisecond
	t.Run("never started", func(t *testing.T) {
		dir := t.TempDir()
		for _, d := range protocol.Dirs {
			os.MkdirAll(filepath.Join(dir, d), 0o700)
		}
		s, _ := Open(dir)
		s.WaitForRunner = grace
		c, err := s.Submit(ctx(t), "puts x", SubmitOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Wait(ctx(t), WaitOptions{}); !errors.Is(err, ErrRunnerNotAlive) {
			t.Fatalf("wait: %v", err)
		}
		if _, err := s.Run(ctx(t), "puts y", SubmitOptions{}); !errors.Is(err, ErrRunnerNotAlive) {
			t.Fatalf("run: %v", err)
		}
		if _, err := c.Follow(ctx(t), io_discard{}, 0); !errors.Is(err, ErrRunnerNotAlive) {
			t.Fatalf("follow: %v", err)
		}
		if _, err := s.WaitFor(ctx(t), regexpMust("x"), 0); !errors.Is(err, ErrRunnerNotAlive) {
			t.Fatalf("waitfor: %v", err)
		}
		if _, err := WaitReady(ctx(t), filepath.Join(dir, "not-yet"), WaitOptions{WaitForRunner: grace}); !errors.Is(err, ErrRunnerNotAlive) {
			t.Fatalf("ready: %v", err)
		}
		// The command stays queued for a later runner.
		if _, err := os.Stat(filepath.Join(dir, protocol.DirQueue, c.Name)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("killed", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "s")
		p := runnerProc(t, "--session", dir, "--heartbeat", "100ms")
		s := readyIn(t, dir)
		s.WaitForRunner = grace
		c, _ := s.Submit(ctx(t), "puts started; flush stdout; after 60000", SubmitOptions{})
		if _, err := s.WaitFor(ctx(t), regexpMust("started"), 0); err != nil {
			t.Fatal(err)
		}
		errc := make(chan error, 1)
		go func() { _, err := c.Wait(ctx(t), WaitOptions{}); errc <- err }()
		p.Process.Signal(syscall.SIGKILL)
		if err := <-errc; !errors.Is(err, ErrRunnerNotAlive) {
			t.Fatalf("%v", err)
		}
	})
	t.Run("reply", func(t *testing.T) {
		dir := t.TempDir()
		for _, d := range protocol.Dirs {
			os.MkdirAll(filepath.Join(dir, d), 0o700)
		}
		s, _ := Open(dir)
		s.WaitForRunner = grace
		name := protocol.RequestName(1, "r")
		os.WriteFile(filepath.Join(dir, protocol.DirCtl, name), []byte(`{}`), 0o600)
		if _, err := s.awaitReply(ctx(t), name); !errors.Is(err, ErrRunnerNotAlive) {
			t.Fatalf("%v", err)
		}
		if _, err := os.Stat(filepath.Join(dir, protocol.DirCtl, name)); !os.IsNotExist(err) {
			t.Fatal("the request was not withdrawn")
		}
	})
	t.Run("cannot serve", func(t *testing.T) {
		bad := filepath.Join(t.TempDir(), "init.tcl")
		os.WriteFile(bad, []byte("error {license checkout failed}\n"), 0o600)
		// Restarts without end, so it stays in phase error; WaitReady's
		// own timeout starts once the runner is there, so a slow start of
		// tclsh is not taken for a wait that timed out.
		dir := startRunner(t, func(c *runner.Config) { c.Init = []string{bad}; c.MaxRestarts = 1 << 20 })
		for deadline := time.Now().Add(longWait); ; time.Sleep(20 * time.Millisecond) {
			var st protocol.State
			if b, err := os.ReadFile(filepath.Join(dir, protocol.FileState)); err == nil && json.Unmarshal(b, &st) == nil && st.Phase == protocol.PhaseError {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the runner never reached phase error")
			}
		}
		short, cancel := context.WithTimeout(ctx(t), 2*time.Second)
		defer cancel()
		_, err := WaitReady(short, dir, WaitOptions{})
		if !errors.Is(err, ErrCannotServe) || !strings.Contains(err.Error(), "license checkout failed") {
			t.Fatalf("%v", err)
		}
		if _, exit := Classify(err); exit != ExitNoRunner {
			t.Fatalf("exit %d", exit)
		}
	})
}

type io_discard struct{}

func (io_discard) Write(b []byte) (int, error) { return len(b), nil }

// A submit without kind takes the session's kind from state.json.
func TestKindFromSession(t *testing.T) {
	dir := startRunner(t, func(c *runner.Config) { c.Kind = protocol.KindSh })
	s := readyIn(t, dir)
	res, err := s.Run(ctx(t), "echo from-sh", SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := &Command{s: s, ID: res.CmdID, Seq: res.Seq, Name: protocol.CommandName(res.Seq, res.CmdID)}
	if out, _ := c.Output(0, 0); string(out) != "from-sh\n" {
		t.Fatalf("%q", out)
	}
}

// A seed-format result is read as written; elapsed time is never
// negative; a lookup of an unknown cmd_id is ErrUnknownCmdID.
func TestSeedResultAndStatusFields(t *testing.T) {
	dir := t.TempDir()
	for _, d := range protocol.Dirs {
		os.MkdirAll(filepath.Join(dir, d), 0o700)
	}
	seed := `{"cmd_id":"x","status":"ok","exit_reason":"marker_seen"}`
	os.WriteFile(filepath.Join(dir, protocol.DirResult, "cmd_1_x.json"), []byte(seed), 0o600)
	s, _ := Open(dir)
	c, err := s.Command("x")
	if err != nil {
		t.Fatal(err)
	}
	_, raw, err := c.RawResult()
	if err != nil || string(raw) != seed {
		t.Fatalf("%s %v", raw, err)
	}
	if _, err := s.Command("y"); !errors.Is(err, ErrUnknownCmdID) {
		t.Fatal(err)
	}
	// A heartbeat older than the command's start (state.json is newer).
	os.WriteFile(filepath.Join(dir, protocol.FileState), []byte(`{"phase":"busy","current_cmd_id":"x","current_start_ts":"2030-01-01T00:00:01.000Z","updated_at":"2030-01-01T00:00:01.100Z"}`), 0o600)
	os.WriteFile(filepath.Join(dir, protocol.FileHeartbeat), []byte(`{"counter":3,"interval_ms":100,"timestamp":"2030-01-01T00:00:00.700Z"}`), 0o600)
	st, err := s.Status(ctx(t))
	if err != nil || st.CurrentElapsed < 0 || st.CurrentElapsed != 100*time.Millisecond {
		t.Fatalf("elapsed %v %v", st.CurrentElapsed, err)
	}
}

// The warning of a plain submit on a network filesystem, where a free lock
// proves nothing: a heartbeat file older than the liveness window by the
// filesystem's clock (against the seq reservation just made) means no
// runner; a fresh one does not.
func TestNoRunnerHintByFilesystemClock(t *testing.T) {
	dir := t.TempDir()
	for _, d := range protocol.Dirs {
		os.MkdirAll(filepath.Join(dir, d), 0o700)
	}
	os.WriteFile(filepath.Join(dir, protocol.FileState), []byte(`{"phase":"idle","session_id":"s"}`), 0o600)
	hb := filepath.Join(dir, protocol.FileHeartbeat)
	os.WriteFile(hb, []byte(`{"counter":7,"interval_ms":1000,"phase":"idle"}`), 0o600)
	s, _ := Open(dir)
	s.io.AssumeNetworkFS()
	c, err := s.Submit(ctx(t), "expr 1", SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if why := s.NoRunnerHint(c.Seq); why != "" {
		t.Fatalf("fresh heartbeat judged dead: %s", why)
	}
	os.WriteFile(hb, []byte(`{"counter":7,"interval_ms":1000,"phase":"idle","session_id":"s"}`), 0o600)
	if _, ok := s.freshHeartbeat(c.Seq); !ok {
		t.Fatal("a request's quick liveness check missed a fresh heartbeat")
	}
	old := time.Now().Add(-time.Minute)
	os.Chtimes(hb, old, old)
	s2, _ := Open(dir)
	s2.io.AssumeNetworkFS()
	if why := s2.NoRunnerHint(c.Seq); !strings.Contains(why, "heartbeat is 1m0s old by the session's filesystem clock") {
		t.Fatalf("stale heartbeat: %q", why)
	}
	if _, ok := s2.freshHeartbeat(c.Seq); ok {
		t.Fatal("a heartbeat a minute old passed the quick liveness check")
	}
}

func regexpMust(s string) *regexp.Regexp { return regexp.MustCompile(s) }

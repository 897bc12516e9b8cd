package runner

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
)

// These tests drive the runner's governance of its tool through a fake
// tool (faketerm_test.go) and a fake clock: no terminal, no real
// waiting, so each runs in well under a second whatever the machine, and
// every deadline is exact.

// A timeout on a tool that returns to its prompt on Ctrl-C: the payload is
// interrupted, the runner resynchronises and the same tool serves on.
func TestGovTimeoutCtrlCResync(t *testing.T) {
	t.Parallel()
	h := newFakeHarness(t, nil).start()
	a := h.submit("print started\nhang", withTimeout(10))
	waitEvent(t, h.waitTool(1), "hang")
	h.clk.Advance(9999 * time.Millisecond)
	b := h.submit("value 42")
	h.clk.Advance(time.Millisecond)
	ra := h.result(a)
	if ra.Status != protocol.StatusTimeout || ra.ExitReason != protocol.ReasonCtrlC || ra.ToolRestarted || ra.ToolStart != 1 {
		t.Fatalf("timeout result %+v", ra)
	}
	if got := h.output(a); got != "started\n" {
		t.Errorf("output %q", got)
	}
	if rb := h.result(b); rb.Status != protocol.StatusOK || *rb.Value != "42" || rb.ToolStart != 1 {
		t.Fatalf("next command %+v", rb)
	}
	if n := h.fake.starts(); n != 1 {
		t.Errorf("%d tool starts; Ctrl-C must not restart a tool that returns to its prompt", n)
	}
}

// A tool that dies of Ctrl-C (plain tclsh): the result says its state is
// gone (tool_restarted), and the next command runs in the next start.
func TestGovCtrlCKillsTool(t *testing.T) {
	t.Parallel()
	h := newFakeHarness(t, func(int) fakeBehavior { return fakeBehavior{onInt: "die"} }).start()
	a := h.submit("hang", withTimeout(1))
	waitEvent(t, h.waitTool(1), "hang")
	h.clk.Advance(time.Second)
	ra := h.result(a)
	if ra.Status != protocol.StatusTimeout || !ra.ToolRestarted || ra.Signal != "SIGINT" || ra.ToolStart != 1 {
		t.Fatalf("%+v", ra)
	}
	if rb := h.result(h.submit("value x")); rb.ToolStart != 2 || rb.ToolRestarted {
		t.Fatalf("next command %+v", rb)
	}
}

// A tool deaf to Ctrl-C that ignores SIGTERM: SIGTERM comes no sooner
// than --resync-wait after the Ctrl-C, SIGKILL no sooner than
// --kill-grace after SIGTERM. (Times are the fake clock's, which moves
// only when the test moves it: the bounds are exact on any machine.)
func TestGovKillEscalation(t *testing.T) {
	t.Parallel()
	h := newFakeHarness(t, func(int) fakeBehavior { return fakeBehavior{onInt: "deaf", onTerm: "ignore"} }).start()
	a := h.submit("hang", withTimeout(1))
	tool := h.waitTool(1)
	waitEvent(t, tool, "hang")
	h.advanceUntil("SIGKILL", 50*time.Millisecond, func() bool { _, ok := tool.noted("sig SIGKILL"); return ok })
	intr, _ := tool.noted("sent SIGINT")
	term, ok := tool.noted("sent SIGTERM")
	kill, _ := tool.noted("sent SIGKILL")
	if !ok || term.Sub(intr) < h.cfg.ResyncWait || kill.Sub(term) < h.cfg.KillGrace {
		t.Fatalf("Ctrl-C at %v, SIGTERM at %v, SIGKILL at %v: want gaps of at least %v and %v",
			intr, term, kill, h.cfg.ResyncWait, h.cfg.KillGrace)
	}
	ra := h.result(a)
	if ra.Status != protocol.StatusTimeout || ra.Signal != "SIGKILL" || !ra.ToolRestarted {
		t.Fatalf("%+v", ra)
	}
	if n := countEvents(h.events(), "interrupt"); n != 1 {
		t.Errorf("%d interrupt events", n)
	}
	for _, e := range h.events() {
		if e.Event == protocol.EvInterrupt && (e.SpoolOffset == nil || *e.SpoolOffset < ra.SpoolStart || *e.SpoolOffset > ra.SpoolEnd) {
			t.Errorf("the interrupt is not placed in the spool within the command's range [%d,%d): %+v", ra.SpoolStart, ra.SpoolEnd, e)
		}
	}
}

// Failed starts back off 250 ms, 500 ms, 1 s, 2 s on the runner's clock.
func TestGovCrashLoopBacksOff(t *testing.T) {
	t.Parallel()
	h := newFakeHarness(t, func(int) fakeBehavior { return fakeBehavior{bootExit: exitCode(1)} },
		func(c *Config) { c.MaxRestarts = 10 }).start()
	h.advanceUntil("five starts", 10*time.Millisecond, func() bool { return h.fake.starts() >= 5 })
	h.fake.mu.Lock()
	at := append([]time.Time(nil), h.fake.at...)
	h.fake.mu.Unlock()
	for i := 1; i < 5; i++ {
		if gap, want := at[i].Sub(at[i-1]), backoff(i); gap < want {
			t.Errorf("start %d came %v after the previous one, want at least %v", i+1, gap, want)
		}
	}
	st := h.state()
	if st.Phase != protocol.PhaseError || !strings.Contains(st.Reason, "during start-up") || !strings.Contains(st.Reason, "restart") {
		t.Errorf("state %+v", st)
	}
}

// More failed starts than --max-restarts within the window: the runner
// gives up (ErrGaveUp, exit 4), says why in state.json, meta.log and the
// error, and leaves the queue alone.
func TestGovMaxRestartsGivesUp(t *testing.T) {
	t.Parallel()
	h := newFakeHarness(t, func(int) fakeBehavior { return fakeBehavior{startErr: errors.New("no such file: innovus")} },
		func(c *Config) { c.MaxRestarts = 2 }).start()
	a := h.submit("value 1")
	var err error
	done := make(chan struct{})
	go func() { defer close(done); err = <-h.errc }()
	h.advanceUntil("the runner to give up", 50*time.Millisecond, func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	})
	h.r = nil
	if !errors.Is(err, ErrGaveUp) || !strings.Contains(err.Error(), "no such file: innovus") {
		t.Fatalf("Run: %v", err)
	}
	if n := h.fake.starts(); n != 3 {
		t.Errorf("%d start attempts, want 3 (the first and 2 restarts)", n)
	}
	st := h.state()
	if st.Phase != protocol.PhaseStopped || st.Error == nil || st.Error.Code != protocol.CodeToolStartFailed ||
		!strings.Contains(st.Reason, "gave up") {
		t.Fatalf("state %+v", st)
	}
	evs := h.events()
	last := evs[len(evs)-1]
	if last.Event != protocol.EvRunnerStop || !strings.Contains(last.Detail["reason"].(string), "gave up") {
		t.Errorf("last event %+v", last)
	}
	if _, err := os.Stat(filepath.Join(h.dir, protocol.DirQueue, a)); err != nil {
		t.Errorf("queued command not left alone: %v", err)
	}
}

// Failed starts that fall out of --restart-window no longer count.
func TestGovRestartWindow(t *testing.T) {
	t.Parallel()
	h := newFakeHarness(t, func(n int) fakeBehavior {
		if n <= 2 {
			return fakeBehavior{bootExit: exitCode(1)}
		}
		return fakeBehavior{onInt: "prompt"}
	}, func(c *Config) { c.MaxRestarts = -1; c.RestartWindow = time.Minute })
	h.start()
	// MaxRestarts < 0: no restart at all after a failed start.
	err := h.waitExit()
	if !errors.Is(err, ErrGaveUp) || h.fake.starts() != 1 {
		t.Fatalf("Run: %v after %d starts", err, h.fake.starts())
	}
}

// A tool that never answers the start-up sync is killed at
// --start-timeout, and that counts as a failed start.
func TestGovStartTimeout(t *testing.T) {
	t.Parallel()
	h := newFakeHarness(t, func(n int) fakeBehavior {
		if n == 1 {
			return fakeBehavior{mute: true}
		}
		return fakeBehavior{onInt: "prompt"}
	}).start()
	tool := h.waitTool(1)
	h.advanceUntil("SIGKILL", 100*time.Millisecond, func() bool { _, ok := tool.noted("sig SIGKILL"); return ok })
	if kill, _ := tool.noted("sent SIGKILL"); kill.Sub(h.fake.at[0]) < h.cfg.StartTimeout {
		t.Fatalf("killed %v after its start, before --start-timeout %v", kill.Sub(h.fake.at[0]), h.cfg.StartTimeout)
	}
	h.advanceUntil("a second start", 10*time.Millisecond, func() bool { return h.fake.starts() == 2 })
	if r := h.result(h.submit("value ok")); r.Status != protocol.StatusOK || r.ToolStart != 2 {
		t.Fatalf("%+v", r)
	}
	if st := h.state(); st.ToolStarts != 2 {
		t.Errorf("tool_starts %d", st.ToolStarts)
	}
}

// An init script that fails: phase error with its message, the tool is
// restarted, no command runs against it; once the script works, the
// queue drains.
func TestGovInitFailure(t *testing.T) {
	t.Parallel()
	init := filepath.Join(t.TempDir(), "init.tcl")
	os.WriteFile(init, []byte("error license not available\n"), 0o600)
	h := newFakeHarness(t, nil, func(c *Config) { c.Init = []string{init} }).start()
	a := h.submit("value served")
	h.waitFor("error phase", func() bool {
		st := h.state()
		return st.Phase == protocol.PhaseError && strings.Contains(st.Reason, "license not available")
	})
	if _, err := os.Stat(filepath.Join(h.dir, protocol.DirResult, a)); err == nil {
		t.Fatal("a command ran against a half-initialised tool")
	}
	os.WriteFile(init, []byte("print loaded\n"), 0o600)
	h.advanceUntil("a second start", 10*time.Millisecond, func() bool { return h.fake.starts() == 2 })
	if r := h.result(a); r.Status != protocol.StatusOK || r.ToolStart != 2 {
		t.Fatalf("%+v", r)
	}
}

// An init script that never finishes is killed at --init-timeout.
func TestGovInitTimeout(t *testing.T) {
	t.Parallel()
	init := filepath.Join(t.TempDir(), "init.tcl")
	os.WriteFile(init, []byte("hang\n"), 0o600)
	h := newFakeHarness(t, func(int) fakeBehavior { return fakeBehavior{onInt: "prompt", onTerm: "ignore"} },
		func(c *Config) { c.Init = []string{init}; c.InitTimeout = time.Minute }).start()
	tool := h.waitTool(1)
	waitEvent(t, tool, "hang")
	h.clk.Advance(time.Minute)
	waitEvent(t, tool, "sig SIGKILL")
	h.waitFor("the reason", func() bool { return strings.Contains(h.state().Reason, "did not finish within 1m0s") })
}

// A tool that dies while running a command: the command's result says so;
// deaths of a ready tool do not count against --max-restarts.
func TestGovToolDiesMidCommand(t *testing.T) {
	t.Parallel()
	h := newFakeHarness(t, nil, func(c *Config) { c.MaxRestarts = 1 }).start()
	for i := 1; i <= 3; i++ {
		a := h.submit("print bye\nexit 3")
		ra := h.result(a)
		if ra.Status != protocol.StatusError || ra.ExitReason != protocol.ReasonToolExit || ra.ExitCode == nil ||
			*ra.ExitCode != 3 || !ra.ToolRestarted || ra.ToolStart != int64(i) {
			t.Fatalf("death %d: %+v", i, ra)
		}
		if got := h.output(a); got != "bye\n" {
			t.Errorf("output %q", got)
		}
		h.advanceUntil("the next start", 100*time.Millisecond, func() bool { return h.fake.starts() == i+1 })
	}
	if r := h.result(h.submit("value alive")); r.Status != protocol.StatusOK {
		t.Fatalf("%+v", r)
	}
}

// A force stop of a tool that ignores SIGTERM ends with SIGKILL after
// --kill-grace.
func TestGovForceStopIgnoringTool(t *testing.T) {
	t.Parallel()
	h := newFakeHarness(t, func(int) fakeBehavior { return fakeBehavior{onInt: "deaf", onTerm: "ignore"} }).start()
	a := h.submit("hang")
	tool := h.waitTool(1)
	waitEvent(t, tool, "hang")
	h.writeFile(protocol.FileStop, `{"mode":"force"}`)
	waitEvent(t, tool, "sig SIGKILL")
	if err := h.waitExit(); err != nil {
		t.Fatal(err)
	}
	if r := h.result(a); r.Status != protocol.StatusCancelled || r.ExitReason != protocol.ReasonForceStop {
		t.Fatalf("%+v", r)
	}
}

// waitTool waits until start n has made a tool and returns it.
func (h *harness) waitTool(n int) *fakeTool {
	h.t.Helper()
	h.waitFor("tool start", func() bool {
		h.fake.mu.Lock()
		defer h.fake.mu.Unlock()
		return len(h.fake.tools) >= n
	})
	return h.fake.tool(n - 1)
}

// A stop whose tool takes its time to exit (it ignores SIGTERM): while
// the runner waits out --kill-grace, the loop goes on, so a control
// request is answered and state.json says stopping; SIGKILL follows the
// grace. (Before, the loop had ended and a request waited for the next
// runner.)
func TestStopServesControlWhileToolCloses(t *testing.T) {
	t.Parallel()
	h := newFakeHarness(t, func(int) fakeBehavior { return fakeBehavior{onTerm: "ignore"} }).start()
	if r := h.result(h.submit("value x")); r.Status != protocol.StatusOK {
		t.Fatalf("%+v", r)
	}
	tool := h.waitTool(1)
	h.writeFile(protocol.FileStop, `{"mode":"graceful"}`)
	h.waitFor("SIGTERM", func() bool { _, ok := tool.noted("sent SIGTERM"); return ok })
	rep := h.reply(h.request(1, "c1", protocol.OpCancel, map[string]any{"cmd_id": "nope"}))
	if rep.Outcome != protocol.OutcomeNotFound {
		t.Errorf("cancel while the tool closes: %+v", rep)
	}
	if st := h.state(); st.Phase != protocol.PhaseStopping {
		t.Errorf("phase %q while the tool closes, want stopping", st.Phase)
	}
	if _, ok := tool.noted("sent SIGKILL"); ok {
		t.Fatal("SIGKILL before --kill-grace passed (the fake clock has not moved)")
	}
	if err := h.waitExit(); err != nil {
		t.Fatal(err)
	}
	if _, ok := tool.noted("sent SIGKILL"); !ok {
		t.Error("the tool that ignored SIGTERM got no SIGKILL")
	}
}

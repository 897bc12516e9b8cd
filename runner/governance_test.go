package runner

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/internal/testenv"
	"github.com/skillpilot/skillpilot/protocol"
)

// A timeout on plain tclsh: Ctrl-C kills tclsh, the runner restarts it and
// the next command runs in a fresh session.
func TestTimeoutTclsh(t *testing.T) {
	t.Parallel()
	h := newHarness(t).start()
	h.result(h.submit("set ::kept 1"))
	a := h.submit("puts started; flush stdout; after 60000", withTimeout(2)) // Time to print first, on a loaded machine too.
	b := h.submit("info exists ::kept")
	ra := h.result(a)
	if ra.Status != protocol.StatusTimeout || ra.ExitReason != protocol.ReasonCtrlC || ra.Error.Code != protocol.CodeTimeout {
		t.Fatalf("timeout result %+v %+v", ra, ra.Error)
	}
	if h.output(a) != "started\n" {
		t.Errorf("output %q", h.output(a))
	}
	rb := h.result(b)
	if rb.Status != protocol.StatusOK || *rb.Value != "0" {
		t.Fatalf("next command %+v (value %v)", rb, *rb.Value)
	}
	if countEvents(h.events(), protocol.EvSessionReset) != 1 {
		t.Error("want one session_reset event")
	}
}

// The default timeout applies to commands without timeout_s.
func TestDefaultTimeout(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.DefaultTimeout = 300 * time.Millisecond; c.Tool = fakeEDA(t) }).start()
	a := h.submit("report_timing 1000 20")
	if r := h.result(a); r.Status != protocol.StatusTimeout {
		t.Fatalf("%+v", r)
	}
}

// Cancel by `touch ctl/cancel.json` on a tool that returns to its prompt on
// Ctrl-C: the command is cancelled, the tool survives with its state.
func TestCancelByTouchFakeEDA(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.Tool = fakeEDA(t) }).start()
	h.result(h.submit("load_design top"))
	pid := h.state().ToolPID
	a := h.submit("report_timing 100000 10")
	h.waitFor("output to flow", func() bool {
		b, _ := os.ReadFile(filepath.Join(h.dir, protocol.DirOutput, protocol.OutputName(a)))
		return strings.Contains(string(b), "Path 2:")
	})
	f, err := os.Create(filepath.Join(h.dir, protocol.FileCancel))
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	ra := h.result(a)
	if ra.Status != protocol.StatusCancelled || ra.ExitReason != protocol.ReasonCtrlC {
		t.Fatalf("%+v", ra)
	}
	b := h.submit("set ::design")
	if rb := h.result(b); rb.Status != protocol.StatusOK || *rb.Value != "top" {
		t.Fatalf("after cancel: %+v", rb)
	}
	if h.state().ToolPID != pid {
		t.Error("the tool was restarted; Ctrl-C should have returned it to its prompt")
	}
	h.waitFor("cancel.json consumed", func() bool {
		_, err := os.Stat(filepath.Join(h.dir, protocol.FileCancel))
		return os.IsNotExist(err)
	})
	found := false
	for _, e := range h.events() {
		if e.Event == protocol.EvCancel && e.CmdID == ra.CmdID {
			found = true
		}
	}
	if !found {
		t.Error("cancel request not in the event log")
	}
}

// Cancelling a queued command by id: it gets a cancelled result and never
// runs.
func TestCancelQueuedByID(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.Tool = fakeEDA(t) }).start()
	side := filepath.Join(t.TempDir(), "side")
	a := h.submit("report_timing 100000 10")
	b := h.submit(fmt.Sprintf("set f [open %q w]; puts $f ran; close $f", side))
	h.waitFor("a running", func() bool { return h.state().Phase == protocol.PhaseBusy })
	h.writeFile(protocol.FileCancel, `{"scope":"cmd_id","cmd_id":"c2"}`)
	rb := h.result(b)
	if rb.Status != protocol.StatusCancelled || rb.ExitReason != protocol.ReasonCancelledQueued {
		t.Fatalf("%+v", rb)
	}
	h.writeFile(protocol.FileCancel, `{"scope":"cmd_id","cmd_id":"unknown"}`)
	h.waitFor("unknown cancel consumed", func() bool {
		_, err := os.Stat(filepath.Join(h.dir, protocol.FileCancel))
		return os.IsNotExist(err)
	})
	h.writeFile(protocol.FileCancel, `{"scope":"current"}`)
	if ra := h.result(a); ra.Status != protocol.StatusCancelled {
		t.Fatalf("%+v", ra)
	}
	h.stop(protocol.StopGraceful)
	if _, err := os.Stat(side); !os.IsNotExist(err) {
		t.Fatal("the cancelled queued command ran")
	}
}

func TestCancelPolicies(t *testing.T) {
	t.Parallel()
	for _, pol := range []protocol.CancelPolicy{protocol.PolicyTerminateTool, protocol.PolicyTerminateSession} {
		t.Run(string(pol), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t).start()
			a := h.submit("puts go; flush stdout; exec sleep 1000", withPolicy(pol))
			h.waitFor("output", func() bool { return strings.Contains(readFile(h, a), "go") })
			h.writeFile(protocol.FileCancel, "")
			r := h.result(a)
			if r.Status != protocol.StatusCancelled || string(r.ExitReason) != string(pol) {
				t.Fatalf("%+v", r)
			}
			if rb := h.result(h.submit("expr 1+1")); *rb.Value != "2" {
				t.Fatalf("%+v", rb)
			}
			h.stop(protocol.StopGraceful)
		})
	}
}

func readFile(h *harness, name string) string {
	b, _ := os.ReadFile(filepath.Join(h.dir, protocol.DirOutput, protocol.OutputName(name)))
	return string(b)
}

func TestStopGracefulLeavesQueue(t *testing.T) {
	t.Parallel()
	testenv.Slow(t, "seconds of real tclsh and races")
	h := newHarness(t, func(c *Config) { c.Tool = fakeEDA(t) }).start()
	a := h.submit("report_timing 10 30")
	h.waitFor("a running", func() bool { return h.state().Phase == protocol.PhaseBusy })
	b := h.submit("puts later")
	h.writeFile(protocol.FileStop, "")
	if err := h.waitExit(); err != nil {
		t.Fatal(err)
	}
	h.checkNoOrphans()
	if r := h.result(a); r.Status != protocol.StatusOK {
		t.Fatalf("graceful stop must finish the current command: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(h.dir, protocol.DirQueue, b)); err != nil {
		t.Fatalf("queued command not left intact: %v", err)
	}
	if _, err := os.Stat(filepath.Join(h.dir, protocol.FileStop)); !os.IsNotExist(err) {
		t.Fatal("stop.json not consumed")
	}
	if st := h.state(); st.Phase != protocol.PhaseStopped {
		t.Fatalf("phase %s", st.Phase)
	}
	// The next runner serves what was left.
	h.start()
	if r := h.result(b); r.Status != protocol.StatusOK {
		t.Fatalf("%+v", r)
	}
	h.stop(protocol.StopGraceful)
	invariants(t, h.dir)
}

func TestStopForce(t *testing.T) {
	t.Parallel()
	h := newHarness(t).start()
	a := h.submit("puts go; flush stdout; exec sleep 1000")
	h.waitFor("output", func() bool { return strings.Contains(readFile(h, a), "go") })
	b := h.submit("puts later")
	h.stop(protocol.StopForce)
	if r := h.result(a); r.Status != protocol.StatusCancelled || r.ExitReason != protocol.ReasonForceStop {
		t.Fatalf("%+v", r)
	}
	if _, err := os.Stat(filepath.Join(h.dir, protocol.DirQueue, b)); err != nil {
		t.Fatalf("queued command not left intact: %v", err)
	}
}

// SIGTERM to the runner process is a graceful stop; a second one forces.
func TestSignals(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "s")
	p := startRunnerProc(t, "--session", dir, "--heartbeat", "100ms")
	name := writeCmd(t, dir, 1, "s1", "puts go; flush stdout; after 500; puts end")
	(&harness{t: t, dir: dir}).waitFor("busy", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, protocol.FileState))
		return strings.Contains(string(b), `"busy"`)
	})
	p.Signal(syscall.SIGTERM)
	if code := p.ExitCode(); code != 0 {
		t.Fatalf("exit %d\n%s", code, p.Log())
	}
	if r := waitResultFile(t, dir, name); r.Status != protocol.StatusOK {
		t.Fatalf("%+v", r)
	}
	checkNoOrphans(t, dir)

	p = startRunnerProc(t, "--session", dir, "--heartbeat", "100ms")
	name = writeCmd(t, dir, 2, "s2", "puts go; flush stdout; exec sleep 1000")
	(&harness{t: t, dir: dir}).waitFor("busy", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, protocol.FileState))
		return strings.Contains(string(b), `"s2"`)
	})
	p.Signal(syscall.SIGTERM)
	time.Sleep(50 * time.Millisecond) // Two distinct signals, not one coalesced.
	p.Signal(syscall.SIGINT)
	if code := p.ExitCode(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if r := waitResultFile(t, dir, name); r.Status != protocol.StatusCancelled {
		t.Fatalf("%+v", r)
	}
	checkNoOrphans(t, dir)
	invariants(t, dir, protocol.CommandName(1, "s1"), name)
}

// The lease is written once the command runs, so it expires mid-command
// however long the tool took to start.
func TestLeaseExpiresMidCommand(t *testing.T) {
	t.Parallel()
	h := newHarness(t).start()
	a := h.submit("puts go; flush stdout; after 60000")
	h.waitFor("output", func() bool { return strings.Contains(readFile(h, a), "go") })
	h.writeFile(protocol.FileLease, `{"lease_id":"L1","ttl_ms":400,"owner":"test"}`)
	if err := h.waitExit(); err != nil {
		t.Fatal(err)
	}
	h.checkNoOrphans()
	r := h.result(a)
	if r.Status != protocol.StatusCancelled || r.ExitReason != protocol.ReasonLeaseExpired || r.Error.Code != protocol.CodeLeaseExpired {
		t.Fatalf("%+v", r)
	}
	if st := h.state(); st.Phase != protocol.PhaseStopped || !strings.Contains(st.Reason, "lease") {
		t.Fatalf("%+v", st)
	}
}

// Renewals (changes of the lease file) keep the runner alive well past the
// first ttl; expires_at in the past would have stopped it were ttl_ms not
// set, so a master's wrong clock does not matter.
func TestLeaseRenewalKeepsRunner(t *testing.T) {
	t.Parallel()
	testenv.Slow(t, "seconds of real tclsh and races")
	h := newHarness(t).start()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			h.writeFile(protocol.FileLease, fmt.Sprintf(`{"lease_id":"L","ttl_ms":1500,"counter":%d,"expires_at":"2001-01-01T00:00:00Z"}`, i))
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	a := h.submit("after 3000; expr 7")
	r := h.result(a)
	close(stop)
	<-done
	if r.Status != protocol.StatusOK {
		t.Fatalf("%+v", r)
	}
	if st := h.state(); st.Phase == protocol.PhaseStopped {
		t.Fatal("runner stopped although the lease was renewed")
	}
	// Without renewals it now expires.
	if err := h.waitExit(); err != nil {
		t.Fatal(err)
	}
	h.checkNoOrphans()
}

func TestRequireLease(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.RequireLease = true; c.LeaseGrace = 300 * time.Millisecond }).start()
	if err := h.waitExit(); err != nil {
		t.Fatal(err)
	}
	if st := h.state(); st.Phase != protocol.PhaseStopped || !strings.Contains(st.Reason, "lease") {
		t.Fatalf("%+v", st)
	}
}

func TestExitInPayload(t *testing.T) {
	t.Parallel()
	h := newHarness(t).start()
	a := h.submit("puts bye; exit 3")
	r := h.result(a)
	if r.Status != protocol.StatusError || r.ExitReason != protocol.ReasonToolExit || r.ExitCode == nil || *r.ExitCode != 3 {
		t.Fatalf("%+v", r)
	}
	if h.output(a) != "bye\n" {
		t.Errorf("output %q (the last bytes before exit must not be lost)", h.output(a))
	}
	if rb := h.result(h.submit("expr 6*7")); *rb.Value != "42" {
		t.Fatalf("%+v", rb)
	}
}

func TestToolKilledFromOutside(t *testing.T) {
	t.Parallel()
	h := newHarness(t).start()
	a := h.submit("puts go; flush stdout; after 60000")
	h.waitFor("output", func() bool { return strings.Contains(readFile(h, a), "go") })
	syscall.Kill(h.state().ToolPID, syscall.SIGKILL)
	r := h.result(a)
	if r.Status != protocol.StatusError || r.ExitReason != protocol.ReasonToolDied || r.Signal != "SIGKILL" {
		t.Fatalf("%+v", r)
	}
	if rb := h.result(h.submit("expr 1")); rb.Status != protocol.StatusOK {
		t.Fatalf("%+v", rb)
	}
}

func TestSecondRunnerRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t).start()
	h.result(h.submit("expr 1"))
	before, _ := os.ReadFile(filepath.Join(h.dir, protocol.FileState))
	_, err := Open(h.cfg)
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: %v", err)
	}
	p := startRunnerProc(t, "--session", h.dir)
	if code := p.ExitCode(); code != ExitLocked {
		t.Fatalf("second runner exit %d, want %d\n%s", code, ExitLocked, p.Log())
	}
	if !strings.Contains(p.Log(), "held by another runner") {
		t.Errorf("message: %s", p.Log())
	}
	after, _ := os.ReadFile(filepath.Join(h.dir, protocol.FileState))
	var s1, s2 protocol.State
	jsonUnmarshal(before, &s1)
	jsonUnmarshal(after, &s2)
	if s1.SessionID != s2.SessionID {
		t.Fatal("the refused runner changed state.json")
	}
}

// The runner is killed with SIGKILL mid-command and restarted: the
// interrupted command gets exactly one runner_restarted result, the rest of
// the queue is served, nothing runs twice.
func TestRunnerCrashRecovery(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "s")
	side := filepath.Join(t.TempDir(), "side")
	tick := func(id string) string {
		return fmt.Sprintf("set f [open %q a]; puts $f %s; close $f", side, id)
	}
	p := startRunnerProc(t, "--session", dir, "--heartbeat", "100ms")
	var names []string
	for i := 1; i <= 3; i++ {
		names = append(names, writeCmd(t, dir, int64(i), fmt.Sprintf("k%d", i), tick(fmt.Sprintf("k%d", i))))
	}
	names = append(names, writeCmd(t, dir, 4, "k4", tick("k4")+"; after 60000"))
	for i := 5; i <= 8; i++ {
		names = append(names, writeCmd(t, dir, int64(i), fmt.Sprintf("k%d", i), tick(fmt.Sprintf("k%d", i))))
	}
	waitResultFile(t, dir, names[2])
	(&harness{t: t, dir: dir}).waitFor("k4 running", func() bool {
		b, _ := os.ReadFile(side)
		return strings.Contains(string(b), "k4")
	})
	p.Kill()
	// The orphaned tool loses its terminal and dies with the runner's PTY.
	checkNoOrphans(t, dir)
	p = startRunnerProc(t, "--session", dir, "--heartbeat", "100ms")
	r4 := waitResultFile(t, dir, names[3])
	if r4.Status != protocol.StatusError || r4.ExitReason != protocol.ReasonRunnerRestarted {
		t.Fatalf("%+v", r4)
	}
	for _, n := range names[4:] {
		if r := waitResultFile(t, dir, n); r.Status != protocol.StatusOK {
			t.Fatalf("%s: %+v", n, r)
		}
	}
	os.WriteFile(filepath.Join(dir, protocol.FileStop), nil, 0o600)
	if code := p.ExitCode(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	b, _ := os.ReadFile(side)
	lines := strings.Fields(string(b))
	count := map[string]int{}
	for _, l := range lines {
		count[l]++
	}
	for i := 1; i <= 8; i++ {
		if id := fmt.Sprintf("k%d", i); count[id] != 1 {
			t.Errorf("%s ran %d times (side effects %v)", id, count[id], lines)
		}
	}
	invariants(t, dir, names...)
	checkNoOrphans(t, dir)
}

func TestCrashLoopToolBacksOff(t *testing.T) {
	t.Parallel()
	testenv.Slow(t, "seconds of real tclsh and races")
	h := newHarness(t, func(c *Config) { c.Tool = []string{"sh", "-c", "exit 1"}; c.MaxRestarts = 100 }).start()
	h.waitFor("backoff", func() bool {
		st := h.state()
		return st.Phase == protocol.PhaseError && st.ToolStarts >= 4
	})
	st := h.state()
	if !strings.Contains(st.Reason, "restart") {
		t.Errorf("reason %q", st.Reason)
	}
	// The delays themselves are checked on a fake clock by
	// TestGovCrashLoopBacksOff; here a real tool on a real PTY shows the
	// phase and the reason.
}

func TestInitScriptSurvivesRestart(t *testing.T) {
	t.Parallel()
	init := filepath.Join(t.TempDir(), "init.tcl")
	os.WriteFile(init, []byte("puts {loading design}\nset ::design_loaded yes\nproc helper {} {return helped}\n"), 0o600)
	h := newHarness(t, func(c *Config) { c.Init = []string{init} }).start()
	if r := h.result(h.submit("list $::design_loaded [helper]")); *r.Value != "yes helped" {
		t.Fatalf("%+v", r)
	}
	h.result(h.submit("exit 0"))
	if r := h.result(h.submit("list $::design_loaded [helper]")); *r.Value != "yes helped" {
		t.Fatalf("after restart: %+v", r)
	}
	if n := countEvents(h.events(), protocol.EvInitEnd); n != 2 {
		t.Errorf("%d init_end events", n)
	}
}

func TestInitFailingServesNothing(t *testing.T) {
	t.Parallel()
	init := filepath.Join(t.TempDir(), "init.tcl")
	os.WriteFile(init, []byte("error {license not available}\n"), 0o600)
	h := newHarness(t, func(c *Config) { c.Init = []string{init} }).start()
	a := h.submit("puts never")
	h.waitFor("error phase", func() bool {
		st := h.state()
		return st.Phase == protocol.PhaseError && strings.Contains(st.Reason, "license not available")
	})
	h.waitFor("a second attempt", func() bool { return h.state().ToolStarts >= 2 })
	if _, err := os.Stat(filepath.Join(h.dir, protocol.DirQueue, a)); err != nil {
		t.Fatalf("command must stay queued: %v", err)
	}
	if _, err := os.Stat(filepath.Join(h.dir, protocol.DirResult, a)); err == nil {
		t.Fatal("a command ran against a half-initialised tool")
	}
	// Fixing the init lets the queue drain.
	os.WriteFile(init, []byte("set ::ok 1\n"), 0o600)
	if r := h.result(a); r.Status != protocol.StatusOK {
		t.Fatalf("%+v", r)
	}
}

// Inflight leftovers with and without results are settled at start.
func TestRecoveryOfInflight(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	writeCmd(t, h.dir, 1, "r1", "puts x")
	writeCmd(t, h.dir, 2, "r2", "puts y")
	for _, n := range []string{protocol.CommandName(1, "r1"), protocol.CommandName(2, "r2")} {
		os.Rename(filepath.Join(h.dir, protocol.DirQueue, n), filepath.Join(h.dir, protocol.DirInflight, n))
	}
	h.writeDone(protocol.CommandName(2, "r2"))
	// A torn last line in the event log.
	os.WriteFile(filepath.Join(h.dir, protocol.FileMeta), []byte("{\"ts\":\"2026-01-01T00:00:00Z\",\"event\":\"x\"}\n{\"ts\":\"20"), 0o600)
	h.start()
	r1 := h.result(protocol.CommandName(1, "r1"))
	if r1.ExitReason != protocol.ReasonRunnerRestarted {
		t.Fatalf("%+v", r1)
	}
	h.stop(protocol.StopGraceful)
	evs := h.events() // Also validates every line: the torn one is gone.
	if countEvents(evs, protocol.EvRecovered) != 2 {
		t.Errorf("recovered events: %d", countEvents(evs, protocol.EvRecovered))
	}
	invariants(t, h.dir)
}

// A lease whose expires_at passed before the runner started (left by an
// earlier master) is ignored until a master renews it, as PROTOCOL.md §10
// says: the new runner serves (every new runner used to stop
// with "lease expired"). A renewal that is itself already expired then
// stops it.
func TestStaleLeaseAtStartIgnored(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.writeFile(protocol.FileLease, `{"lease_id":"old","expires_at":1000}`)
	h.start()
	r := h.result(h.submit("expr 6*7"))
	if r.Status != protocol.StatusOK || *r.Value != "42" {
		t.Fatalf("%+v", r)
	}
	if st := h.state(); st.Phase == protocol.PhaseStopped {
		t.Fatalf("a lease that expired before the start stopped the runner: %+v", st)
	}
	ignored := false
	for _, e := range h.events() {
		if e.Event == protocol.EvLease && e.Detail["action"] == "stale_ignored" {
			ignored = true
		}
		if e.Event == protocol.EvLease && e.Detail["action"] == "expired" {
			t.Fatalf("expired event for the ignored lease: %+v", e)
		}
	}
	if !ignored {
		t.Error("no stale_ignored lease event")
	}
	h.writeFile(protocol.FileLease, `{"lease_id":"new","expires_at":2000}`) // A renewal, already past.
	if err := h.waitExit(); err != nil {
		t.Fatal(err)
	}
	if st := h.state(); st.Phase != protocol.PhaseStopped || !strings.Contains(st.Reason, "lease new expired") {
		t.Fatalf("%+v", st)
	}
}

// A leftover lease in the form SkillPilot's own masters write
// (ttl_ms and expires_at, from `master lease --ttl 2s` never renewed) whose
// expires_at passed before the runner started is stale whatever else it
// says (PROTOCOL.md §10): the new runner serves a command that runs well
// past ttl_ms. Once a master writes a lease again (a change of the file),
// ttl_ms is judged as usual and the runner stops when it is not renewed.
// The lease is judged on the runner's clock: a fake one here, moved 5 s
// (five heartbeats) while the command waits for input.
func TestStaleTTLLeaseAtStartIgnored(t *testing.T) {
	t.Parallel()
	h := newFakeHarness(t, nil)
	h.writeFile(protocol.FileLease, `{"lease_id":"old","ttl_ms":300,"expires_at":"2001-01-01T00:00:00Z","counter":7,"owner":"m@h:1"}`)
	h.start()
	a := h.submit("printn waiting\ngets\nvalue 42")
	waitEvent(t, h.waitTool(1), "gets")
	from := h.clk.Now()
	h.advanceUntil("5 s on the runner's clock", 100*time.Millisecond, func() bool { return h.clk.Now().Sub(from) >= 5*time.Second })
	h.send(1, "c1", "go\n", nil) // Had the lease stopped the runner, a's result would say lease_expired.
	r := h.result(a)
	if r.Status != protocol.StatusOK || *r.Value != "42" {
		t.Fatalf("a leftover ttl_ms lease stopped the new runner: %+v %+v", r, r.Error)
	}
	ignored := false
	for _, e := range h.events() {
		if e.Event == protocol.EvLease && e.Detail["action"] == "stale_ignored" && e.Detail["lease_id"] == "old" {
			ignored = true
		}
		if e.Event == protocol.EvLease && e.Detail["action"] == "expired" {
			t.Fatalf("expired event for the ignored lease: %+v", e)
		}
	}
	if !ignored {
		t.Error("no stale_ignored lease event")
	}
	h.writeFile(protocol.FileLease, `{"lease_id":"new","ttl_ms":300,"expires_at":"2001-01-01T00:00:00Z","counter":8}`)
	if err := h.waitExit(); err != nil {
		t.Fatal(err)
	}
	if st := h.state(); st.Phase != protocol.PhaseStopped || !strings.Contains(st.Reason, "lease new not renewed") {
		t.Fatalf("%+v", st)
	}
}

// With --require-lease, a stale lease found at start counts
// as no lease: unless a master renews it within --lease-grace, the runner
// stops as on expiry, and says why.
func TestRequireLeaseStaleAtStart(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.RequireLease = true; c.LeaseGrace = 300 * time.Millisecond })
	h.writeFile(protocol.FileLease, `{"lease_id":"old","ttl_ms":3600000,"expires_at":"2001-01-01T00:00:00Z","counter":7}`)
	h.start()
	if err := h.waitExit(); err != nil {
		t.Fatal(err)
	}
	if st := h.state(); st.Phase != protocol.PhaseStopped || !strings.Contains(st.Reason, "stale") {
		t.Fatalf("%+v", st)
	}
}

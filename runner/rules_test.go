package runner

import (
	"errors"
	"io/fs"
	"os"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
)

// The runner's decisions as functions of plain values, each table read as
// the rule PROTOCOL.md states. The end-to-end tests show the same rules on
// a real runner; these show every row of them.

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// fileAt is a file's size and mtime, all stillWriting looks at.
type fileAt struct {
	size int64
	mod  time.Time
}

func (f fileAt) Name() string       { return "cmd_1_a.json" }
func (f fileAt) Size() int64        { return f.size }
func (f fileAt) Mode() fs.FileMode  { return 0o644 }
func (f fileAt) ModTime() time.Time { return f.mod }
func (f fileAt) IsDir() bool        { return false }
func (f fileAt) Sys() any           { return nil }

var _ os.FileInfo = fileAt{}

// PROTOCOL.md section 4: a file that is empty or not valid JSON is retried,
// unchanged, until it has stayed so for --parse-grace on the runner's
// clock, measured from the last change of its size or mtime.
func TestStillWriting(t *testing.T) {
	const grace = 2 * time.Second
	seen := fileSeen{size: 10, mod: t0, at: t0}
	for _, c := range []struct {
		rule   string
		last   fileSeen
		file   fileAt
		now    time.Time
		wait   bool
		seenAt time.Time // when the grace counts from after this look
	}{
		{"first seen incomplete: the grace starts now", fileSeen{}, fileAt{10, t0}, t0, true, t0},
		{"unchanged within the grace: wait", seen, fileAt{10, t0}, t0.Add(grace - time.Millisecond), true, t0},
		{"unchanged for the whole grace: answer it", seen, fileAt{10, t0}, t0.Add(grace), false, t0},
		{"grown: the grace starts again", seen, fileAt{11, t0}, t0.Add(5 * time.Second), true, t0.Add(5 * time.Second)},
		{"rewritten at the same size (mtime moved): the grace starts again", seen, fileAt{10, t0.Add(time.Second)}, t0.Add(5 * time.Second), true, t0.Add(5 * time.Second)},
		{"a read error was seen first (at only): its time counts, the file's look is taken", fileSeen{at: t0}, fileAt{10, t0}, t0.Add(3 * time.Second), true, t0.Add(3 * time.Second)},
	} {
		got, wait := stillWriting(c.last, c.file, c.now, grace)
		if wait != c.wait || !got.at.Equal(c.seenAt) || got.size != c.file.size || !got.mod.Equal(c.file.mod) {
			t.Errorf("%s: stillWriting = %+v, %v; want wait %v from %v", c.rule, got, wait, c.wait, c.seenAt)
		}
	}
}

// PROTOCOL.md section 8: the phase, first match wins.
func TestDerivePhase(t *testing.T) {
	errDisk := errors.New("no space left on device")
	ready := toolFacts{now: toolReady, wasReady: true}
	for _, c := range []struct {
		rule string
		f    phaseFacts
		want protocol.Phase
		why  string
	}{
		{"shutdown has ended everything: stopped, with the stop's reason", phaseFacts{stop: stopDone, stopping: true, stopWhy: "ctl stop", layoutErr: errDisk, tool: ready}, protocol.PhaseStopped, "ctl stop"},
		{"a stop was requested: stopping, whatever else holds", phaseFacts{stopping: true, stopWhy: "lease expired", layoutErr: errDisk, tool: ready}, protocol.PhaseStopping, "lease expired"},
		{"the tool is being ended at shutdown: stopping", phaseFacts{stop: stopClosing, stopWhy: "SIGTERM", tool: ready}, protocol.PhaseStopping, "SIGTERM"},
		{"the session directory cannot be used: error, saying why", phaseFacts{layoutErr: errDisk, tool: ready}, protocol.PhaseError, errDisk.Error()},
		{"results wait for a retry: error, with how many", phaseFacts{unwritten: 2, writeErr: errDisk, tool: ready}, protocol.PhaseError, "2 result(s) waiting to be written, retrying: " + errDisk.Error()},
		{"the tool at its prompt: idle", phaseFacts{tool: ready}, protocol.PhaseIdle, ""},
		{"the tool running a command: busy", phaseFacts{tool: toolFacts{now: toolBusy, cmd: true, wasReady: true}}, protocol.PhaseBusy, ""},
		{"a failed start being killed: error, with the failure", phaseFacts{tool: toolFacts{now: toolKilling, killFailure: "no prompt within 30s"}}, protocol.PhaseError, "no prompt within 30s"},
		{"a command's tool being killed: busy", phaseFacts{tool: toolFacts{now: toolKilling, cmd: true, wasReady: true}}, protocol.PhaseBusy, ""},
		{"between tools with a command running: busy", phaseFacts{tool: toolFacts{cmd: true, failure: "exited"}}, protocol.PhaseBusy, ""},
		{"the next start waits after a failure: error, saying which restart comes when", phaseFacts{tool: toolFacts{failure: "exited with code 1; restart 1 of 5 in 250ms", wasReady: true}}, protocol.PhaseError, "exited with code 1; restart 1 of 5 in 250ms"},
		{"before the first tool was ever ready: starting", phaseFacts{}, protocol.PhaseStarting, ""},
		{"after a tool died running a command: busy", phaseFacts{tool: toolFacts{wasReady: true, diedBusy: true}}, protocol.PhaseBusy, ""},
		{"after a tool died at its prompt: idle", phaseFacts{tool: toolFacts{wasReady: true}}, protocol.PhaseIdle, ""},
	} {
		if p, why := derivePhase(c.f); p != c.want || why != c.why {
			t.Errorf("%s: derivePhase = %s %q, want %s %q", c.rule, p, why, c.want, c.why)
		}
	}
}

// PROTOCOL.md section 10: the lease, judged on the runner's own clock.
func TestLeaseRules(t *testing.T) {
	ttlLease := protocol.Lease{LeaseID: "L", TTLMS: 2000, ExpiresAt: protocol.Time{Time: t0.Add(time.Hour)}}
	atLease := protocol.Lease{LeaseID: "L", ExpiresAt: protocol.Time{Time: t0.Add(10 * time.Second)}}
	for _, c := range []struct {
		rule string
		l    leaseWatch
		now  time.Time
		why  string // "" while it stands
	}{
		{"with ttl_ms: renewed within ttl_ms stands", leaseWatch{valid: true, lease: ttlLease, ttl: 2 * time.Second, renewedAt: t0}, t0.Add(2 * time.Second), ""},
		{"with ttl_ms: no renewal seen for ttl_ms expires it", leaseWatch{valid: true, lease: ttlLease, ttl: 2 * time.Second, renewedAt: t0}, t0.Add(2*time.Second + time.Millisecond), "lease L not renewed for 2000ms"},
		{"with ttl_ms: expires_at plays no part in expiry", leaseWatch{valid: true, lease: protocol.Lease{LeaseID: "L", TTLMS: 2000, ExpiresAt: protocol.Time{Time: t0.Add(-time.Hour)}}, ttl: 2 * time.Second, renewedAt: t0}, t0.Add(time.Second), ""},
		{"with only expires_at: stands until the runner's clock passes it", leaseWatch{valid: true, lease: atLease, renewedAt: t0}, t0.Add(10 * time.Second), ""},
		{"with only expires_at: expires once the runner's clock passes it", leaseWatch{valid: true, lease: atLease, renewedAt: t0}, t0.Add(11 * time.Second), "lease L expired at 2026-01-02T03:04:15Z"},
		{"the stale lease found at start is ignored until renewed", leaseWatch{valid: true, ignored: true, lease: atLease, renewedAt: t0}, t0.Add(time.Hour), ""},
		{"no lease understood: nothing expires (--require-lease decides)", leaseWatch{}, t0.Add(time.Hour), ""},
	} {
		if why := c.l.verdict(c.now); why != c.why {
			t.Errorf("%s: verdict = %q, want %q", c.rule, why, c.why)
		}
	}

	// A lease whose expires_at had passed when the runner started is stale,
	// whatever else it says; one with ttl_ms and no expires_at cannot be
	// told stale.
	for _, c := range []struct {
		rule  string
		l     leaseWatch
		stale bool
	}{
		{"expires_at passed at start: stale", leaseWatch{valid: true, lease: atLease}, true},
		{"expires_at passed at start, with ttl_ms too: stale", leaseWatch{valid: true, lease: protocol.Lease{TTLMS: 2000, ExpiresAt: atLease.ExpiresAt}}, true},
		{"ttl_ms and no expires_at: judged from the start", leaseWatch{valid: true, lease: protocol.Lease{TTLMS: 2000}}, false},
		{"expires_at still ahead: judged as usual", leaseWatch{valid: true, lease: ttlLease}, false},
		{"nothing understood: nothing to call stale", leaseWatch{lease: atLease}, false},
	} {
		if got := c.l.staleAt(t0.Add(time.Minute)); got != c.stale {
			t.Errorf("%s: staleAt = %v, want %v", c.rule, got, c.stale)
		}
	}

	// With --require-lease, a lease must appear within --lease-grace; a
	// lease never understood and the stale one found at start count as
	// missing.
	const grace = 30 * time.Second
	for _, c := range []struct {
		rule    string
		l       leaseWatch
		require bool
		up      time.Duration
		missing bool
	}{
		{"without --require-lease no lease is needed", leaseWatch{}, false, time.Hour, false},
		{"none within the grace: not yet", leaseWatch{}, true, grace, false},
		{"none after the grace: missing", leaseWatch{}, true, grace + time.Millisecond, true},
		{"only the stale one found at start after the grace: missing", leaseWatch{valid: true, ignored: true}, true, time.Hour, true},
		{"one understood: not missing", leaseWatch{valid: true}, true, time.Hour, false},
	} {
		if got := c.l.missing(c.require, c.up, grace); got != c.missing {
			t.Errorf("%s: missing = %v, want %v", c.rule, got, c.missing)
		}
	}
}

// PROTOCOL.md section 11: a failed start is restarted after 250 ms, 500 ms,
// 1 s, ... up to 30 s; more than --max-restarts failed starts within
// --restart-window give up. A ready tool that dies by itself while idle
// within fastDeath of its start, again and again, is restarted after the
// same backoff; a death during or because of a command restarts at once.
func TestRestartRules(t *testing.T) {
	for n, want := range map[int]time.Duration{
		1: 250 * time.Millisecond, 2: 500 * time.Millisecond, 3: time.Second, 4: 2 * time.Second,
		7: 16 * time.Second, 8: 30 * time.Second, 9: 30 * time.Second, 100: 30 * time.Second,
	} {
		if got := backoff(n); got != want {
			t.Errorf("backoff(%d) = %v, want %v", n, got, want)
		}
	}

	const window = time.Minute
	life := toolLife{}
	for i, c := range []struct {
		at     time.Duration // since t0
		recent int
		delay  time.Duration
	}{
		{0, 1, 250 * time.Millisecond},
		{10 * time.Second, 2, 500 * time.Millisecond},
		{20 * time.Second, 3, time.Second},
		{70 * time.Second, 2, 2 * time.Second}, // The first two fell out of the window; the streak goes on.
	} {
		if recent, delay := life.failedStart(t0.Add(c.at), window); recent != c.recent || delay != c.delay {
			t.Errorf("failed start %d at %v: %d within the window, delay %v; want %d, %v", i+1, c.at, recent, delay, c.recent, c.delay)
		}
	}

	for _, c := range []struct {
		rule   string
		deaths int // fast deaths before this one
		hadCmd bool
		lived  time.Duration
		delay  time.Duration
		after  int // fast deaths counted after it
	}{
		{"a death because of a command: at once", 3, true, time.Millisecond, 0, 0},
		{"idle, after a long life: at once, the count starts again", 3, false, fastDeath, 0, 0},
		{"idle, soon after its start: the backoff", 0, false, fastDeath - time.Millisecond, 250 * time.Millisecond, 1},
		{"idle, soon after its start, again: the backoff doubles", 2, false, time.Millisecond, time.Second, 3},
	} {
		life := toolLife{fastDeaths: c.deaths, born: t0}
		if d := life.restartDelay(c.hadCmd, t0.Add(c.lived)); d != c.delay || life.fastDeaths != c.after || life.diedBusy != c.hadCmd {
			t.Errorf("%s: delay %v, %d fast deaths, diedBusy %v; want %v, %d, %v", c.rule, d, life.fastDeaths, life.diedBusy, c.delay, c.after, c.hadCmd)
		}
	}
}

// PROTOCOL.md 6.4 and 11.1: how a command whose done line came ended.
func TestEndOutcome(t *testing.T) {
	t.Parallel()
	const unfinished = "the tool did not run the line typed after the payload: the payload's last statement is unfinished (an open block, bracket or quote took that line)"
	tcl := func(f endFacts) endFacts { f.tcl = true; return f }
	line := func(f endFacts) endFacts { f.line, f.injected = true, true; return f }
	for _, c := range []struct {
		rule    string
		f       endFacts
		status  protocol.Status
		message string // of the error, if any
		info    string
	}{
		{"no return code: ok", endFacts{}, protocol.StatusOK, "", ""},
		{"return code 0: ok", endFacts{hasRC: true}, protocol.StatusOK, "", ""},
		{"Tcl's 2 is a return: ok", tcl(endFacts{hasRC: true, rc: 2}), protocol.StatusOK, "", ""},
		{"a shell's 2 is a failure", endFacts{hasRC: true, rc: 2}, protocol.StatusError, "the payload ended with return code 2", ""},
		{"Tcl's error: its message, errorInfo and errorCode", tcl(endFacts{hasRC: true, rc: 1, value: "boom", errorInfo: "boom\n    while executing", errorCode: "NONE"}),
			protocol.StatusError, "boom", "boom\n    while executing"},
		{"Tcl's error without a message: the code", tcl(endFacts{hasRC: true, rc: 1}), protocol.StatusError, "the payload ended with return code 1", ""},
		{"a shell's value is not a message", endFacts{hasRC: true, rc: 1, value: "x"}, protocol.StatusError, "the payload ended with return code 1", ""},
		{"an error line beats return code 0", endFacts{hasRC: true, errLine: "ERROR: no such cell"}, protocol.StatusError, "ERROR: no such cell", ""},
		{"a line driver's payload that ran to its end: its error line", line(endFacts{ended: true, errLine: "Traceback (most recent call last):"}),
			protocol.StatusError, "Traceback (most recent call last):", ""},
		{"a line driver's payload that ran to its end, clean: ok", line(endFacts{ended: true}), protocol.StatusOK, "", ""},
		{"no end line, a file command: stopped before its end", line(endFacts{}), protocol.StatusError, "the tool stopped running the payload before its end", ""},
		{"no end line, typed lines: unfinished statement", line(endFacts{sourceless: true}), protocol.StatusError, unfinished, ""},
		{"no end line: the error line says why", line(endFacts{sourceless: true, errLine: "ERROR: x"}), protocol.StatusError, "ERROR: x", ""},
		{"no end line, even at stops_at_error", line(endFacts{stopsAtError: true}), protocol.StatusError, "the tool stopped running the payload before its end", ""},
		{"stops_at_error and ran to its end: ok whatever it printed", line(endFacts{ended: true, stopsAtError: true, errLine: "ERROR: x"}), protocol.StatusOK, "", ""},
		{"the end line is not awaited without injected lines", endFacts{line: true, errLine: ""}, protocol.StatusOK, "", ""},
	} {
		st, e := endOutcome(c.f)
		if st != c.status {
			t.Errorf("%s: status %q, want %q", c.rule, st, c.status)
			continue
		}
		switch {
		case c.status == protocol.StatusOK && e != nil:
			t.Errorf("%s: ok with error %+v", c.rule, e)
		case c.status != protocol.StatusOK && (e == nil || e.Code != protocol.CodeToolError || e.Message != c.message || e.ErrorInfo != c.info):
			t.Errorf("%s: error %+v, want tool_error %q (error_info %q)", c.rule, e, c.message, c.info)
		}
	}
}

// PROTOCOL.md 11.1: a line driver's command whose done line has not come.
func TestJudgeBusy(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	for _, c := range []struct {
		rule string
		f    busyFacts
		want busyVerdict
	}{
		{"file command, printed just now: wait out promptQuiet", busyFacts{lazyDone: true, quiet: 20 * ms, promptKnown: true, atPrompt: true, promptMatch: true},
			busyVerdict{busyWait, promptQuiet - 20*ms}},
		{"file command, quiet at its prompt: type the done line", busyFacts{lazyDone: true, quiet: promptQuiet, promptKnown: true, atPrompt: true, promptMatch: true},
			busyVerdict{busyTypeDone, stuckQuiet}},
		{"file command, quiet at another prompt (a question): wait", busyFacts{lazyDone: true, quiet: time.Minute, promptKnown: true, atPrompt: true},
			busyVerdict{busyWait, stuckQuiet}},
		{"file command, quiet after a whole line: still running", busyFacts{lazyDone: true, quiet: time.Minute, promptKnown: true},
			busyVerdict{busyWait, stuckQuiet}},
		{"file command, prompt unknown, quiet under stuckQuiet: wait", busyFacts{lazyDone: true, quiet: 500 * ms},
			busyVerdict{busyWait, stuckQuiet}},
		{"file command, prompt unknown, quiet for stuckQuiet: type the done line", busyFacts{lazyDone: true, quiet: stuckQuiet},
			busyVerdict{busyTypeDone, stuckQuiet}},
		{"typed lines, quiet at an unfinished line for stuckQuiet: stuck", busyFacts{quiet: stuckQuiet, atPrompt: true},
			busyVerdict{busyStuck, stuckQuiet}},
		{"typed lines, quiet at an unfinished line, not yet: look at stuckQuiet", busyFacts{quiet: 300 * ms, atPrompt: true},
			busyVerdict{busyWait, stuckQuiet - 300*ms}},
		{"typed lines, a long quiet step after a whole line: look again later, not at once", busyFacts{quiet: time.Minute},
			busyVerdict{busyWait, stuckQuiet}},
	} {
		if got := judgeBusy(c.f); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.rule, got, c.want)
		}
	}
}

// PROTOCOL.md 11.1 rule 6: a stuck candidate is stuck only once two looks
// in a row found its foreground group asleep, with no CPU time used.
func TestProvenWaiting(t *testing.T) {
	t.Parallel()
	asleep := fgActivity{cpu: 40, procs: 1}
	for _, c := range []struct {
		rule string
		prev *fgActivity
		now  fgActivity
		want bool
	}{
		{"the first look: not yet", nil, asleep, false},
		{"asleep at both looks, no CPU used: waits", &asleep, asleep, true},
		{"running now (computing, or ready to run on a loaded host): works", &asleep, fgActivity{working: true, cpu: 40, procs: 1}, false},
		{"was running at the last look: works", &fgActivity{working: true, cpu: 40, procs: 1}, asleep, false},
		{"asleep at both, a tick or two used between them (timers, a licence heartbeat): waits", &asleep, fgActivity{cpu: 40 + idleTicks, procs: 1}, true},
		{"asleep at both, but more CPU used between them: works", &asleep, fgActivity{cpu: 41 + idleTicks, procs: 1}, false},
		{"CPU time went back (a process of the group was reaped elsewhere): look again", &asleep, fgActivity{cpu: 39, procs: 1}, false},
		{"a process came or went between the looks: look again", &asleep, fgActivity{cpu: 40, procs: 2}, false},
	} {
		if got := provenWaiting(c.prev, c.now); got != c.want {
			t.Errorf("%s: %v, want %v", c.rule, got, c.want)
		}
	}
}

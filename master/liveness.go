package master

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
)

// DefaultWaitForRunner is how long a request or a wait goes on without
// seeing a live runner before it gives up with ErrRunnerNotAlive
// (Session.WaitForRunner changes it), unless ten heartbeat intervals are
// longer. It is longer than the liveness window of a runner with
// the default heartbeat (2 × 1 s + 250 ms), so neither a heartbeat delayed
// by a loaded host or file server nor a runner being restarted by a
// supervisor fails requests and waits.
const DefaultWaitForRunner = 10 * time.Second

// defaultInterval is the heartbeat interval assumed before a heartbeat
// has been read (the runner's default --heartbeat).
const defaultInterval = time.Second

// liveWindow is the liveness window of a runner whose heartbeat interval is
// interval (heartbeat.json interval_ms; 0: not known, 1 s): its counter
// must be seen moving within 2 × interval + 250 ms to count as alive
// (PROTOCOL.md section 8). An interval under 100 ms counts as 100 ms.
func liveWindow(interval time.Duration) time.Duration {
	if interval <= 0 {
		interval = defaultInterval
	}
	return 2*max(interval, 100*time.Millisecond) + 250*time.Millisecond
}

// graceFor is the one grace of every request and wait (PROTOCOL.md section
// 8, "Giving up"): how long a master goes on without seeing a live runner
// before it answers ErrRunnerNotAlive. base is the caller's setting
// (Session.WaitForRunner, --wait-for-runner); 0 means DefaultWaitForRunner
// or ten heartbeat intervals, whichever is longer. Whatever base says, the
// grace is at least one liveness window, or a live runner's counter could
// not be seen moving before the grace ran out.
func graceFor(base, interval time.Duration) time.Duration {
	if interval <= 0 {
		interval = defaultInterval
	}
	if base <= 0 {
		base = max(DefaultWaitForRunner, 10*interval)
	}
	return max(base, liveWindow(interval))
}

// look is one liveness judgment made without waiting.
type look struct {
	alive    bool          // the heartbeat counter was seen moving within the window
	definite bool          // when not alive: dead for certain (stopped, no state, a free lock)
	late     bool          // when not alive: the counter has not moved for more than the window
	stopped  bool          // the runner stopped on purpose (phase stopped, its lock free): it will not come back by itself
	interval time.Duration // the heartbeat's interval_ms (0: no heartbeat read)
	reason   string        // why, in words
	state    protocol.State
}

// observe judges liveness by the documented rule (PROTOCOL.md section 8)
// from one look at the session's files, remembering the heartbeat counter
// between calls: alive when the counter moved within 2 × interval + 250 ms
// on our clock, or, on a local filesystem, at once when the runner's flock
// is held and heartbeat.json was rewritten within that window (its mtime
// is our own clock there); dead at once when the phase is stopped or, on a
// local filesystem, the runner's flock is free. A counter that has not
// moved for more than the window is late: not alive, yet not dead either
// (a loaded host or file server delays heartbeats); only the grace of a
// request or wait (graceFor) turns that into "runner not alive". A counter
// not yet seen moving gives an indefinite "not alive".
func (s *Session) observe() look {
	state, serr := s.ReadState()
	hb, herr := s.io.ReadHeartbeat()
	l := look{state: state}
	switch {
	case serr != nil && herr != nil:
		l.definite, l.reason = true, "no runner has written state yet"
		return l
	case state.Phase == protocol.PhaseStopped || (herr == nil && hb.Phase == protocol.PhaseStopped):
		l.definite, l.reason = true, "the runner stopped"
		// On purpose when no runner holds the lock (on NFS the lock cannot
		// be probed: state.json alone, which a new runner rewrites at its
		// start).
		l.stopped = s.io.OnNetworkFS() || !s.io.LockHeld()
		if state.Reason != "" {
			l.reason += " (" + state.Reason + ")"
		}
		return l
	case !s.io.OnNetworkFS() && !s.io.LockHeld():
		l.definite, l.reason = true, "the runner's lock is free"
		return l
	case herr != nil:
		l.reason = "no heartbeat yet"
		return l
	}
	l.interval = time.Duration(hb.IntervalMS) * time.Millisecond
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	// The counter is keyed by the runner's session_id: a new runner counts
	// from 1 again and may show the very number a dead one stopped at.
	if s.lastHB.at.IsZero() || hb.Counter != s.lastHB.counter || hb.SessionID != s.lastHB.session {
		s.lastHB = hbSeen{session: hb.SessionID, counter: hb.Counter, at: now, moved: !s.lastHB.at.IsZero()}
	}
	window := liveWindow(l.interval)
	age := now.Sub(s.lastHB.at)
	switch {
	case s.lastHB.moved && age <= window:
		l.alive, l.reason = true, "heartbeat counter moved"
	case age > window:
		l.late, l.reason = true, "heartbeat counter has not moved for "+age.Round(time.Millisecond).String()
	case !s.io.OnNetworkFS() && s.heartbeatWrittenWithin(now, window):
		// The lock is held (checked above) and the heartbeat was rewritten
		// within the window: on a local filesystem the file's mtime is
		// this host's clock, so no two clocks meet and there is no need to
		// watch the counter move (which costs up to a heartbeat period).
		l.alive, l.reason = true, "runner's lock held and heartbeat fresh"
	default:
		l.reason = "heartbeat counter not seen moving yet"
	}
	return l
}

// heartbeatWrittenWithin reports whether heartbeat.json's mtime is at most
// window before now. Only meaningful on a local filesystem, where the
// mtime is stamped by this host's clock.
func (s *Session) heartbeatWrittenWithin(now time.Time, window time.Duration) bool {
	fi, err := s.io.Lstat(protocol.FileHeartbeat) // A symlink or FIFO there is no heartbeat.
	return err == nil && fi.Mode().IsRegular() && now.Sub(fi.ModTime()) <= window
}

// runnerWatch gives up a request or a wait once no live runner has been
// seen for the grace (graceFor, from the caller's base and the heartbeat
// interval the runner publishes).
type runnerWatch struct {
	s    *Session
	cmd  *Command      // when watching for a command: followed if a pool moves it
	base time.Duration // Session.WaitForRunner (0: the default)
	// forReady: the wait is for readiness (WaitReady), how a caller waits
	// for a runner to be started again: a stopped runner does not end it
	// before the grace.
	forReady  bool
	lastAlive time.Time // our clock
	next      time.Time // rate limit of the checks
	last      look
}

// stoppedGrace replaces the grace when the runner stopped on purpose
// (state.json's phase stopped, its lock free): such a runner does not come
// back by itself, so a wait ends within about a second instead of the
// grace. The second lets a runner being started on the
// session right now write its state first. (WaitReady, how a caller waits
// for a runner to be started again, keeps the whole grace.)
const stoppedGrace = time.Second

// watchEvery is how often a wait looks at the runner's liveness. The first
// look comes only after it too, so that a short wait (a command's round
// trip) costs no reads beyond its result's: on NFS every read is a round
// trip to the server.
const watchEvery = 250 * time.Millisecond

// newRunnerWatch starts watching now: a wait that never sees a live runner
// fails the grace after it began.
func (s *Session) newRunnerWatch() *runnerWatch {
	now := time.Now()
	return &runnerWatch{s: s, base: s.WaitForRunner, lastAlive: now, next: now.Add(watchEvery)}
}

// newRunnerWatch watches the runner of the session c is in now (forward.go:
// a pool may move a queued command to another session).
func (c *Command) newRunnerWatch() *runnerWatch {
	w := c.s.newRunnerWatch()
	w.cmd = c
	return w
}

// check returns an error wrapping ErrRunnerNotAlive once no live runner has
// been seen for the grace. It looks at the files at most every watchEvery.
func (w *runnerWatch) check() error {
	now := time.Now()
	if now.Before(w.next) {
		return nil
	}
	w.next = now.Add(watchEvery)
	if _, err := w.s.io.Root(); errors.Is(err, ErrSessionMissing) {
		// Deleted: no runner will ever serve it, so the grace is not
		// waited out, and no advice names a directory that is gone.
		return withContext(fmt.Errorf("%w: %s is gone (its directory was deleted)", ErrSessionMissing, w.s.io.Dir()), map[string]any{"dir": w.s.io.Dir()})
	}
	if w.cmd != nil {
		// A command a pool moved is served by its new session's runner.
		if cur := w.cmd.Resolve(); cur.s.io.Dir() != w.s.io.Dir() {
			w.s, w.cmd = cur.s, cur
		}
	}
	return w.judge(now, w.s.observe())
}

// judge records one look taken at now and returns the verdict of the
// grace: nil while a live runner was seen within it.
func (w *runnerWatch) judge(now time.Time, l look) error {
	w.last = l
	if l.alive {
		w.lastAlive = now
		return nil
	}
	gone, grace := now.Sub(w.lastAlive), graceFor(w.base, l.interval)
	if l.stopped && !w.forReady && gone >= min(stoppedGrace, grace) {
		return withContext(fmt.Errorf("%w: %s", ErrRunnerNotAlive, l.reason), notAliveContext(l.reason, grace))
	}
	if gone > grace {
		return withContext(fmt.Errorf("%w: %s; no live runner seen for %v (raise with --wait-for-runner)", ErrRunnerNotAlive, l.reason, gone.Round(100*time.Millisecond)),
			notAliveContext(l.reason, grace))
	}
	return nil
}

// awaitAlive watches the runner until it is seen alive, and returns that
// look: the check a request makes before it writes anything. A definite
// sign of death (phase stopped, no state, a free lock on a local
// filesystem) ends it at once; a heartbeat that is merely late does not:
// it fails only once no live runner has been seen for the grace, the
// same rule as every wait's (PROTOCOL.md section 8, "Giving up").
func (s *Session) awaitAlive(ctx context.Context) (look, error) {
	w := s.newRunnerWatch()
	// Every 100 ms, the most PROTOCOL.md section 19.1 allows: a counter
	// moves once a heartbeat, so looking more often would see nothing new.
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		l := s.observe()
		if l.alive {
			return l, nil
		}
		if l.definite {
			return l, withContext(fmt.Errorf("%w: %s", ErrRunnerNotAlive, l.reason), notAliveContext(l.reason, graceFor(w.base, l.interval)))
		}
		if err := w.judge(time.Now(), l); err != nil {
			return l, err
		}
		select {
		case <-ctx.Done():
			return l, ctxErr(ctx)
		case <-t.C:
		}
	}
}

// notAliveContext is the context of ErrRunnerNotAlive: why, and the grace
// that applied (PROTOCOL.md section 8, "Giving up").
func notAliveContext(reason string, grace time.Duration) map[string]any {
	return map[string]any{"reason": reason, "grace_ms": grace.Milliseconds()}
}

// cannotServe returns ErrCannotServe when the runner's last observed phase
// is error (for Ready: an alive runner that does not become ready).
func cannotServe(st protocol.State) error {
	if st.Phase == protocol.PhaseError {
		return fmt.Errorf("%w: phase error: %s", ErrCannotServe, st.Reason)
	}
	return nil
}

// NoRunnerHint says why no runner seems to serve the session, from one look
// without waiting, or returns "" when one may: it is for the warning of a
// plain submit (master submit), which queues the command with seq either
// way.
// Beyond the definite signs (no state, phase stopped, a free lock on a
// local filesystem) it compares the heartbeat file's mtime with that of
// the seq reservation seq, both stamped by the session's filesystem, so no
// two hosts' clocks meet.
func (s *Session) NoRunnerHint(seq int64) string {
	l := s.observe()
	if l.alive {
		return ""
	}
	if l.definite {
		return l.reason
	}
	hbInfo, err1 := s.io.RegularInfo(protocol.FileHeartbeat)
	ref, err2 := s.io.RegularInfo(protocol.DirSeq + "/" + protocol.SeqName(seq))
	hb, err3 := s.io.ReadHeartbeat()
	if err1 != nil || err2 != nil || err3 != nil {
		return ""
	}
	window := liveWindow(time.Duration(hb.IntervalMS) * time.Millisecond)
	if age := ref.ModTime().Sub(hbInfo.ModTime()); age > window {
		return "its heartbeat is " + age.Round(time.Second).String() + " old by the session's filesystem clock"
	}
	return ""
}

// freshHeartbeat reports whether the runner looks alive from one look,
// without waiting: state.json names a session and is not stopped, on a
// local filesystem the runner's lock is held, and heartbeat.json was
// rewritten within the liveness window by the session's filesystem clock,
// compared with the mtime of seq reservation seq (just made). Both mtimes
// come from the filesystem, so no two hosts' clocks meet. false means "not
// shown", not "dead".
func (s *Session) freshHeartbeat(seq int64) (protocol.State, bool) {
	st, err := s.ReadState()
	if err != nil || st.SessionID == "" || st.Phase == protocol.PhaseStopped {
		return st, false
	}
	hb, err := s.io.ReadHeartbeat()
	if err != nil || hb.Phase == protocol.PhaseStopped || hb.SessionID != st.SessionID {
		return st, false
	}
	hbInfo, err1 := s.io.RegularInfo(protocol.FileHeartbeat)
	ref, err2 := s.io.RegularInfo(protocol.DirSeq + "/" + protocol.SeqName(seq))
	if err1 != nil || err2 != nil {
		return st, false
	}
	window := liveWindow(time.Duration(hb.IntervalMS) * time.Millisecond)
	if age := ref.ModTime().Sub(hbInfo.ModTime()); age > window {
		return st, false
	}
	if !s.io.OnNetworkFS() && !s.io.LockHeld() {
		return st, false
	}
	return st, true
}

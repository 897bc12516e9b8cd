package runner

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/gofrs/flock"
	"github.com/skillpilot/skillpilot/protocol"
)

// acquire takes the single-instance lock: an exclusive flock on
// state/runner.lock. Where the lock is held, the heartbeat decides: a
// runner whose heartbeat counter moves is alive and we refuse; one whose
// counter has not moved for two heartbeat periods plus a margin is dead
// (possibly on another host, where flock may be host-local or held by a
// crashed NFS client until the server's lease runs out) and we take over
// with a warning. Where flock succeeds but the heartbeat was written by
// another host and is still moving (a mount with host-local locks), we
// also refuse.
func (r *Runner) acquire() error {
	r.lock = flock.New(r.path(protocol.FileLock))
	locked, err := r.lock.TryLock()
	// A master probing liveness holds a shared lock for microseconds:
	// retry briefly before concluding that a runner holds it.
	for i := 0; i < 10 && !locked && err == nil; i++ {
		time.Sleep(20 * time.Millisecond)
		locked, err = r.lock.TryLock()
	}
	if err != nil {
		r.log.Warn("flock unavailable on this filesystem; relying on the heartbeat", "err", err)
	}
	hb, hbErr := readHeartbeat(r.path(protocol.FileHeartbeat))
	otherHost := hbErr == nil && hb.Hostname != r.hostname
	live := hbErr == nil && hb.Phase != protocol.PhaseStopped
	// On a local filesystem a held flock is proof enough. On a network
	// filesystem it may be private to this client (NFS mounted nolock), so a
	// heartbeat that says "live" must also be seen standing still.
	if locked && !(live && (otherHost || r.network)) {
		return nil
	}
	window := 2*time.Duration(max(hb.IntervalMS, 1000))*time.Millisecond + 500*time.Millisecond
	if hbErr != nil {
		window = 2*r.cfg.Heartbeat + 500*time.Millisecond
	}
	if moving := heartbeatMoves(r.path(protocol.FileHeartbeat), hb.Counter, window); moving {
		if locked {
			_ = r.lock.Unlock() // We must not keep a lock we will not use.
		}
		return fmt.Errorf("%w (runner pid %d on host %q; its heartbeat is moving)", ErrLocked, hb.RunnerPID, hb.Hostname)
	}
	if !locked && err == nil && !r.network {
		// The kernel says another process holds the lock; on a local
		// filesystem that process is alive even if its heartbeat stopped.
		if hb.Hostname == r.hostname || hbErr != nil {
			return fmt.Errorf("%w (the lock is held on this host; its heartbeat is not moving, so it may be hung)", ErrLocked)
		}
	}
	r.log.Warn("taking over a session whose runner is gone", "old_pid", hb.RunnerPID, "old_host", hb.Hostname, "locked", locked)
	r.pendingTakeover = map[string]any{"old_pid": hb.RunnerPID, "old_host": hb.Hostname, "flock": locked}
	return nil
}

func (r *Runner) release() {
	if r.lock != nil {
		_ = r.lock.Unlock() // The kernel releases it at exit anyway.
	}
}

func readHeartbeat(path string) (protocol.Heartbeat, error) {
	var hb protocol.Heartbeat
	b, err := os.ReadFile(path)
	if err != nil {
		return hb, err
	}
	return hb, json.Unmarshal(b, &hb)
}

// heartbeatMoves watches the heartbeat counter for window (on our clock).
func heartbeatMoves(path string, counter int64, window time.Duration) bool {
	end := time.Now().Add(window)
	for time.Now().Before(end) {
		time.Sleep(100 * time.Millisecond)
		hb, err := readHeartbeat(path)
		if err == nil && hb.Counter != counter {
			return hb.Phase != protocol.PhaseStopped
		}
	}
	return false
}

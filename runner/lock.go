package runner

import (
	"encoding/json"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/gofrs/flock"
	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/protocol"
)

// maxStateFile bounds what the runner reads of state/*.json files: they are
// small, and anything larger was planted.
const maxStateFile = 64 << 10

// acquire takes the single-instance lock: an exclusive flock on
// state/runner.lock. Where the lock is held, the heartbeat decides: a
// runner whose heartbeat counter moves is alive and we refuse; one whose
// counter has not moved for two heartbeat periods plus a margin is dead
// (possibly on another host, where flock may be host-local or held by a
// crashed NFS client until the server's lease runs out) and we take over
// with a warning. Where flock succeeds but the heartbeat was written by
// another host and is still moving (a mount with host-local locks), we
// also refuse.
//
// state/runner.lock planted as a symlink, a FIFO or a directory is refused
// (never followed, never blocked on). A heartbeat.json that is not a
// SkillPilot runner's (no protocol_version, counter or hostname: a file
// left by a seed-protocol runner) is no evidence of a live runner: it
// neither delays the start nor leads to a lock_takeover.
func (r *Runner) acquire() error {
	lockPath := r.path(protocol.FileLock)
	if fi, err := os.Lstat(lockPath); err == nil && !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: %s is %s, not a regular file: remove it", ErrUntrusted, protocol.FileLock, fileKind(fi))
	}
	r.lock = flock.New(lockPath, flock.SetFlag(os.O_CREATE|os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK),
		flock.SetPermissions(r.perms.file))
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
	if locked {
		_ = os.Chmod(lockPath, r.perms.file) // Masters of a shared session probe it.
	}
	hb, hbErr := readHeartbeat(r.path(protocol.FileHeartbeat))
	ours := hbErr == nil && isRunnerHeartbeat(hb)
	if hbErr == nil && !ours {
		r.log.Info("state/heartbeat.json is not a SkillPilot runner's heartbeat (seed format?); ignoring it")
	}
	otherHost := ours && hb.Hostname != r.hostname
	live := ours && hb.Phase != protocol.PhaseStopped
	// On a local filesystem a held flock is proof enough. On a network
	// filesystem it may be private to this client (NFS mounted nolock), so a
	// heartbeat that says "live" must also be seen standing still.
	if locked && !(live && (otherHost || r.network)) {
		return nil
	}
	window := 2*time.Duration(max(hb.IntervalMS, 1000))*time.Millisecond + 500*time.Millisecond
	if !ours {
		window = 2*r.cfg.Heartbeat + 500*time.Millisecond
	}
	if ours && heartbeatMoves(r.path(protocol.FileHeartbeat), hb.Counter, window) {
		if locked {
			_ = r.lock.Unlock() // We must not keep a lock we will not use.
		}
		return fmt.Errorf("%w (runner pid %d on host %q; its heartbeat is moving)", ErrLocked, hb.RunnerPID, hb.Hostname)
	}
	if !locked && err == nil && !r.network {
		// The kernel says another process holds the lock; on a local
		// filesystem that process is alive even if its heartbeat stopped.
		if !ours || hb.Hostname == r.hostname {
			return fmt.Errorf("%w (the lock is held on this host; its heartbeat is not moving, so it may be hung)", ErrLocked)
		}
	}
	if !ours && locked {
		return nil
	}
	r.log.Warn("taking over a session whose runner is gone", "old_pid", hb.RunnerPID, "old_host", hb.Hostname, "locked", locked)
	r.pendingTakeover = map[string]any{"old_pid": hb.RunnerPID, "old_host": hb.Hostname, "flock": locked}
	return nil
}

// isRunnerHeartbeat reports whether hb was written by a SkillPilot runner
// (as opposed to a seed-protocol runner, which wrote neither a counter nor
// a hostname).
func isRunnerHeartbeat(hb protocol.Heartbeat) bool {
	return hb.ProtocolVersion >= 1 && hb.Counter > 0 && hb.Hostname != ""
}

// keepLock runs on every heartbeat. If state/runner.lock was deleted or
// replaced under the runner (someone cleaning up "stale" lock files, or
// state/ deleted and recreated), the flock it holds is on a file nobody can
// reach: masters probing the lock would judge the runner dead (status exit
// 5, a stop refused) and a second runner could start. keepLock then locks
// the file now at that path (creating it; anything but a regular file there
// is removed, only the runner writes it) with a warning event. A lock it
// cannot take now (a master probing it for microseconds) is retried at the
// next heartbeat.
func (r *Runner) keepLock() {
	if r.lock == nil || !r.lock.Locked() {
		return // flock is unavailable here: the heartbeat alone tells liveness.
	}
	held, err := r.lock.Stat()
	if err != nil {
		return
	}
	lockPath := r.path(protocol.FileLock)
	cur, err := os.Lstat(lockPath)
	if err == nil && os.SameFile(held, cur) {
		return
	}
	if err == nil && !cur.Mode().IsRegular() {
		_ = os.Remove(lockPath)
	}
	nl := flock.New(lockPath, flock.SetFlag(os.O_CREATE|os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK),
		flock.SetPermissions(r.perms.file))
	if ok, err := nl.TryLock(); err != nil || !ok {
		r.log.Warn("state/runner.lock was deleted or replaced; cannot lock the new one yet", "err", err)
		return
	}
	_ = os.Chmod(lockPath, r.perms.file)
	old := r.lock
	r.lock = nl
	_ = old.Unlock()
	r.log.Warn("state/runner.lock was deleted or replaced; locked it again")
	r.event(protocol.Event{Event: protocol.EvWarning, Detail: map[string]any{"recreated": protocol.FileLock}})
}

func (r *Runner) release() {
	if r.lock != nil {
		_ = r.lock.Unlock() // The kernel releases it at exit anyway.
	}
}

// readHeartbeat reads state/heartbeat.json without following a symlink,
// blocking on a FIFO or reading more than maxStateFile.
func readHeartbeat(path string) (protocol.Heartbeat, error) {
	var hb protocol.Heartbeat
	b, _, err := fsq.ReadFile(path, maxStateFile)
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

package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"time"

	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/protocol"
	"golang.org/x/sys/unix"
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
	lockPath := protocol.FileLock
	if fi, err := r.root.Lstat(lockPath); err == nil && !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: %s is %s, not a regular file: remove it", ErrUntrusted, protocol.FileLock, fileKind(fi))
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		// A mount point (a bind mount over the lock or state/), state/
		// swapped for a symlink: a lock taken there would not be the
		// session's, and running without one would let a second runner in.
		return fmt.Errorf("%w: %s cannot be used as the session's lock (%v): remove what is there", ErrUntrusted, protocol.FileLock, err)
	} else if st, ok := statOf(fi); err == nil && ok && st.Nlink > 1 {
		return fmt.Errorf("%w: %s has %d links (a hard link to another file was planted there; the runner would lock and chmod it): remove it",
			ErrUntrusted, protocol.FileLock, st.Nlink)
	}
	r.lock = &fileLock{root: r.root, name: lockPath, perm: r.layout.perms.file}
	locked, err := r.lock.TryLock()
	// A master probing liveness holds a shared lock for microseconds:
	// retry briefly before concluding that a runner holds it.
	for i := 0; i < 10 && !locked && err == nil; i++ {
		r.clk.Sleep(20 * time.Millisecond)
		locked, err = r.lock.TryLock()
	}
	if err != nil {
		r.log.Warn("flock unavailable on this filesystem; relying on the heartbeat", "err", err)
	}
	if locked {
		_ = r.root.Chmod(lockPath, r.layout.perms.file) // Masters of a shared session probe it.
		if fi, err := r.lock.Stat(); err == nil {
			r.hold.holdLock(fi) // From now on a lock file deleted or replaced stops the runner (lost.go).
		}
	}
	hb, hbErr := readHeartbeat(r.root, protocol.FileHeartbeat)
	ours := hbErr == nil && isRunnerHeartbeat(hb)
	if hbErr == nil && !ours {
		r.log.Info("state/heartbeat.json is not a SkillPilot runner's heartbeat (seed format?); ignoring it")
	}
	otherHost := ours && hb.Hostname != r.id.hostname
	live := ours && hb.Phase != protocol.PhaseStopped
	// On a local filesystem a held flock is proof enough. On a network
	// filesystem it may be private to this client (NFS mounted nolock), so a
	// heartbeat that says "live" must also be seen standing still.
	if locked && !(live && (otherHost || r.id.network)) {
		return nil
	}
	window := 2*time.Duration(max(hb.IntervalMS, 1000))*time.Millisecond + 500*time.Millisecond
	if !ours {
		window = 2*r.cfg.Heartbeat + 500*time.Millisecond
	}
	if ours && heartbeatMoves(r.root, r.clk, protocol.FileHeartbeat, hb.Counter, window) {
		if locked {
			_ = r.lock.Unlock() // We must not keep a lock we will not use.
		}
		return fmt.Errorf("%w (runner pid %d on host %q; its heartbeat is moving)", ErrLocked, hb.RunnerPID, hb.Hostname)
	}
	if !locked && err == nil && !r.id.network {
		// The kernel says another process holds the lock; on a local
		// filesystem that process is alive even if its heartbeat stopped.
		if !ours || hb.Hostname == r.id.hostname {
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

// statOf returns the system's stat of fi, if it has one.
func statOf(fi os.FileInfo) (*syscall.Stat_t, bool) {
	if fi == nil {
		return nil, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return st, ok
}

func (r *Runner) release() {
	if r.lock != nil {
		_ = r.lock.Unlock() // The kernel releases it at exit anyway.
	}
}

// readHeartbeat reads state/heartbeat.json without following a symlink,
// blocking on a FIFO or reading more than maxStateFile.
func readHeartbeat(root *fsq.Root, name string) (protocol.Heartbeat, error) {
	var hb protocol.Heartbeat
	b, _, err := root.ReadFile(name, maxStateFile)
	if err != nil {
		return hb, err
	}
	return hb, json.Unmarshal(b, &hb)
}

// heartbeatMoves watches the heartbeat counter for window (on our clock).
func heartbeatMoves(root *fsq.Root, clk clock, name string, counter int64, window time.Duration) bool {
	end := clk.Now().Add(window)
	for clk.Now().Before(end) {
		clk.Sleep(100 * time.Millisecond)
		hb, err := readHeartbeat(root, name)
		if err == nil && hb.Counter != counter {
			return hb.Phase != protocol.PhaseStopped
		}
	}
	return false
}

// fileLock is an exclusive flock(2) on a file of the session, opened
// through the session root (so never through a symlink): what gofrs/flock
// did by path. Not safe for concurrent use; the owner goroutine holds it.
type fileLock struct {
	root   *fsq.Root
	name   string
	perm   os.FileMode
	f      *os.File
	locked bool
}

// TryLock takes the lock without waiting: false, nil when another holds
// it. Where flock is emulated by fcntl (NFSv4) a read-only descriptor
// fails with EBADF or EIO; it is then retried once read-write, as
// util-linux flock(1) and gofrs/flock do.
func (l *fileLock) TryLock() (bool, error) {
	if l.locked {
		return true, nil
	}
	flag := os.O_CREATE | os.O_RDONLY
	for retried := false; ; retried = true {
		if l.f == nil {
			f, err := l.root.OpenFile(l.name, flag|syscall.O_NONBLOCK, l.perm)
			if err != nil {
				return false, err
			}
			l.f = f
		}
		err := unix.Flock(int(l.f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		switch {
		case err == nil:
			l.locked = true
			return true, nil
		case errors.Is(err, unix.EWOULDBLOCK):
			l.close()
			return false, nil
		case !retried && (errors.Is(err, unix.EIO) || errors.Is(err, unix.EBADF)):
			l.close()
			flag = os.O_CREATE | os.O_RDWR
			continue
		}
		l.close()
		return false, &os.PathError{Op: "flock", Path: l.root.Abs(l.name), Err: err}
	}
}

func (l *fileLock) close() {
	if l.f != nil {
		_ = l.f.Close()
		l.f = nil
	}
}

// Locked reports whether the lock is held.
func (l *fileLock) Locked() bool { return l.locked }

// Stat describes the locked file (the inode held, wherever it now is).
func (l *fileLock) Stat() (os.FileInfo, error) {
	if l.f == nil {
		return nil, os.ErrClosed
	}
	return l.f.Stat()
}

// Unlock releases the lock and closes the file.
func (l *fileLock) Unlock() error {
	if l.f == nil {
		return nil
	}
	var err error
	if l.locked {
		err = unix.Flock(int(l.f.Fd()), unix.LOCK_UN)
	}
	l.locked = false
	l.close()
	return err
}

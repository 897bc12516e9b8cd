package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/protocol"
	"golang.org/x/sys/unix"
)

// ErrSessionLost is returned by Run (wrapped, with the reason) when the
// runner stopped because its session was taken away: the session's path
// no longer names the directory it opened (removed, renamed, replaced by a
// new one, perhaps served by a new runner), or another process holds the
// lock file now at state/runner.lock. cmd/runner exits 5.
var ErrSessionLost = errors.New("runner: the session was taken away")

// sessionLostError is ErrSessionLost with the reason as its message.
type sessionLostError string

func (e sessionLostError) Error() string        { return "runner: " + string(e) }
func (e sessionLostError) Is(target error) bool { return target == ErrSessionLost }

// sessionHold is what tells whether the session is still this runner's.
// A directory that is gone or is another one, and a lock file deleted or
// replaced (lockGone), are certain at once; a path that cannot be looked
// at (an NFS hiccup) must stay so for two heartbeats in a row.
type sessionHold struct {
	// lockID is the identity of the file the runner locked at
	// state/runner.lock (nil: none, flock unavailable or a take-over
	// without it). Set once after the lock is taken; read by the owner
	// and the result writer.
	lockID atomic.Pointer[fileID]
	unsure int // heartbeats in a row the session's path could not be looked at (owner only)
}

// fileID is a file's identity: device and inode.
type fileID struct{ dev, ino uint64 }

// holdLock records the identity of the lock file the runner holds.
func (h *sessionHold) holdLock(fi os.FileInfo) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		h.lockID.Store(&fileID{dev: st.Dev, ino: st.Ino})
	}
}

// lockGone says why the session is no longer this runner's when the file
// at state/runner.lock is not the one it locked: deleted (or state/ with
// it: an rm -rf under way) or replaced by another file (a master's probe
// created one, a new runner took it). "" when it is the same file, when
// the runner holds no lock, or when the look failed otherwise (an NFS
// hiccup decides nothing).
func (h *sessionHold) lockGone(root *fsq.Root) string {
	if h == nil { // A writer built by a test, without a Runner.
		return ""
	}
	held := h.lockID.Load()
	if held == nil {
		return ""
	}
	fi, err := root.Lstat(protocol.FileLock)
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		return protocol.FileLock + " was deleted (the session is being removed)"
	case err != nil:
		return ""
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && (st.Dev != held.dev || st.Ino != held.ino) {
		return protocol.FileLock + " was replaced by another file (the session was taken away)"
	}
	return ""
}

// mayRecreate reports (nil) whether the session directory d, found
// missing, may be made again: only when the session is still this
// runner's (lockGone) and d is the only directory of the layout missing.
// A runner re-creates one lost directory at most, never the whole layout
// at once: several gone together is a session being removed, not an
// accident to repair (PROTOCOL.md section 20).
func (h *sessionHold) mayRecreate(root *fsq.Root, d string) error {
	if why := h.lockGone(root); why != "" {
		return errors.New("runner: not recreating " + d + "/: " + why)
	}
	var missing []string
	gone := map[string]bool{}
	for _, x := range protocol.Dirs { // Parents come before their children.
		if _, err := root.Lstat(x); errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			gone[x] = true
			if !gone[path.Dir(x)] { // log/rejected/ goes with log/: one directory lost.
				missing = append(missing, x+"/")
			}
		}
	}
	if len(missing) > 1 {
		return fmt.Errorf("runner: %d session directories are missing (%s): not recreating them; the session looks removed (make them again, or restart the runner)",
			len(missing), strings.Join(missing, ", "))
	}
	return nil
}

// lostHeartbeats is how many heartbeats in a row an uncertain sign must
// last before the runner stops (PROTOCOL.md section 12: within two
// heartbeats).
const lostHeartbeats = 2

// checkSessionLost runs first on every heartbeat. A runner whose session
// was taken away must not live on with its tool, and must never read or
// answer what a new runner's masters write at the same path: its session
// root keeps it in the directory it opened (fsq.Root), and this stops
// it. It stops by force (the current command, if any, is ended; its result
// goes into the directory the runner holds, where its masters' files are),
// with state.json's error code session_lost, and Run returns ErrSessionLost.
// It reports whether the runner is stopping for that reason.
func (r *Runner) checkSessionLost() bool {
	if _, lost := r.stop.lost(); lost {
		return true
	}
	l := r.hold
	why := ""
	if err := r.root.Moved(); err != nil {
		// Gone (ENOENT, ENOTDIR) or another directory is certain; any
		// other error of the look (ESTALE, EIO on NFS) may pass.
		certain := true
		var errno unix.Errno
		if errors.As(err, &errno) {
			certain = errno == unix.ENOENT || errno == unix.ENOTDIR
		}
		if l.unsure++; certain || l.unsure >= lostHeartbeats {
			why = err.Error()
		}
	} else {
		l.unsure = 0
	}
	if why == "" {
		why = r.hold.lockGone(r.root)
	}
	if why == "" {
		return false
	}
	why = "the session was taken away: " + why
	r.log.Error("stopping: the session is no longer this runner's", "why", why)
	r.stop.err = &protocol.Error{Code: protocol.CodeSessionLost, Message: why}
	r.event(protocol.Event{Event: protocol.EvWarning, Detail: map[string]any{"session_lost": why}})
	r.requestStop(protocol.StopForce, why)
	return true
}

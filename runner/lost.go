package runner

import (
	"errors"

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

// lossWatch counts the heartbeats on which the session did not look like
// this runner's any more. A directory that is gone or is another one, and a
// lock file deleted or replaced (sessionRoot.lockGone), are certain at
// once; a path that cannot be looked at (an NFS hiccup) must stay so for
// two heartbeats in a row.
type lossWatch struct {
	unsure int // heartbeats in a row the session's path could not be looked at
}

// lostHeartbeats is how many heartbeats in a row an uncertain sign must
// last before the runner stops (PROTOCOL.md section 12: within two
// heartbeats).
const lostHeartbeats = 2

// checkSessionLost runs first on every heartbeat. A runner whose session
// was taken away must not live on with its tool, and must never read or
// answer what a new runner's masters write at the same path: its session
// root keeps it in the directory it opened (sessionroot.go), and this stops
// it. It stops by force (the current command, if any, is ended; its result
// goes into the directory the runner holds, where its masters' files are),
// with state.json's error code session_lost, and Run returns ErrSessionLost.
// It reports whether the runner is stopping for that reason.
func (r *Runner) checkSessionLost() bool {
	if _, lost := r.stop.lost(); lost {
		return true
	}
	l := &r.root.loss
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
		why = r.root.lockGone()
	}
	if why == "" {
		return false
	}
	why = "the session was taken away: " + why
	r.log.Error("stopping: the session is no longer this runner's", "why", why)
	r.stop.failWith(&protocol.Error{Code: protocol.CodeSessionLost, Message: why})
	r.event(protocol.Event{Event: protocol.EvWarning, Detail: map[string]any{"session_lost": why}})
	r.requestStop(protocol.StopForce, why)
	return true
}

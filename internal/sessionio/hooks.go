package sessionio

import (
	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/protocol"
)

// Session is what the packages beside master reach in a *master.Session
// beyond its exported API. Of gives it.
type Session interface {
	// Root is the session's directory held open: packages that keep
	// files of their own in a session (launch: state/launch.*; pool:
	// moved/, forward/, and the queue/ a move stages into) reach the
	// session only through it, under master/sessionfs.go's rules. It is
	// opened anew when the session's path names another directory (never
	// for a session opened by OpenIn).
	Root() (*fsq.Root, error)
	// Owner names this master in the files it writes
	// ("master@host:pid"): a command's submitter, a lease's owner.
	Owner() string
	// OnNetworkFS reports whether the session is on a network
	// filesystem, where a free flock proves nothing.
	OnNetworkFS() bool
	// LockHeld probes the runner's flock with a shared lock. Where flock
	// does not work (some NFS mounts) it reports true and the heartbeat
	// decides.
	LockHeld() bool
	// ReadHeartbeat reads state/heartbeat.json as bounded input (never
	// followed, never blocked on).
	ReadHeartbeat() (protocol.Heartbeat, error)
	// AllocSeq reserves the next seq (AllocSeq) through the root.
	AllocSeq() (int64, error)
	// ReadForward reads the forward record of the command file name
	// (forward/<name>) through the root.
	ReadForward(name string) (*Forward, error)
	// NoRunnerHint says why no runner seems to serve the session, from
	// one look without waiting, or "" when one may: the warning of a
	// plain submit of the command with seq, which is queued either way.
	NoRunnerHint(seq int64) string
	// WatchDegraded starts the session's shared watcher if needed and
	// says why waits poll although the filesystem is local (the user's
	// inotify instances are exhausted, say), or "".
	WatchDegraded() string
}

// Command is what the packages beside master reach in a *master.Command
// beyond its exported API. CommandOf gives it.
type Command interface {
	// ReadResult returns the command's result and its bytes as the runner
	// wrote them (nil, nil, nil while there is none), following a pool's
	// forward records.
	ReadResult() (*protocol.Result, []byte, error)
}

// Set by package master at init (it cannot be named here without an
// import cycle); any other argument than the one named panics.
var (
	// Of returns the Session view of s, a *master.Session.
	Of func(s any) Session
	// CommandOf returns the Command view of c, a *master.Command.
	CommandOf func(c any) Command
	// OpenIn returns a *master.Session on the session name inside the
	// directory parent holds (a pool's member), opened relative to
	// parent: a name that is a symlink is refused (fsq.ErrLayout), never
	// followed, and once the path names another directory every
	// operation fails with ErrSessionMissing.
	OpenIn func(parent *fsq.Root, name string) (any, error)
)

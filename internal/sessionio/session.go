package sessionio

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/protocol"
	"golang.org/x/sys/unix"
)

// Session is a session directory as the Go master's packages reach it:
// master wraps it (master.Session), and launch, pool and the master CLI
// use it through master.Session.Core. It is the Go master's only way to
// the files of a session, as the runner's fsq.Root is the runner's: every open, create, rename, list,
// stat and remove goes through an fsq.Root, relative to the session
// directory held open, never resolving a symlink in any component and
// never leaving the session. A symlink planted where a file should be is
// an error wrapping fsq.ErrSymlink, a FIFO is fsq.ErrNotRegular and never
// blocks, and a session subdirectory swapped for a symlink is an error
// wrapping fsq.ErrLayout: nothing is read or written through it (all
// io_error). Names are slash-separated and relative to the session
// ("result/cmd_….json").
//
// The root is opened by Open and kept for the Session's life. Before each
// operation the session's path is checked (a stat) to still name the
// directory the root holds; when the directory was replaced (removed and
// made again, renamed over), the path is opened anew, so a long-lived
// Session follows its path as a path-based master did. A root replaced
// or dropped with its Session is closed when collected (fsq.OpenRoot), so
// a wait still running on it never sees its descriptor reused.
//
// Outside this type package master touches session paths only to hand
// them to the watcher (watch.go: fsnotify watches on result/, ctl/ack/,
// state/ and log/, which read and write nothing; every
// listing or read a change triggers goes through the root) and to report
// them in messages and Status.Dir. Before the root exists Open
// revalidates the session directory and its parent by path (an open and
// a close, for NFS).
type Session struct {
	dir   string // absolute
	owner string // "master@host:pid": a command's submitter, a lease's owner
	// network is true when the session is on a network filesystem: there
	// a free flock proves nothing.
	network bool
	pinned  bool       // root was opened relative to a pool's root (OpenIn): never reopened by path
	rootMu  sync.Mutex // guards root
	root    *fsq.Root  // the session directory, held open
}

// Open returns the session in the directory abs (an absolute path). It
// fails with ErrSessionMissing if abs has no queue/ directory.
func Open(abs string) (*Session, error) {
	root, hasQueue, err := openRoot(abs)
	if err != nil || !hasQueue {
		return nil, WithContext(fmt.Errorf("%w: %s", ErrSessionMissing, abs), map[string]any{"dir": abs})
	}
	return newSession(abs, root, false), nil
}

// OpenIn returns the session name inside the directory parent holds (a
// pool's member), opened relative to parent's handle: a name that is a
// symlink is refused (fsq.ErrLayout), never followed. Unlike Open's, the
// session never opens its path again: once the path names another
// directory (the member was swapped for a symlink, renamed or removed)
// every operation fails with ErrSessionMissing.
func OpenIn(parent *fsq.Root, name string) (*Session, error) {
	abs := parent.Abs(name)
	parent.Revalidate(name)
	root, err := parent.OpenRoot(name)
	if err != nil {
		return nil, WithContext(fmt.Errorf("%w: %s: %w", ErrSessionMissing, abs, err), map[string]any{"dir": abs})
	}
	if !isDir(root, protocol.DirQueue) {
		root.Close()
		return nil, WithContext(fmt.Errorf("%w: %s", ErrSessionMissing, abs), map[string]any{"dir": abs})
	}
	return newSession(abs, root, true), nil
}

func newSession(abs string, root *fsq.Root, pinned bool) *Session {
	host, _ := os.Hostname()
	s := &Session{dir: abs, root: root, pinned: pinned, owner: fmt.Sprintf("master@%s:%d", host, os.Getpid())}
	s.network = sessionNetwork(root)
	if !isDir(root, protocol.DirSeq) {
		_ = MkdirMaster(root, protocol.DirSeq) // A session made by an older runner.
	}
	return s
}

// Dir returns the session directory (absolute).
func (s *Session) Dir() string { return s.dir }

// Owner names this master in the files it writes ("master@host:pid"): a
// command's submitter, a lease's owner.
func (s *Session) Owner() string { return s.owner }

// OnNetworkFS reports whether the session is on a network filesystem,
// where a free flock proves nothing.
func (s *Session) OnNetworkFS() bool { return s.network }

// AssumeNetworkFS makes the session judge liveness as on a network
// filesystem (by the heartbeat alone, a free flock proving nothing):
// for tests of that judgement on a local disk.
func (s *Session) AssumeNetworkFS() { s.network = true }

// Path is the absolute path of the session's file rel, for messages and
// the watcher; files are reached through the root.
func (s *Session) Path(rel string) string { return filepath.Join(s.dir, rel) }

// Root returns the session's root, opened anew when its path names another
// directory than the one held.
func (s *Session) Root() (*fsq.Root, error) {
	s.rootMu.Lock()
	defer s.rootMu.Unlock()
	moved := errors.New("no root") // Only the first Open has none.
	if s.root != nil {
		if moved = s.root.Moved(); moved == nil {
			return s.root, nil
		}
	}
	if s.pinned { // A pool's member (OpenIn): its path is not followed again.
		return nil, fmt.Errorf("%w: %w", ErrSessionMissing, moved)
	}
	r, err := fsq.OpenRoot(s.dir)
	if err != nil {
		// Gone: what a path-based master saw as a missing seq/ (AllocSeq)
		// or a missing file (errors.Is(err, os.ErrNotExist) still holds).
		return nil, fmt.Errorf("%w: %w", ErrSessionMissing, err)
	}
	s.root = r // The previous one is closed once no wait uses it.
	return r, nil
}

// openRoot opens the root of the session at abs for Open, revalidating
// the directory and its parent by path first (the runner may have made it
// on another NFS client). It reports whether queue/ is there.
func openRoot(abs string) (r *fsq.Root, hasQueue bool, err error) {
	if parent, err := fsq.OpenRoot(filepath.Dir(abs)); err == nil { // Opening it revalidates it.
		parent.Revalidate(filepath.Base(abs))
		parent.Close()
	}
	r, err = fsq.OpenRoot(abs)
	if err != nil {
		return nil, false, err
	}
	return r, isDir(r, protocol.DirQueue), nil
}

// HasQueue reports whether the session has its queue/ directory.
func (s *Session) HasQueue() bool {
	r, err := s.Root()
	return err == nil && isDir(r, protocol.DirQueue)
}

// isDir reports whether name is a directory of the session. A symlink
// there counts as it did for a path-based master when it leads to a
// directory, so that Open succeeds and the operation that would go through
// it fails (fsq.ErrLayout); the link is only looked at, never used.
func isDir(r *fsq.Root, name string) bool {
	fi, err := r.Lstat(name)
	if err == nil && fi.Mode()&os.ModeSymlink != 0 {
		fi, err = os.Stat(r.Abs(name))
	}
	return err == nil && fi.IsDir()
}

// sessionNetwork reports whether the session is on a network filesystem.
func sessionNetwork(r *fsq.Root) bool {
	var st unix.Statfs_t
	if r.Statfs(".", &st) != nil {
		return false
	}
	_, network := fsq.FSTypeOf(&st)
	return network
}

// ReadFile reads name: a regular file only, at most limit bytes, never
// blocking on a FIFO (fsq.Root.ReadFile's rules), its directory revalidated
// first when reval (the runner may write it from another NFS client).
func (s *Session) ReadFile(name string, limit int64, reval bool) ([]byte, os.FileInfo, error) {
	r, err := s.Root()
	if err != nil {
		return nil, nil, err
	}
	if reval {
		r.Revalidate(path.Dir(name))
	}
	b, fi, err := r.ReadFile(name, limit)
	return b, fi, s.Stale(err)
}

// Stale turns ESTALE into ErrSessionMissing: on NFS, the directory this
// Session holds open was deleted on the server (rm -rf on another host);
// a local filesystem says ENOENT for the same, and a new root (Root) says
// the session is missing.
func (s *Session) Stale(err error) error {
	if errors.Is(err, syscall.ESTALE) {
		return WithContext(fmt.Errorf("%w: %s is gone (its directory was deleted: %w)", ErrSessionMissing, s.dir, err),
			map[string]any{"dir": s.dir})
	}
	return err
}

// OpenRegular opens name for reading (a regular file only, never blocking
// on a FIFO), its directory revalidated first.
func (s *Session) OpenRegular(name string, reval bool) (*os.File, error) {
	r, err := s.Root()
	if err != nil {
		return nil, err
	}
	if reval {
		r.Revalidate(path.Dir(name))
	}
	f, err := r.OpenRegular(name)
	return f, s.Stale(err)
}

// Lstat describes name without following a symlink.
func (s *Session) Lstat(name string) (os.FileInfo, error) {
	r, err := s.Root()
	if err != nil {
		return nil, err
	}
	return r.Lstat(name)
}

// RegularInfo describes name when it is a regular file (a symlink or a
// FIFO there is not the file: an error wrapping fsq.ErrNotRegular).
func (s *Session) RegularInfo(name string) (os.FileInfo, error) {
	fi, err := s.Lstat(name)
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s: %w (%s)", s.Path(name), fsq.ErrNotRegular, fsq.FileType(fi))
	}
	return fi, err
}

// Exists reports whether there is an entry at name.
func (s *Session) Exists(name string) bool {
	_, err := s.Lstat(name)
	return err == nil
}

// ReadNames lists the directory name.
func (s *Session) ReadNames(name string) ([]string, error) {
	r, err := s.Root()
	if err != nil {
		return nil, err
	}
	return r.ReadNames(name)
}

// Remove removes name (a symlink itself, never what it points to).
func (s *Session) Remove(name string) error {
	r, err := s.Root()
	if err != nil {
		return err
	}
	return r.Remove(name)
}

// Revalidate makes an NFS client revalidate the directory name.
func (s *Session) Revalidate(name string) {
	if r, err := s.Root(); err == nil {
		r.Revalidate(name)
	}
}

// WriteFile writes name atomically (a dot-file beside it, renamed onto
// it, not fsynced), creating its directory if a session made by an older
// runner lacks it.
func (s *Session) WriteFile(name string, b []byte) error {
	r, err := s.Root()
	if err != nil {
		return err
	}
	err = r.WriteAtomic(name, b, 0o660, fsq.Volatile)
	if errors.Is(err, os.ErrNotExist) {
		if err = MkdirMaster(r, path.Dir(name)); err == nil {
			err = r.WriteAtomic(name, b, 0o660, fsq.Volatile)
		}
	}
	return err
}

// WriteNew writes name atomically; a missing directory is an error.
func (s *Session) WriteNew(name string, b []byte) error {
	r, err := s.Root()
	if err != nil {
		return err
	}
	return r.WriteAtomic(name, b, 0o660, fsq.Volatile)
}

// ProbeLock probes the runner's flock (state/runner.lock) with a shared
// lock, as gofrs/flock did: the file is created if missing (mode 0600),
// opened read-only, and reopened read-write when flock says EIO or EBADF
// (NFSv4, where flock is emulated by fcntl). It never blocks: not on the
// lock, not on a FIFO planted there (O_NONBLOCK, regular files only).
// held reports false when the lock was free; err is the open's or the
// flock's error.
func (s *Session) ProbeLock() (held bool, err error) {
	r, err := s.Root()
	if err != nil {
		return false, err
	}
	try := func(flag int) (bool, bool, error) {
		f, err := r.OpenFile(protocol.FileLock, flag|os.O_CREATE|unix.O_NONBLOCK, 0o600)
		if err != nil {
			return false, false, err
		}
		defer f.Close()
		if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
			if err == nil {
				err = fmt.Errorf("%s: %w (%s)", s.Path(protocol.FileLock), fsq.ErrNotRegular, fsq.FileType(fi))
			}
			return false, false, err
		}
		err = unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB)
		switch {
		case errors.Is(err, unix.EWOULDBLOCK):
			return true, false, nil
		case err == nil:
			_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
			return false, false, nil
		}
		retry := errors.Is(err, unix.EIO) || errors.Is(err, unix.EBADF)
		return false, retry, err
	}
	held, retry, err := try(os.O_RDONLY)
	if retry {
		held, _, err = try(os.O_RDWR)
	}
	return held, err
}

// LockHeld probes the runner's flock with a shared lock. Where flock does
// not work (some NFS mounts) it reports true and the heartbeat decides.
func (s *Session) LockHeld() bool {
	held, err := s.ProbeLock()
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	return held
}

// MaxStateFile bounds what a master reads of state.json and
// heartbeat.json.
const MaxStateFile = 1 << 20

// ReadHeartbeat reads state/heartbeat.json as bounded input (never
// followed, never blocked on).
func (s *Session) ReadHeartbeat() (protocol.Heartbeat, error) {
	var hb protocol.Heartbeat
	b, _, err := s.ReadFile(protocol.FileHeartbeat, MaxStateFile, true)
	if err != nil {
		return hb, err
	}
	return hb, json.Unmarshal(b, &hb)
}

// ReadState reads state/state.json as bounded input.
func (s *Session) ReadState() (protocol.State, error) {
	var st protocol.State
	err := s.decodeState(&st)
	return st, err
}

// ReadKind reads state.json as ReadState does but decodes its kind
// alone: a submit needs nothing else of it, and decoding every field of
// a State costs the CLI's submit about a third of a millisecond of its
// start (issue 44).
func (s *Session) ReadKind() (protocol.Kind, error) {
	var st struct {
		Kind protocol.Kind `json:"kind"`
	}
	err := s.decodeState(&st)
	return st.Kind, err
}

// decodeState reads state.json (bounded, never followed, never blocked
// on) and decodes it into v.
func (s *Session) decodeState(v any) error {
	b, _, err := s.ReadFile(protocol.FileState, MaxStateFile, true)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// AllocSeq reserves the next seq of the session (AllocSeq).
func (s *Session) AllocSeq() (int64, error) {
	r, err := s.Root()
	if err != nil {
		return 0, err
	}
	return AllocSeq(r)
}

// ReadForward reads and checks the session's forward record for the
// command file name (forward/<name>, written by a pool's mover).
func (s *Session) ReadForward(name string) (*Forward, error) {
	b, _, err := s.ReadFile(DirForward+"/"+name, MaxForward, true)
	if err != nil {
		return nil, err
	}
	return ParseForward(s.Path(DirForward+"/"+name), b)
}

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
)

// sessionRoot is the only way the runner reaches the files of its session:
// fsq.Root (every open, create, rename, list, remove, mkdir and stat
// relative to the session directory held open, never resolving a symlink
// in any component, never leaving the session; see its doc) plus what is
// the runner's own, the watch on whether the session is still its own.
//
// Outside this type the runner touches session paths only to create the
// session directory itself (createSession, before there is a root) and to
// watch queue/ and ctl/ for changes (fsq.Watch: an inotify watch added by
// path, which reads and writes nothing; every listing it triggers goes
// through the root). The payload file's path is handed to the tool, which
// sources it.
type sessionRoot struct {
	*fsq.Root
	dir string // absolute session directory, for messages and the trust checks

	loss lossWatch // lost.go: is the session still this runner's?

	// lockID is the identity of the file the runner locked at
	// state/runner.lock (nil: none, flock unavailable or a take-over
	// without it). Set once after the lock is taken; read by the owner
	// and the result writer.
	lockID atomic.Pointer[fileID]
}

// fileID is a file's identity: device and inode.
type fileID struct{ dev, ino uint64 }

// holdLock records the identity of the lock file the runner holds.
func (s *sessionRoot) holdLock(fi os.FileInfo) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.lockID.Store(&fileID{dev: st.Dev, ino: st.Ino})
	}
}

// lockGone says why the session is no longer this runner's when the file
// at state/runner.lock is not the one it locked: deleted (or state/ with
// it: an rm -rf under way) or replaced by another file (a master's probe
// created one, a new runner took it). "" when it is the same file, when
// the runner holds no lock, or when the look failed otherwise (an NFS
// hiccup decides nothing).
func (s *sessionRoot) lockGone() string {
	held := s.lockID.Load()
	if held == nil {
		return ""
	}
	fi, err := s.Lstat(protocol.FileLock)
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
func (s *sessionRoot) mayRecreate(d string) error {
	if why := s.lockGone(); why != "" {
		return errors.New("runner: not recreating " + d + "/: " + why)
	}
	var missing []string
	gone := map[string]bool{}
	for _, x := range protocol.Dirs { // Parents come before their children.
		if _, err := s.Lstat(x); errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
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

// errBadName and errLayout are fsq's (see fsq.ErrBadName, fsq.ErrLayout).
var (
	errBadName = fsq.ErrBadName
	errLayout  = fsq.ErrLayout
)

// openRoot opens the session directory dir (fsq.OpenRoot).
func openRoot(dir string) (*sessionRoot, error) {
	r, err := fsq.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	return &sessionRoot{Root: r, dir: dir}, nil
}

// Close closes the root's directory; a nil root is a no-op.
func (s *sessionRoot) Close() error {
	if s == nil {
		return nil
	}
	return s.Root.Close()
}

// relOf turns an absolute path under the session back into a name
// (fsq.Root.RelOf).
func (s *sessionRoot) relOf(p string) string { return s.RelOf(p) }

// openDirFile opens the directory name as a file (fsq.Root.OpenDir).
func (s *sessionRoot) openDirFile(name string) (*os.File, error) { return s.OpenDir(name) }

// ownDir checks, just before a result is put into it, that the runner-only
// directory d is still the runner's: owned by its user and writable by
// nobody else. The heartbeat's layout check would see another user's
// directory swapped in only at the next beat; meanwhile a runner running as
// root (whose writes no mode stops) would put results into it. What stands
// between this look and the rename is a window of one system call, not of
// a heartbeat. A missing d is for the caller to handle (ENOENT).
func (s *sessionRoot) ownDir(d string) error {
	fi, err := s.Lstat(d)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("%w: %s/ is %s, not a directory: remove it (the runner recreates it)", ErrUntrusted, d, fileKind(fi))
	case ok && int(st.Uid) != runnerEUID():
		return fmt.Errorf("%w: %s is owned by uid %d, not by the runner's uid %d: nothing is written into it; remove it (the runner recreates it) or chown it",
			ErrUntrusted, s.Abs(d), st.Uid, runnerEUID())
	case fi.Mode()&0o022 != 0:
		return fmt.Errorf("%w: %s is writable by others than the runner (mode %v): nothing is written into it; chmod go-w %s",
			ErrUntrusted, s.Abs(d), fi.Mode().Perm(), s.Abs(d))
	}
	return nil
}

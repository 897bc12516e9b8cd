package runner

import (
	"os"

	"github.com/skillpilot/skillpilot/fsq"
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

// abs returns the absolute path of name (fsq.Root.Abs).
func (s *sessionRoot) abs(name string) string { return s.Abs(name) }

// relOf turns an absolute path under the session back into a name
// (fsq.Root.RelOf).
func (s *sessionRoot) relOf(p string) string { return s.RelOf(p) }

// sameFile is os.SameFile for infos that may come from the root.
func sameFile(a, b os.FileInfo) bool { return fsq.SameFile(a, b) }

// openDirFile opens the directory name as a file (fsq.Root.OpenDir).
func (s *sessionRoot) openDirFile(name string) (*os.File, error) { return s.OpenDir(name) }

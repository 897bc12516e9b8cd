package review

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/skillpilot/skillpilot/fsq"
)

// Bounds on what is read from a session. They are far above what a runner
// writes; anything larger is reported in Warnings and skipped.
const (
	maxResultSize  = 4 << 20  // a result holds at most 64 KiB of value, escaped
	maxCommandSize = 16 << 20 // the runner refuses command files above 16 MiB
	maxStateSize   = 1 << 20
	maxEventLine   = 1 << 20 // an event line (init_end carries 4 KiB of output)
	maxMetaBytes   = 2 << 30 // meta.log is read up to here
	maxWarnings    = 100     // further warnings are counted, not kept
)

// ErrNotSession is returned by Load for a directory that holds neither
// result/ nor log/meta.log nor state/: not a session directory.
var ErrNotSession = errors.New("history: not a session directory")

// readFile reads a regular file of the session without following a symlink
// and without blocking on a FIFO, at most limit bytes (fsq.Root.ReadFile
// in the directory path names it in).
func readFile(path string, limit int64) ([]byte, os.FileInfo, error) {
	r, err := fsq.OpenRoot(filepath.Dir(path))
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	return r.ReadFile(filepath.Base(path), limit)
}

// openRegular opens a regular file of the session for reading as readFile
// reads it.
func openRegular(path string) (*os.File, error) {
	r, err := fsq.OpenRoot(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.OpenRegular(filepath.Base(path))
}

// listDir returns the names in dir, sorted, skipping temporary files
// (names starting with "."). A missing directory is an empty one; a
// directory that is a symlink is refused (it could lead anywhere).
func listDir(dir string) ([]string, error) {
	fi, err := os.Lstat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		return nil, fmt.Errorf("%s: %w", dir, fsq.ErrSymlink)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s: not a directory", dir)
	}
	r, err := fsq.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	names, err := r.ReadNames(".")
	if err != nil {
		return nil, err
	}
	kept := names[:0]
	for _, n := range names {
		if !strings.HasPrefix(n, ".") {
			kept = append(kept, n)
		}
	}
	sort.Strings(kept)
	return kept, nil
}

// isDir reports whether p is a directory (not a symlink to one).
func isDir(p string) bool {
	fi, err := os.Lstat(p)
	return err == nil && fi.IsDir()
}

// IsSession reports whether dir looks like a session directory: it has a
// result/ directory, or state/ and log/.
func IsSession(dir string) bool {
	return isDir(filepath.Join(dir, "result")) || (isDir(filepath.Join(dir, "state")) && isDir(filepath.Join(dir, "log")))
}

// FindSessions returns the session directories directly inside pool, in
// name order; entries that are symlinks are not followed. The pool itself
// is returned when it is a session.
func FindSessions(pool string) ([]string, error) {
	if IsSession(pool) {
		return []string{pool}, nil
	}
	names, err := listDir(pool)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range names {
		p := filepath.Join(pool, n)
		if isDir(p) && IsSession(p) {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no session directories in it: %w", pool, ErrNotSession)
	}
	return out, nil
}

// warnings collects what could not be read, bounded.
type warnings struct {
	list    []string
	dropped int
}

func (w *warnings) add(format string, args ...any) {
	if len(w.list) >= maxWarnings {
		w.dropped++
		return
	}
	w.list = append(w.list, fmt.Sprintf(format, args...))
}

func (w *warnings) result() []string {
	if w.dropped > 0 {
		return append(w.list, fmt.Sprintf("… and %d more warnings", w.dropped))
	}
	return w.list
}

// path returns the path of rel (slash-separated, relative to the session
// directory) after checking that every directory on the way is a real
// directory, not a symlink that could lead out of the session. The checks
// are cached per directory.
func (s *Session) path(rel string) (string, error) {
	parts := strings.Split(rel, "/")
	for i := 1; i < len(parts); i++ {
		d := strings.Join(parts[:i], "/")
		err, ok := s.dirs[d]
		if !ok {
			fi, lerr := os.Lstat(filepath.Join(s.Dir, filepath.FromSlash(d)))
			switch {
			case lerr != nil:
				err = lerr
			case fi.Mode()&os.ModeSymlink != 0:
				err = fmt.Errorf("%s/: %w", d, fsq.ErrSymlink)
			case !fi.IsDir():
				err = fmt.Errorf("%s/: not a directory", d)
			}
			if s.dirs == nil {
				s.dirs = map[string]error{}
			}
			s.dirs[d] = err
		}
		if err != nil {
			return "", err
		}
	}
	return filepath.Join(s.Dir, filepath.FromSlash(rel)), nil
}

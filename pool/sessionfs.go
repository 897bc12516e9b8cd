package pool

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"time"

	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/internal/sessionio"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
	"golang.org/x/sys/unix"
)

// This file is package pool's only way to files, as master/sessionfs.go
// is package master's: a session's files (moved/, forward/, queue/,
// inflight/, result/, heartbeat.json) through the session's fsq.Root
// (sessionio.Session.Root), and the pool directory's own files (pool.json,
// affinity/, events.jsonl, .clock) through a root held on the pool
// directory (Pool.root). Every open, create, rename, link, list, stat
// and remove is relative to a directory held open, never resolves a
// symlink in any component and never leaves the session or the pool: a
// symlink planted where a file should be is an error wrapping
// fsq.ErrSymlink (or, listed, not a command), a session subdirectory
// swapped for a symlink an error wrapping fsq.ErrLayout; nothing is read,
// moved or written through either. A session directory of the pool that
// is a symlink is not a session of the pool (SessionNames, session): the
// pool opens each member relative to its own root (master.OpenIn), and a
// member's handle never opens its path again, so a member swapped for a
// symlink after it was listed or opened is refused too.
//
// Elsewhere the package names sessions by path only to hand them to
// package launch (Launch, StopMany, LaunchArray), which opens them through
// a root as well.

// openPoolRoot opens the root of the pool directory abs.
func openPoolRoot(abs string) (*fsq.Root, error) { return fsq.OpenRoot(abs) }

// readPoolFile reads the pool file name (at most limit bytes, a regular
// file only), its directory revalidated first (another NFS client may
// have written it).
func (p *Pool) readPoolFile(name string, limit int64) ([]byte, error) {
	p.root.Revalidate(path.Dir(name))
	b, _, err := p.root.ReadFile(name, limit)
	return b, err
}

// writePoolFile replaces the pool file name with data (durability d).
func (p *Pool) writePoolFile(name string, data []byte, d fsq.Durability) error {
	return p.root.WriteAtomic(name, data, 0o660, d)
}

// mkdirPool makes the pool's directory name if it is missing (0770
// whatever the umask: sessionio.MkdirMaster).
func (p *Pool) mkdirPool(name string) error { return sessionio.MkdirMaster(p.root, name) }

// appendEvent appends one line to events.jsonl (a regular file only,
// 0660 whatever the umask).
func (p *Pool) appendEvent(line []byte) error {
	f, err := p.root.OpenAppend(FilePoolEvents, 0o660)
	if err != nil {
		return err
	}
	err = setMode(f)
	if err == nil {
		_, err = f.Write(line)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// lockResize takes the pool's resize lock (an exclusive flock on
// .resize.lock in the pool directory, created if missing, a regular file
// only), trying every 100 ms until ctx ends and saying once, through
// Progress, that it waits; the caller runs unlock. Grow and Shrink hold it
// for their whole run, so two of them never choose the same sessions or
// rewrite pool.json's size from the same count.
func (p *Pool) lockResize(ctx context.Context) (unlock func(), err error) {
	f, err := p.root.OpenFile(filePoolResizeLock, os.O_RDWR|os.O_CREATE|unix.O_NONBLOCK, 0o660)
	if err == nil {
		if fi, serr := f.Stat(); serr != nil || !fi.Mode().IsRegular() {
			err = serr
			if err == nil {
				err = fmt.Errorf("%s: %w", p.root.Abs(filePoolResizeLock), fsq.ErrNotRegular)
			}
		} else {
			err = setMode(f)
		}
		if err != nil {
			f.Close()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("master: pool resize lock: %w", err)
	}
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for said := false; ; said = true {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { _ = f.Close() }, nil // Closing the file releases the lock.
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, fmt.Errorf("master: pool resize lock: %w", err)
		}
		if !said && p.Progress != nil {
			p.Progress("waiting for another grow or shrink of this pool to end")
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("master: pool resize lock: %w", context.Cause(ctx))
		case <-t.C:
		}
	}
}

// setMode gives a pool file another master may have created (events.jsonl,
// .clock, .resize.lock) mode 0660 whatever the umask (PROTOCOL.md 19.1). A
// file another user's master created is left to its owner: only the owner
// may chmod it, and that master set its mode when it made it.
func setMode(f *os.File) error {
	if err := fsq.SetMode(f, 0o660); err != nil && !errors.Is(err, os.ErrPermission) {
		return err
	}
	return nil
}

// touchClock sets the mtime of .clock to the filesystem's now (created if
// missing) and returns it.
func (p *Pool) touchClock() (time.Time, error) {
	err := p.root.TouchDir(filePoolClock) // A utimensat of the name itself, file or directory.
	if errors.Is(err, os.ErrNotExist) {
		var f *os.File
		if f, err = p.root.OpenFile(filePoolClock, os.O_WRONLY|os.O_CREATE|unix.O_NONBLOCK, 0o660); err == nil {
			err = setMode(f)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("master: touch %s: %w", p.root.Abs(filePoolClock), err)
	}
	fi, err := p.root.Lstat(filePoolClock)
	if err != nil {
		return time.Time{}, err
	}
	return fi.ModTime(), nil
}

// sessionDirs lists the entries of the pool directory that are
// directories (a symlink is not), with their types from the directory
// itself: no stat per entry.
func (p *Pool) sessionDirs() []string {
	entries, _ := p.root.ReadDir(".")
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}

// openIn opens the member name relative to the pool's root parent
// (master.OpenIn): a symlink there is refused, never followed, then
// and later.
func openIn(parent *fsq.Root, name string) (*master.Session, error) {
	return master.OpenIn(parent, name)
}

// sessionRoot returns s's root; a session whose root cannot be had reads
// as empty to the callers that list or look (they judge it dead).
func sessionRoot(s *master.Session) *fsq.Root {
	r, err := s.Core().Root()
	if err != nil {
		return nil
	}
	return r
}

// commandNames lists the command files of the session directory dir in
// (seq, name) order.
func commandNames(s *master.Session, dir string) []string {
	r := sessionRoot(s)
	if r == nil {
		return nil
	}
	names, _ := r.ReadNames(dir)
	var out []string
	for _, n := range names {
		if isCommand(n) {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		si, _, _ := protocol.ParseCommandName(out[i])
		sj, _, _ := protocol.ParseCommandName(out[j])
		return si < sj || si == sj && out[i] < out[j]
	})
	return out
}

// lstat describes the session file name without following a symlink.
func lstat(s *master.Session, name string) (os.FileInfo, error) {
	r, err := s.Core().Root()
	if err != nil {
		return nil, err
	}
	return r.Lstat(name)
}

// exists reports whether the session has an entry at name.
func exists(s *master.Session, name string) bool {
	_, err := lstat(s, name)
	return err == nil
}

// revalidate makes an NFS client revalidate the session directory name.
func revalidate(s *master.Session, name string) {
	if r := sessionRoot(s); r != nil {
		r.Revalidate(name)
	}
}

// mkdirSession makes the session's directory name if it is missing (0770
// whatever the umask: sessionio.MkdirMaster).
func mkdirSession(s *master.Session, name string) error {
	r, err := s.Core().Root()
	if err != nil {
		return err
	}
	return sessionio.MkdirMaster(r, name)
}

// claim renames the session file from to to (false, nil: from is gone,
// another claimed it).
func claim(s *master.Session, from, to string) (bool, error) {
	r, err := s.Core().Root()
	if err != nil {
		return false, err
	}
	return r.Claim(from, to)
}

// readSessionFile reads the session file name: at most limit bytes, a
// regular file only.
func readSessionFile(s *master.Session, name string, limit int64) ([]byte, error) {
	r, err := s.Core().Root()
	if err != nil {
		return nil, err
	}
	b, _, err := r.ReadFile(name, limit)
	return b, err
}

// writeSessionFile replaces the session file name with data.
func writeSessionFile(s *master.Session, name string, data []byte, d fsq.Durability) error {
	r, err := s.Core().Root()
	if err != nil {
		return err
	}
	return r.WriteAtomic(name, data, 0o660, d)
}

// removeSession removes the session entry name (a symlink itself, never
// what it points to).
func removeSession(s *master.Session, name string) error {
	r, err := s.Core().Root()
	if err != nil {
		return err
	}
	return r.Remove(name)
}

// syncSessionDir fsyncs the session's directory name.
func syncSessionDir(s *master.Session, name string) error {
	r, err := s.Core().Root()
	if err != nil {
		return err
	}
	return r.SyncDir(name)
}

// linkNew creates name in r with data, exclusively and complete: a temp
// file is written beside it, then renamed onto name without replacing
// (on NFS a hard link and an unlink); an existing name is false, nil.
func linkNew(r *fsq.Root, name string, data []byte) (bool, error) {
	dir := path.Dir(name)
	f, err := r.CreateTemp(dir, "."+path.Base(name)+".", 0o660)
	if err != nil {
		return false, err
	}
	tmp := r.RelOf(f.Name())
	err = fsq.SetMode(f, 0o660) // A forward record or an affinity pin: 0660 whatever the umask.
	if err == nil {
		_, err = f.Write(data)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = r.RenameNoReplace(tmp, name)
	}
	if err != nil {
		r.RemoveOrLater(tmp)
		if errors.Is(err, os.ErrExist) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

// dirOf is the path of the pool's session name, for master.Open and
// package launch (Launch, StopMany, LaunchArray), which reach its files
// through a root; never opened here.
func (p *Pool) dirOf(name string) string { return filepath.Join(p.dir, name) }

// arrayScript makes the pool's jobs/ (through the root) and returns the
// path of a new job script in it, for launch.LaunchArray, which writes it
// through a root on jobs/.
func (p *Pool) arrayScript() (string, error) {
	if err := p.mkdirPool(DirJobs); err != nil {
		return "", err
	}
	return filepath.Join(p.dir, DirJobs, "array-"+master.NewCmdID()+".sh"), nil
}

// isSessionDir reports whether name is a directory of the pool (not a
// symlink to one): a member deleted or swapped reads as missing.
func (p *Pool) isSessionDir(name string) bool {
	fi, err := p.root.Lstat(name)
	return err == nil && fi.IsDir()
}

package launch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"time"

	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/internal/sessionio"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
	"golang.org/x/sys/unix"
)

// This file is package launch's only way to the files of a session, as
// master/sessionfs.go is package master's: every open, create, rename,
// lock and sync goes through the session's fsq.Root (sessionio.Session.Root),
// relative to the session directory held open, never resolving a symlink
// in any component and never leaving the session. A symlink planted at
// state/launch.json, state/launch.out or state/launch.lock is an error
// wrapping fsq.ErrSymlink, a FIFO there never blocks, and state/ swapped
// for a symlink is an error wrapping fsq.ErrLayout: nothing is read,
// written or locked through it.
//
// Elsewhere the package names session files only on the scheduler's
// command line and in job scripts (jobPath), which the job opens on the
// execution host, never this package.

// jobPath is the absolute path of the session file name for a scheduler's
// command line or a job script. Never opened here.
func jobPath(s *master.Session, name string) string {
	return filepath.Join(s.Dir(), filepath.FromSlash(name))
}

// createSession makes the session directory dir (named by path, as
// master.Open names it) and, through a root on it, every directory of a
// session that is missing, then opens the session.
func createSession(dir string) (*master.Session, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("master: create session: %w", err)
	}
	r, err := fsq.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("master: create session: %w", err)
	}
	defer r.Close()
	for _, sub := range protocol.Dirs { // The modes the runner would give them (sessionio.MkdirMaster).
		if err := sessionio.MkdirMaster(r, sub); err != nil {
			return nil, fmt.Errorf("master: create session: %w", err)
		}
	}
	return master.Open(abs)
}

// readLaunchFile reads state/launch.json (at most 1 MiB, a regular file
// only), state/ revalidated first (another NFS client may have written it).
func readLaunchFile(s *master.Session) ([]byte, error) {
	r, err := s.Core().Root()
	if err != nil {
		return nil, err
	}
	r.Revalidate(protocol.DirState)
	b, _, err := r.ReadFile(FileLaunch, 1<<20)
	return b, err
}

// writeFile replaces the session file name with data (a dot-file beside
// it, renamed onto it) with durability d.
func writeFile(s *master.Session, name string, data []byte, perm os.FileMode, d fsq.Durability) error {
	r, err := s.Core().Root()
	if err != nil {
		return err
	}
	return r.WriteAtomic(name, data, perm, d)
}

// syncFile makes a write of the session file name that was not fsynced
// durable: the file, then its directory (what fsq.Durable does).
func syncFile(s *master.Session, name string) error {
	r, err := s.Core().Root()
	if err != nil {
		return err
	}
	f, err := r.OpenRegular(name)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return r.SyncDir(path.Dir(name))
}

// openOutput opens state/launch.out for reading (a regular file only).
func openOutput(s *master.Session) (*os.File, error) {
	r, err := s.Core().Root()
	if err != nil {
		return nil, err
	}
	return r.OpenRegular(FileLaunchOutput)
}

// appendOutput opens state/launch.out for appending, created if missing,
// for a driver that writes the job's output itself (sched.Local): through
// the session's root, so a symlink there is refused (fsq.ErrSymlink), a
// FIFO is never blocked on (fsq.ErrNotRegular) and a hard link to a file
// elsewhere is never written through (fsq.ErrHardLink).
func appendOutput(s *master.Session) (*os.File, error) {
	r, err := s.Core().Root()
	if err != nil {
		return nil, err
	}
	f, err := r.OpenAppend(FileLaunchOutput, 0o600)
	if err != nil {
		return nil, err
	}
	// OpenAppend opened it without blocking; the job's writes must block.
	if err := clearNonblock(f); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// clearNonblock turns O_NONBLOCK off on f.
func clearNonblock(f *os.File) error {
	fl, err := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0)
	if err == nil {
		_, err = unix.FcntlInt(f.Fd(), unix.F_SETFL, fl&^unix.O_NONBLOCK)
	}
	return err
}

// lockLaunch takes the session's launch lock (an exclusive flock on
// state/launch.lock, created if missing, a regular file only), trying
// every 100 ms until ctx ends; the caller runs unlock.
func lockLaunch(ctx context.Context, s *master.Session) (unlock func(), err error) {
	r, err := s.Core().Root()
	if err != nil {
		return nil, fmt.Errorf("master: launch lock: %w", err)
	}
	f, err := r.OpenFile(fileLaunchLock, os.O_RDWR|os.O_CREATE|unix.O_NONBLOCK, 0o600)
	if err == nil {
		if fi, serr := f.Stat(); serr != nil || !fi.Mode().IsRegular() {
			f.Close()
			err = serr
			if err == nil {
				err = fmt.Errorf("%s: %w (%s)", jobPath(s, fileLaunchLock), fsq.ErrNotRegular, fsq.FileType(fi))
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("master: launch lock: %w", err)
	}
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { _ = f.Close() }, nil // Closing the file releases the lock.
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, fmt.Errorf("master: launch lock: %w", err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("master: launch lock: %w", ctx.Err())
		case <-t.C:
		}
	}
}

// writeJobScript writes the job script at the absolute path p (a pool's
// jobs/ directory, made by path) through a root on its directory, fsynced.
func writeJobScript(p string, data []byte) error {
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	r, err := fsq.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer r.Close()
	return r.WriteAtomic(filepath.Base(p), data, 0o700, fsq.FileSynced)
}

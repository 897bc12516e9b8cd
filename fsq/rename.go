package fsq

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// at2 runs fn with the open parent directories and last components of two
// names (a rename).
func (s *Root) at2(op, from, to string, fn func(ofd int, obase string, nfd int, nbase string) error) error {
	odir, obase, err := split(from)
	if err == nil {
		var ndir, nbase string
		if ndir, nbase, err = split(to); err == nil {
			var ofd, nfd int
			var orel, nrel func()
			if ofd, orel, err = s.parentFd(odir); err == nil {
				defer orel()
				if nfd, nrel, err = s.parentFd(ndir); err == nil {
					defer nrel()
					err = fn(ofd, obase, nfd, nbase)
				} else {
					err = dirErr(err)
				}
			} else {
				err = dirErr(err)
			}
		}
	}
	if err != nil {
		if errors.Is(err, ErrBadName) {
			return &os.LinkError{Op: op, Old: from, New: to, Err: err}
		}
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV) {
			err = fmt.Errorf("%w (a symlink or a path leaving the session)", ErrSymlink)
		}
		return &os.LinkError{Op: op, Old: s.Abs(from), New: s.Abs(to), Err: err}
	}
	return nil
}

// Rename renames from to to, replacing what is at to (a symlink there is
// replaced, never followed). A symlink or mount point on the way to either
// name is an error wrapping ErrSymlink or ErrLayout.
func (s *Root) Rename(from, to string) error {
	return s.at2("rename", from, to, func(ofd int, obase string, nfd int, nbase string) error {
		return unix.Renameat(ofd, obase, nfd, nbase)
	})
}

// noExchange is set once a filesystem refused RENAME_EXCHANGE (NFS):
// Exchange then says errors.ErrUnsupported without asking again.
var noExchange atomic.Bool

// Exchange swaps the entries from and to atomically (renameat2
// RENAME_EXCHANGE): each name then holds what the other held, whatever
// the types; nothing is deleted and no symlink is followed. Either name
// missing is an error wrapping fs.ErrNotExist; a filesystem without the
// exchange (NFS) is one wrapping errors.ErrUnsupported.
func (s *Root) Exchange(from, to string) error {
	if noExchange.Load() {
		return &os.LinkError{Op: "exchange", Old: s.Abs(from), New: s.Abs(to), Err: errors.ErrUnsupported}
	}
	return s.at2("exchange", from, to, func(ofd int, obase string, nfd int, nbase string) error {
		err := unix.Renameat2(ofd, obase, nfd, nbase, unix.RENAME_EXCHANGE)
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP) {
			noExchange.Store(true)
			return fmt.Errorf("%w (%w)", errors.ErrUnsupported, err)
		}
		return err
	})
}

// RenameNoReplace renames from to to unless to exists, atomically: two
// writers racing for to cannot both succeed, and an existing to (a
// dangling symlink included) is never replaced; the error then wraps
// os.ErrExist. It uses renameat2(RENAME_NOREPLACE) where the filesystem
// supports it and falls back to link(2) plus unlink(2) elsewhere (NFS):
// link never replaces its target either. A link retried by an NFS client
// may report EEXIST although it succeeded; that case is recognised (to is
// then from's inode) and reported as success. If the unlink of from fails
// after the link, from is left for the caller to sweep.
func (s *Root) RenameNoReplace(from, to string) error {
	return s.at2("rename", from, to, func(ofd int, obase string, nfd int, nbase string) error {
		err := error(unix.EINVAL) // As where renameat2 is missing (NFS).
		if !forceLink.Load() {
			err = unix.Renameat2(ofd, obase, nfd, nbase, unix.RENAME_NOREPLACE)
		}
		switch {
		case err == nil:
			return nil
		case errors.Is(err, unix.EEXIST):
			return os.ErrExist
		case !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EOPNOTSUPP):
			return err
		}
		// NFS: link never replaces its target either.
		if err := unix.Linkat(ofd, obase, nfd, nbase, 0); err != nil {
			if !errors.Is(err, unix.EEXIST) {
				return err
			}
			var a, b unix.Stat_t
			if unix.Fstatat(ofd, obase, &a, unix.AT_SYMLINK_NOFOLLOW) != nil || unix.Fstatat(nfd, nbase, &b, unix.AT_SYMLINK_NOFOLLOW) != nil ||
				a.Dev != b.Dev || a.Ino != b.Ino {
				return os.ErrExist
			}
		}
		_ = unix.Unlinkat(ofd, obase, 0) // to holds the content; a leftover is the caller's to sweep.
		return nil
	})
}

// forceLink makes RenameNoReplace take its link(2) fallback, as on NFS.
// For tests.
var forceLink atomic.Bool

// Claim moves from to to by rename, so that of several processes (on one
// host or several) claiming the same file exactly one wins. It reports
// false, nil when from no longer exists (another claimer won, or the file
// was withdrawn): losing that race is not an error. ESTALE from a network
// filesystem is retried once; a retried rename that reports ENOENT
// although it succeeded (NFS) is recognised by to existing and reported
// as a win.
func (s *Root) Claim(from, to string) (bool, error) {
	for attempt := 0; ; attempt++ {
		err := s.Rename(from, to)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, os.ErrNotExist):
			if attempt > 0 {
				if _, err := s.Lstat(to); err == nil {
					return true, nil
				}
			}
			return false, nil
		case errors.Is(err, syscall.ESTALE) && attempt == 0:
			continue
		default:
			return false, fmt.Errorf("fsq: claim: %w", err)
		}
	}
}

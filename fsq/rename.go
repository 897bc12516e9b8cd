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
// replaced, never followed).
func (s *Root) Rename(from, to string) error {
	return s.at2("rename", from, to, func(ofd int, obase string, nfd int, nbase string) error {
		return unix.Renameat(ofd, obase, nfd, nbase)
	})
}

// RenameNoReplace is RenameNoReplace inside the session: to is never
// replaced (an error wrapping os.ErrExist says it exists).
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

// Claim is Claim inside the session: it renames from to to and
// reports false, nil when from no longer exists (a lost race).
func (s *Root) Claim(from, to string) (bool, error) {
	return claim(func() error { return s.Rename(from, to) }, func() error { _, err := s.Lstat(to); return err })
}

// claim is Root.Claim's rule for any rename: rename renames, dstExists
// reports (nil) whether the destination exists.
func claim(rename, dstExists func() error) (bool, error) {
	for attempt := 0; ; attempt++ {
		err := rename()
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, os.ErrNotExist):
			// On NFS a retried rename can report ENOENT although it
			// succeeded: then dst exists and is ours.
			if attempt > 0 && dstExists() == nil {
				return true, nil
			}
			return false, nil
		case errors.Is(err, syscall.ESTALE) && attempt == 0:
			continue
		default:
			return false, fmt.Errorf("fsq: claim: %w", err)
		}
	}
}

package fsq

import (
	"errors"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// Bind mounts. A directory or file of the session with something mounted
// over it (mount --bind /elsewhere S/output) is another filesystem tree
// at a session path: RESOLVE_BENEATH does not stop at it, and neither does
// O_NOFOLLOW. The root therefore resolves with RESOLVE_NO_XDEV (openat2
// refuses to cross any mount point, bind mounts included) and, where it
// walks one component at a time or looks at a last component with
// fstatat, compares the mount id (statx STATX_MNT_ID, Linux 5.8) of what
// it reached with the session directory's: a different one is an error
// wrapping ErrLayout, and nothing is read, written or changed through it.
// RemoveAll does not descend into a directory on another mount, and a
// root opened inside a root (Root.OpenRoot) checks as its parent does.
// A kernel that does not report mount ids is not checked there (openat2
// still is).

// errMountPoint is what a walk returns for a mount point on the way.
var errMountPoint = unix.EXDEV

// mountErr explains an EXDEV met on the way to name.
func mountErr(err error) error {
	return fmt.Errorf("%w (a mount point is on the path, such as a bind mount over a session directory: %v)", ErrLayout, err)
}

// mountID returns the mount id of the open file fd, or ok false where the
// kernel does not give it.
func mountID(fd int) (id uint64, ok bool) {
	var stx unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_MNT_ID, &stx); err != nil {
		return 0, false
	}
	return stx.Mnt_id, stx.Mask&unix.STATX_MNT_ID != 0
}

// sameMount returns EXDEV if the open file fd is on another mount than
// the root (checked only where the kernel reports mount ids).
func (s *Root) sameMount(fd int) error {
	if !s.hasMnt {
		return nil
	}
	if id, ok := mountID(fd); ok && id != s.mnt {
		return errMountPoint
	}
	return nil
}

// lstatAt is fstatat(dfd, base, AT_SYMLINK_NOFOLLOW) that also refuses a
// mount point at base (EXDEV): one statx where the kernel has it.
func (s *Root) lstatAt(dfd int, base string, st *syscall.Stat_t) error {
	if s.hasMnt {
		var stx unix.Statx_t
		err := unix.Statx(dfd, base, unix.AT_SYMLINK_NOFOLLOW|unix.AT_NO_AUTOMOUNT, unix.STATX_BASIC_STATS|unix.STATX_MNT_ID, &stx)
		if err == nil {
			if stx.Mask&unix.STATX_MNT_ID != 0 && stx.Mnt_id != s.mnt {
				return errMountPoint
			}
			statxToStat(&stx, st)
			return nil
		}
		if !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EPERM) {
			return err
		}
	}
	var ust unix.Stat_t
	if err := unix.Fstatat(dfd, base, &ust, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	*st = syscall.Stat_t{Dev: ust.Dev, Ino: ust.Ino, Nlink: ust.Nlink, Mode: ust.Mode, Uid: ust.Uid, Gid: ust.Gid,
		Rdev: ust.Rdev, Size: ust.Size, Blksize: ust.Blksize, Blocks: ust.Blocks,
		Atim: syscall.Timespec(ust.Atim), Mtim: syscall.Timespec(ust.Mtim), Ctim: syscall.Timespec(ust.Ctim)}
	return nil
}

// statxToStat fills st from stx as stat(2) would.
func statxToStat(stx *unix.Statx_t, st *syscall.Stat_t) {
	*st = syscall.Stat_t{
		Dev:     unix.Mkdev(stx.Dev_major, stx.Dev_minor),
		Ino:     stx.Ino,
		Nlink:   uint64(stx.Nlink),
		Mode:    uint32(stx.Mode),
		Uid:     stx.Uid,
		Gid:     stx.Gid,
		Rdev:    unix.Mkdev(stx.Rdev_major, stx.Rdev_minor),
		Size:    int64(stx.Size),
		Blksize: int64(stx.Blksize),
		Blocks:  int64(stx.Blocks),
		Atim:    syscall.Timespec{Sec: stx.Atime.Sec, Nsec: int64(stx.Atime.Nsec)},
		Mtim:    syscall.Timespec{Sec: stx.Mtime.Sec, Nsec: int64(stx.Mtime.Nsec)},
		Ctim:    syscall.Timespec{Sec: stx.Ctime.Sec, Nsec: int64(stx.Ctime.Nsec)},
	}
}

package fsq

// Functions by path, for what is not reached through a Root: a file the
// user names on the command line (report --out), the history and preview
// readers that read a session directory by path, tests that plant files
// in a session. Each is its Root method's twin for one path, with the same
// checks on the last element of the path only: a symlink in a directory
// on the way is followed. Code that works inside a session uses Root.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// WriteAtomic is Root.WriteAtomic by path: it replaces path with data
// so that a concurrent reader sees the old content or the new, never a
// mix, and gives it exactly perm. The temporary file is a dot-file in the
// same directory (readers that skip dot-files never see it).
func WriteAtomic(path string, data []byte, perm os.FileMode, d Durability) error {
	return writeViaTemp(filepath.Dir(path), path, data, perm, d)
}

// WriteAtomicVia is Root.WriteAtomicVia by path: WriteAtomic, Volatile,
// with the temporary file made in tmpDir (on the same filesystem as path)
// rather than beside path. The rename replaces whatever is at path (a
// symlink or a FIFO planted there is replaced, never followed).
func WriteAtomicVia(tmpDir, path string, data []byte, perm os.FileMode) error {
	return writeViaTemp(tmpDir, path, data, perm, Volatile)
}

// writeViaTemp writes data to a new temporary file in tmpDir (O_EXCL,
// under a name unique to this writer: masters on several hosts never
// share one), gives it perm, fsyncs it unless d is Volatile, renames it
// onto path and, if d is Durable, fsyncs path's directory.
func writeViaTemp(tmpDir, path string, data []byte, perm os.FileMode, d Durability) error {
	f, err := os.CreateTemp(tmpDir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil && d != Volatile {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		_ = os.Remove(f.Name()) // Best effort: a leftover dot-file is ignored by readers.
		return err
	}
	if d == Durable {
		return syncDir(filepath.Dir(path))
	}
	return nil
}

// syncDir fsyncs a directory so that renames and creations in it are durable.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	return syncDirFile(f)
}

// RenameNoReplace is Root.RenameNoReplace by path: it renames src to dst
// unless dst exists (an error wrapping os.ErrExist), on NFS by link(2)
// plus unlink(2). Only the runner's tests still use it.
func RenameNoReplace(src, dst string) error {
	err := unix.Renameat2(unix.AT_FDCWD, src, unix.AT_FDCWD, dst, unix.RENAME_NOREPLACE)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EEXIST):
		return &os.LinkError{Op: "rename", Old: src, New: dst, Err: os.ErrExist}
	case !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EOPNOTSUPP):
		return &os.LinkError{Op: "rename", Old: src, New: dst, Err: err}
	}
	if err := os.Link(src, dst); err != nil {
		if errors.Is(err, os.ErrExist) {
			a, aerr := os.Lstat(src)
			b, berr := os.Lstat(dst)
			if aerr == nil && berr == nil && os.SameFile(a, b) {
				_ = os.Remove(src) // Ours after all; the name stays.
				return nil
			}
		}
		return err
	}
	_ = os.Remove(src) // dst holds the content; a leftover src is the caller's to sweep.
	return nil
}

// ReadFile is Root.ReadFile by path: it reads at most limit+1 bytes of
// path (ErrTooLarge if it holds more than limit), a regular file only
// (ErrNotRegular), without blocking on a FIFO and without following a
// symlink in its last element (ErrSymlink).
func ReadFile(path string, limit int64) ([]byte, os.FileInfo, error) {
	// O_NONBLOCK keeps a FIFO planted in queue/ from blocking the open;
	// CreateFile keeps the file out of the poller.
	f, err := CreateFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, nil, fmt.Errorf("%s: %w", path, ErrSymlink)
		}
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fi, fmt.Errorf("%s: %w (%s)", path, ErrNotRegular, fileType(fi.Mode()))
	}
	if fi.Size() > limit {
		return nil, fi, ErrTooLarge
	}
	buf, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fi, err
	}
	if int64(len(buf)) > limit {
		return nil, fi, ErrTooLarge
	}
	return buf, fi, nil
}

// OpenRegular is Root.OpenRegular by path: it opens path for reading as
// ReadFile does (no symlink in the last element, no blocking on a FIFO, a
// regular file only).
func OpenRegular(path string) (*os.File, error) {
	f, err := CreateFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("%s: %w", path, ErrSymlink)
		}
		return nil, err
	}
	if err := checkRegular(f); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// checkRegular returns an error wrapping ErrNotRegular unless f is a
// regular file.
func checkRegular(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s: %w (%s)", f.Name(), ErrNotRegular, fileType(fi.Mode()))
	}
	return nil
}

// CreateFile opens a regular file like os.OpenFile, without registering it
// with the runtime's network poller (regular files cannot use it anyway):
// that saves four fcntl/epoll_ctl system calls per file on the runner's
// critical path. flag is os.O_* flags; O_CLOEXEC is added.
func CreateFile(path string, flag int, perm os.FileMode) (*os.File, error) {
	fd, err := unix.Open(path, flag|unix.O_CLOEXEC, uint32(perm.Perm()))
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// Revalidate is Root.Revalidate by path: it opens and closes dir, which
// makes an NFS client revalidate it (drop its cached negative lookups).
func Revalidate(dir string) {
	if fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err == nil {
		unix.Close(fd)
	}
}

// ReadNames is Root.ReadNames by path: it lists a directory's entry names
// without stat'ing each entry (one getdents pass).
func ReadNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

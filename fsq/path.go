package fsq

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/google/renameio/v2"
	"golang.org/x/sys/unix"
)

// WriteAtomic replaces path with data so that a concurrent reader sees the
// old content or the new, never a mix. The temporary file is a dot-file in
// the same directory (readers that skip dot-files never see it).
func WriteAtomic(path string, data []byte, perm os.FileMode, d Durability) error {
	dir := filepath.Dir(path)
	if d == Volatile {
		return writeVolatile(dir, path, data, perm)
	}
	if err := renameio.WriteFile(path, data, perm, renameio.WithTempDir(dir)); err != nil {
		return err
	}
	if d == Durable {
		return syncDir(dir)
	}
	return nil
}

// WriteAtomicVia is WriteAtomic without fsync whose temporary file is
// created in tmpDir (which must be on the same filesystem as path) rather
// than beside path: a writer that is killed between the write and the
// rename leaves its leftover in tmpDir, where its owner can sweep it, and
// never in a directory that others list. The temporary file is created
// with O_EXCL, and the rename replaces whatever is at path (a symlink or a
// FIFO planted there is replaced, never followed).
func WriteAtomicVia(tmpDir, path string, data []byte, perm os.FileMode) error {
	return writeVolatile(tmpDir, path, data, perm)
}

// writeVolatile is tmp + rename without fsync. The temp name is unique so
// that concurrent writers (masters on several hosts) never share one.
// tmpDir is where the temporary file is made.
func writeVolatile(tmpDir, path string, data []byte, perm os.FileMode) error {
	dir := tmpDir
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		_ = os.Remove(f.Name()) // Best effort: a leftover dot-file is ignored by readers.
	}
	return err
}

// syncDir fsyncs a directory so that renames and creations in it are durable.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, syscall.EINVAL) { // Some filesystems cannot sync a directory.
		return nil
	}
	return err
}

// RenameNoReplace renames src to dst unless dst exists, atomically: two
// writers racing for dst cannot both succeed, and an existing dst is never
// replaced. When dst exists the error wraps os.ErrExist. It uses
// renameat2(RENAME_NOREPLACE) where the filesystem supports it and falls
// back to link(2) plus unlink(2) elsewhere (NFS): link never replaces its
// target either. A link retried by an NFS client may report EEXIST
// although it succeeded; that case is recognised (dst is then src's inode)
// and reported as success.
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

// ReadFile reads at most limit+1 bytes of path without following a symlink
// in its last element (O_NOFOLLOW). It returns ErrTooLarge if the file holds
// more than limit bytes, and an error wrapping ErrSymlink for a symlink.
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

// OpenRegular opens a session file for reading as ReadFile does: without
// following a symlink (ErrSymlink), without blocking on a FIFO, and only
// if it is a regular file (ErrNotRegular). For files read in pieces
// (output, the spool) rather than whole.
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

// Revalidate opens and closes dir. On NFS this makes the client revalidate
// the directory (close-to-open consistency), which discards cached negative
// lookups: without it, a file that another host creates after this host
// once looked it up stays invisible to stat and open for up to the
// directory attribute timeout (30-60 s by default). Call it before looking
// up a file another host may have just created. Locally it costs an open.
func Revalidate(dir string) {
	if fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err == nil {
		unix.Close(fd)
	}
}

// ReadNames lists a directory's entry names without stat'ing each entry
// (one getdents pass): what a queue scan needs, and no more.
func ReadNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

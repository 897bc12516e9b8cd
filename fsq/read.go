package fsq

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ReadFile reads the file name whole, with its description, for files
// read in one piece (a request, a result, state.json). It reads at most
// limit+1 bytes: a file holding more than limit is ErrTooLarge, also when
// it grows while being read. Only a regular file is read (ErrNotRegular),
// and a FIFO planted at name does not block the open (O_NONBLOCK); a
// symlink is ErrSymlink.
//
// It works on the bare descriptor (open, fstat, reads, close): no *os.File,
// whose set-up costs a system call more per file.
func (s *Root) ReadFile(name string, limit int64) ([]byte, os.FileInfo, error) {
	fd, err := s.openFd(name, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	defer unix.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return nil, nil, &os.PathError{Op: "stat", Path: s.Abs(name), Err: err}
	}
	fi := newFileInfo(path.Base(name), &st)
	if !fi.Mode().IsRegular() {
		return nil, fi, fmt.Errorf("%s: %w (%s)", s.Abs(name), ErrNotRegular, FileType(fi))
	}
	if fi.Size() > limit {
		return nil, fi, ErrTooLarge
	}
	// Read to EOF (the file may have grown since the fstat), at most
	// limit+1 bytes.
	buf := make([]byte, 0, min(fi.Size(), limit)+1)
	for int64(len(buf)) <= limit {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		end := min(int64(cap(buf)), limit+1)
		n, err := unix.Read(fd, buf[len(buf):end])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, fi, &os.PathError{Op: "read", Path: s.Abs(name), Err: err}
		}
		if n == 0 {
			break
		}
		buf = buf[:len(buf)+n]
	}
	if int64(len(buf)) > limit {
		return nil, fi, ErrTooLarge
	}
	return buf, fi, nil
}

// OpenRegular opens name for reading as ReadFile does (no symlink, no
// blocking on a FIFO, a regular file only), for files read in pieces
// (output, the spool) rather than whole.
func (s *Root) OpenRegular(name string) (*os.File, error) {
	return s.openRegular(name, os.O_RDONLY, 0)
}

// ReadNames lists the entry names of the directory name ("." is the
// session itself).
//
// It reads the directory with getdents on the bare descriptor: no
// *os.File, whose set-up costs a system call more per listing (this runs
// on every poll).
func (s *Root) ReadNames(name string) ([]string, error) {
	fd, err := s.dirFd(name)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	buf := make([]byte, 8192)
	var names []string
	for {
		n, err := unix.ReadDirent(fd, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return names, &os.PathError{Op: "readdirent", Path: s.Abs(name), Err: err}
		}
		if n <= 0 {
			return names, nil
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
}

// ReadDir lists the directory name with each entry's type, unsorted. The
// type comes from the directory itself; where the filesystem does not
// give it, package os looks it up by path (a read-only lstat).
func (s *Root) ReadDir(name string) ([]os.DirEntry, error) {
	f, err := s.OpenDir(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadDir(-1)
}

// Lstat describes name without following a symlink. A mount point at name
// (a bind mount over a session directory) is an error wrapping ErrLayout.
func (s *Root) Lstat(name string) (os.FileInfo, error) {
	var fi os.FileInfo
	err := s.at("lstat", name, func(dfd int, base string) error {
		var st syscall.Stat_t
		if err := s.lstatAt(dfd, base, &st); err != nil {
			return err
		}
		fi = newFileInfo(base, &st) // Callers (the trust checks) read a syscall.Stat_t from Sys().
		return nil
	})
	return fi, err
}

// Stat describes the session directory the root holds.
func (s *Root) Stat() (os.FileInfo, error) {
	defer runtime.KeepAlive(s)
	var st syscall.Stat_t
	if err := syscall.Fstat(s.fd, &st); err != nil {
		return nil, &os.PathError{Op: "stat", Path: s.dir, Err: err}
	}
	return newFileInfo(path.Base(s.dir), &st), nil
}

// Statfs describes the filesystem of the directory name (FSTypeOf names
// it).
func (s *Root) Statfs(name string, st *unix.Statfs_t) error {
	f, err := s.OpenDir(name)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Fstatfs(int(f.Fd()), st)
}

// Revalidate opens and closes the directory name. On NFS this makes the
// client revalidate the directory (close-to-open consistency), which
// discards cached negative lookups: without it, a file that another host
// creates after this host once looked it up stays invisible to stat and
// open for up to the directory attribute timeout (30-60 s by default).
// Call it before looking up a file another host may have just created.
// Locally it costs an open.
//
// A directory this client has cached as absent (forward/, looked up by a
// master before a mover on another client made it) cannot be opened until
// its parent is revalidated: on ENOENT the parent is, up to the root, and
// the open tried again (an open of "." forces the revalidation of the
// root's own attributes).
func (s *Root) Revalidate(name string) {
	fd, err := s.dirFd(name)
	if errors.Is(err, fs.ErrNotExist) && name != "." && name != "" {
		s.Revalidate(path.Dir(name))
		fd, err = s.dirFd(name)
	}
	if err == nil {
		unix.Close(fd)
	}
}

// fileInfo is an os.FileInfo made from a stat of a name relative to a
// directory fd (os has no Lstat relative to a directory of our own).
type fileInfo struct {
	name string
	st   syscall.Stat_t
}

func newFileInfo(name string, st *syscall.Stat_t) *fileInfo { return &fileInfo{name: name, st: *st} }

func (fi *fileInfo) Name() string       { return fi.name }
func (fi *fileInfo) Size() int64        { return fi.st.Size }
func (fi *fileInfo) ModTime() time.Time { return time.Unix(fi.st.Mtim.Unix()) }
func (fi *fileInfo) IsDir() bool        { return fi.Mode().IsDir() }
func (fi *fileInfo) Sys() any           { return &fi.st }

// Mode converts the stat mode as package os does.
func (fi *fileInfo) Mode() os.FileMode {
	m := os.FileMode(fi.st.Mode & 0o777)
	switch fi.st.Mode & syscall.S_IFMT {
	case syscall.S_IFBLK:
		m |= fs.ModeDevice
	case syscall.S_IFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case syscall.S_IFDIR:
		m |= fs.ModeDir
	case syscall.S_IFIFO:
		m |= fs.ModeNamedPipe
	case syscall.S_IFLNK:
		m |= fs.ModeSymlink
	case syscall.S_IFSOCK:
		m |= fs.ModeSocket
	}
	if fi.st.Mode&syscall.S_ISGID != 0 {
		m |= fs.ModeSetgid
	}
	if fi.st.Mode&syscall.S_ISUID != 0 {
		m |= fs.ModeSetuid
	}
	if fi.st.Mode&syscall.S_ISVTX != 0 {
		m |= fs.ModeSticky
	}
	return m
}

// SameFile is os.SameFile for infos that may come from the root.
func SameFile(a, b os.FileInfo) bool {
	x, ok1 := a.Sys().(*syscall.Stat_t)
	y, ok2 := b.Sys().(*syscall.Stat_t)
	return ok1 && ok2 && x.Dev == y.Dev && x.Ino == y.Ino
}

// FileType names the type of the file at fi for messages ("a FIFO",
// "a directory", ...).
func FileType(fi os.FileInfo) string { return fileType(fi.Mode()) }

// fileType names the type of a file mode for messages.
func fileType(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeSymlink != 0:
		return "a symlink"
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0:
		return "a device"
	case m.IsRegular():
		return "a regular file"
	}
	return "an irregular file"
}

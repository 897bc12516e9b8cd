package fsq

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Root reaches the files of one session directory (the runner's and
// every Go master's only way to them). It holds the directory open (the fd
// taken by OpenRoot is the root) and does every open, create, rename,
// list, remove, mkdir and stat relative to it, walking the path one
// component at a time with O_NOFOLLOW (openat2 with
// RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS where the kernel has it): no symlink
// is ever resolved, in any component, and no operation leaves the session.
// A session directory swapped for a symlink (to a place outside the
// session or inside it) is an error wrapping ErrLayout at the moment of the
// operation. Directories are looked up anew on every call, never cached,
// so a directory renamed away (even outside the session) is not written
// through either. It works on NFS: it needs only openat, renameat, linkat
// and unlinkat, and falls back from renameat2 to link+unlink there.
//
// Names are slash-separated paths relative to the session ("result/x.json");
// an absolute name, an empty one, "." or ".." in any component is refused
// (ErrBadName). Files it returns are named by their absolute path for
// messages. A Root is safe for concurrent use.
type Root struct {
	dir      string // absolute session directory, for messages and the watcher
	fd       int    // the session directory, opened once
	dev, ino uint64 // its identity, to notice the path naming another directory
	mnt      uint64 // its mount id (statx), when hasMnt: nothing on another mount is used (mount_linux.go)
	hasMnt   bool

	cleanup runtime.Cleanup // closes fd if the root is dropped without Close

	mu    sync.Mutex
	later []string // temp files to remove once their directory is back (RemoveOrLater)
}

// Dir returns the directory the root was opened on, as given to OpenRoot.
func (s *Root) Dir() string { return s.dir }

// RemoveOrLater removes a temporary file (of the root's user); if its
// directory is unreachable now (swapped for a symlink), the name is kept
// and SweepLater removes it once the layout is fixed, so nothing is left
// behind in tmp/. Safe for concurrent use.
func (s *Root) RemoveOrLater(name string) {
	if err := s.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.mu.Lock()
		s.later = append(s.later, name)
		s.mu.Unlock()
	}
}

// SweepLater retries the removals RemoveOrLater could not do.
func (s *Root) SweepLater() {
	s.mu.Lock()
	defer s.mu.Unlock()
	keep := s.later[:0]
	for _, n := range s.later {
		if err := s.Remove(n); err != nil && !errors.Is(err, os.ErrNotExist) {
			keep = append(keep, n)
		}
	}
	s.later = keep
}

// ErrBadName reports a name the root refuses: absolute, empty, or with a
// "." or ".." component.
var ErrBadName = errors.New("runner: not a plain path inside the session") // Worded as when it was the runner's.

// ErrLayout reports that a directory on the way to a name is not a plain
// directory of the session (a symlink, a file, or a path leaving it): the
// layout is broken, the operation was not done, and it is worth retrying
// once the layout is fixed. It is not ErrSymlink, which says the file
// itself is a symlink.
var ErrLayout = errors.New("a session directory on the path is a symlink or not a directory; nothing was written through it")

// dirErr turns an error of openDir into one that wraps ErrLayout when the
// walk met a symlink or a non-directory.
func dirErr(err error) error {
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV) || errors.Is(err, unix.ENOTDIR) {
		return fmt.Errorf("%w (%v)", ErrLayout, err)
	}
	return err
}

// ForceWalk makes every root walk directories one component at a time, as
// where openat2 is missing (on), or try openat2 again (off). For tests.
func ForceWalk(on bool) { noOpenat2.Store(on) }

// noOpenat2 is set once openat2(2) turned out to be missing (ENOSYS) or
// refused by a seccomp filter (EPERM): then directories are walked one
// component at a time.
var noOpenat2 atomic.Bool

// OpenRoot opens the session directory dir. The path itself may pass
// through symlinks (a home directory behind one); what it names at this
// moment becomes the root.
func OpenRoot(dir string) (*Root, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "stat", Path: dir, Err: err}
	}
	r := &Root{dir: dir, fd: fd, dev: st.Dev, ino: st.Ino}
	r.mnt, r.hasMnt = mountID(fd)
	// A root dropped without Close (a long-lived master's Session, whose
	// waits may still run after it is done with) closes its directory
	// when collected; every use of fd keeps the root alive meanwhile.
	r.cleanup = runtime.AddCleanup(r, func(fd int) { unix.Close(fd) }, fd)
	return r, nil
}

// OpenRoot opens the directory name inside s as a root of its own,
// relative to s's handle: no symlink is followed in any component, so a
// directory swapped for a symlink is refused (an error wrapping
// ErrLayout), never left through. Its Moved compares the path
// s.Abs(name) with the directory opened.
func (s *Root) OpenRoot(name string) (*Root, error) {
	fd, err := s.dirFd(name)
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "stat", Path: s.Abs(name), Err: err}
	}
	r := &Root{dir: s.Abs(name), fd: fd, dev: st.Dev, ino: st.Ino}
	r.cleanup = runtime.AddCleanup(r, func(fd int) { unix.Close(fd) }, fd)
	return r, nil
}

// Close closes the root's directory.
func (s *Root) Close() error {
	if s == nil || s.fd < 0 {
		return nil
	}
	s.cleanup.Stop()
	err := unix.Close(s.fd)
	s.fd = -1
	return err
}

// Moved reports whether the session's path no longer names the directory
// the root holds (it was renamed, removed or replaced), with why.
func (s *Root) Moved() error {
	var st unix.Stat_t
	if err := unix.Stat(s.dir, &st); err != nil {
		return fmt.Errorf("the session directory %s is gone: %w", s.dir, err)
	}
	if st.Dev != s.dev || st.Ino != s.ino {
		return fmt.Errorf("the session directory %s was replaced by another directory", s.dir)
	}
	return nil
}

// Abs returns the absolute path of name, for messages and for code that
// hands a path to another program (the payload file tclsh sources).
func (s *Root) Abs(name string) string {
	if name == "." || name == "" {
		return s.dir
	}
	return s.dir + "/" + name
}

// RelOf turns an absolute path under the session back into a name; it is
// for callers (the result writer's replaceable ops) whose interface speaks
// absolute paths. Anything outside the session yields an invalid name.
func (s *Root) RelOf(p string) string {
	if r, ok := strings.CutPrefix(p, s.dir+"/"); ok {
		return r
	}
	return "/" // Refused by split.
}

// split checks name and returns its directory part ("" for the root) and
// its last component.
func split(name string) (dir, base string, err error) {
	if name == "" || strings.HasPrefix(name, "/") {
		return "", "", fmt.Errorf("%q: %w", name, ErrBadName)
	}
	for _, c := range strings.Split(name, "/") {
		if c == "" || c == "." || c == ".." {
			return "", "", fmt.Errorf("%q: %w", name, ErrBadName)
		}
	}
	dir, base = path.Split(name)
	return strings.TrimSuffix(dir, "/"), base, nil
}

// symlinkErr turns the error of an operation on the last component into
// one naming the path; a refused symlink (ELOOP from O_NOFOLLOW) wraps
// ErrSymlink, worded as package fsq words it.
func (s *Root) symlinkErr(op, name string, err error) error {
	if errors.Is(err, unix.ELOOP) {
		return fmt.Errorf("%s: %w", s.Abs(name), ErrSymlink)
	}
	if errors.Is(err, unix.EXDEV) {
		return &os.PathError{Op: op, Path: s.Abs(name), Err: mountErr(err)}
	}
	return &os.PathError{Op: op, Path: s.Abs(name), Err: err}
}

// openDir opens the directory dir ("" is the root itself, opened anew as
// ".": one system call, and an open file description of its own, so a
// listing's offset is not shared with the root's fd) without following a
// symlink in any component, with O_PATH (a handle for the *at calls: no
// open on the server of a network filesystem) or O_RDONLY (to list, fsync
// or revalidate it) in mode. The caller closes it.
func (s *Root) openDir(dir string, mode int) (int, error) {
	defer runtime.KeepAlive(s) // s.fd is in use until the call returns.
	if dir == "" {
		for {
			fd, err := unix.Openat(s.fd, ".", mode|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if !errors.Is(err, unix.EINTR) {
				return fd, err
			}
		}
	}
	if !noOpenat2.Load() {
		fd, err := unix.Openat2(s.fd, dir, &unix.OpenHow{
			Flags:   uint64(mode | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC),
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
		})
		if err == nil || (!errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EPERM)) {
			return fd, err
		}
		noOpenat2.Store(true)
	}
	return s.walk(dir, mode)
}

// walk is openDir for kernels without openat2: one openat per component,
// each with O_NOFOLLOW|O_DIRECTORY (O_PATH but for the last).
func (s *Root) walk(dir string, mode int) (int, error) {
	defer runtime.KeepAlive(s)
	cur := s.fd
	parts := strings.Split(dir, "/")
	for i, c := range parts {
		m := unix.O_PATH
		if i == len(parts)-1 {
			m = mode
		}
		fd, err := unix.Openat(cur, c, m|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if cur != s.fd {
			unix.Close(cur)
		}
		if err != nil {
			return -1, err
		}
		if err := s.sameMount(fd); err != nil {
			unix.Close(fd)
			return -1, err
		}
		cur = fd
	}
	return cur, nil
}

// parentFd returns a handle on the directory dir for the *at calls and the
// function that releases it. The session directory itself ("") is the
// root's own fd, used as it is: no system call (the root is kept alive
// until release).
func (s *Root) parentFd(dir string) (int, func(), error) {
	if dir == "" {
		return s.fd, func() { runtime.KeepAlive(s) }, nil
	}
	fd, err := s.openDir(dir, unix.O_PATH)
	if err != nil {
		return -1, nil, err
	}
	return fd, func() { unix.Close(fd) }, nil
}

// at runs fn with the open parent directory of name and name's last
// component.
func (s *Root) at(op, name string, fn func(dfd int, base string) error) error {
	dir, base, err := split(name)
	if err != nil {
		return &os.PathError{Op: op, Path: name, Err: err}
	}
	dfd, release, err := s.parentFd(dir)
	if err != nil {
		return &os.PathError{Op: op, Path: s.Abs(name), Err: dirErr(err)}
	}
	defer release()
	if err := fn(dfd, base); err != nil {
		return s.symlinkErr(op, name, err)
	}
	return nil
}

// OpenFile opens name with flag (os.O_* flags) and perm. O_NOFOLLOW and
// O_CLOEXEC are always added: a symlink at the last component is refused
// too. The file is not registered with the runtime poller (see
// CreateFile).
func (s *Root) OpenFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	fd, err := s.openFd(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), s.Abs(name)), nil
}

// openFd is OpenFile's open, returning the descriptor.
//
// A name in a subdirectory is opened with one openat2 of the whole name
// (RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS: no symlink in any component, the
// last included) instead of opening its directory, the file, and closing
// the directory. When that fails because of a symlink, a non-directory on
// the way or a concurrent rename (ELOOP, EXDEV, ENOTDIR, EAGAIN), the
// component walk below runs again to tell a broken layout (ErrLayout) from
// a symlink at the last component (ErrSymlink); any other outcome is the
// same either way.
func (s *Root) openFd(name string, flag int, perm os.FileMode) (int, error) {
	if dir, _, err := split(name); err == nil && dir != "" && !noOpenat2.Load() {
		how := unix.OpenHow{
			Flags:   uint64(flag | unix.O_NOFOLLOW | unix.O_CLOEXEC),
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
		}
		if flag&(os.O_CREATE|unix.O_TMPFILE) != 0 {
			how.Mode = uint64(perm.Perm())
		}
		for {
			fd, err := unix.Openat2(s.fd, name, &how)
			runtime.KeepAlive(s)
			switch {
			case errors.Is(err, unix.EINTR):
				continue
			case err == nil:
				return fd, nil
			}
			if !errors.Is(err, unix.ELOOP) && !errors.Is(err, unix.EXDEV) && !errors.Is(err, unix.ENOTDIR) &&
				!errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EPERM) {
				return -1, &os.PathError{Op: "open", Path: s.Abs(name), Err: err}
			}
			break // The walk below says what is in the way.
		}
	}
	var fd int
	err := s.at("open", name, func(dfd int, base string) error {
		var err error
		for {
			fd, err = unix.Openat(dfd, base, flag|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm.Perm()))
			if !errors.Is(err, unix.EINTR) {
				break
			}
		}
		if err == nil {
			if err = s.sameMount(fd); err != nil {
				unix.Close(fd)
			}
		}
		return err
	})
	if err != nil {
		return -1, err
	}
	return fd, nil
}

// openRegular opens name with flag (never blocking on a FIFO) and checks
// that it is a regular file (ErrNotRegular).
func (s *Root) openRegular(name string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := s.OpenFile(name, flag|unix.O_NONBLOCK, perm)
	if err != nil {
		if errors.Is(err, unix.ENXIO) { // A FIFO without a reader, opened for writing.
			if fi, lerr := s.Lstat(name); lerr == nil && !fi.Mode().IsRegular() {
				return nil, fmt.Errorf("%s: %w (%s)", s.Abs(name), ErrNotRegular, FileType(fi))
			}
		}
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s: %w (%s)", s.Abs(name), ErrNotRegular, FileType(fi))
	}
	if err == nil && flag&(os.O_WRONLY|os.O_RDWR) != 0 {
		err = oneLink(s.Abs(name), fi)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// oneLink returns an error wrapping ErrHardLink unless fi, a regular file
// about to be written or changed, has exactly one link. A session's files
// are made by the runner and the masters, never linked: a second link is
// someone's file elsewhere (or another session file) that a write would
// reach.
func oneLink(p string, fi os.FileInfo) error {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
		return fmt.Errorf("%s: %w (%d links): remove it", p, ErrHardLink, st.Nlink)
	}
	return nil
}

// OpenRegular is OpenRegular inside the session.
func (s *Root) OpenRegular(name string) (*os.File, error) {
	return s.openRegular(name, os.O_RDONLY, 0)
}

// OpenAppend is OpenAppend inside the session.
func (s *Root) OpenAppend(name string, perm os.FileMode) (*os.File, error) {
	return s.openRegular(name, os.O_WRONLY|os.O_CREATE|os.O_APPEND, perm)
}

// OpenLog is OpenLog inside the session.
func (s *Root) OpenLog(name string, perm os.FileMode) (*Log, []byte, error) {
	f, err := s.openRegular(name, os.O_RDWR|os.O_CREATE|os.O_APPEND, perm)
	if err != nil {
		return nil, nil, err
	}
	return adoptLog(f)
}

// ReadFile is ReadFile inside the session: at most limit bytes
// (ErrTooLarge beyond), a regular file only, never blocking on a FIFO.
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

// CreateNew is CreateNew inside the session: name is created
// exclusively; whatever is in the way is removed first.
func (s *Root) CreateNew(name string, perm os.FileMode) (*os.File, error) {
	f, err := s.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if errors.Is(err, os.ErrExist) {
		if rerr := s.Remove(name); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			return nil, rerr
		}
		f, err = s.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	}
	return f, err
}

// CreateTemp creates a new file in dir named prefix + a random suffix
// (O_EXCL), open for reading and writing.
func (s *Root) CreateTemp(dir, prefix string, perm os.FileMode) (*os.File, error) {
	for i := 0; ; i++ {
		f, err := s.OpenFile(dir+"/"+prefix+strconv.FormatUint(rand.Uint64(), 36), os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
		if err == nil || !errors.Is(err, os.ErrExist) || i > 100 {
			return f, err
		}
	}
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

// Mkdir makes the directory name with perm (before the umask).
func (s *Root) Mkdir(name string, perm os.FileMode) error {
	return s.at("mkdir", name, func(dfd int, base string) error {
		return unix.Mkdirat(dfd, base, uint32(perm.Perm()))
	})
}

// Chmod sets the mode of name (permission, setgid and sticky bits). A
// symlink is refused, never followed; so is a file with more than one
// link (ErrHardLink), whose other name may be anyone's file.
func (s *Root) Chmod(name string, mode os.FileMode) error {
	return s.at("chmod", name, func(dfd int, base string) error {
		fd, err := unix.Openat(dfd, base, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if err := s.sameMount(fd); err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR && st.Nlink > 1 {
			return fmt.Errorf("%w (%d links)", ErrHardLink, st.Nlink)
		}
		m := uint32(mode.Perm())
		if mode&fs.ModeSetgid != 0 {
			m |= unix.S_ISGID
		}
		if mode&fs.ModeSetuid != 0 {
			m |= unix.S_ISUID
		}
		if mode&fs.ModeSticky != 0 {
			m |= unix.S_ISVTX
		}
		return unix.Fchmod(fd, m)
	})
}

// Remove removes the file or empty directory name (a symlink itself, never
// what it points to).
func (s *Root) Remove(name string) error {
	return s.at("remove", name, func(dfd int, base string) error {
		err := unix.Unlinkat(dfd, base, 0)
		if errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EPERM) {
			if derr := unix.Unlinkat(dfd, base, unix.AT_REMOVEDIR); derr == nil || !errors.Is(derr, unix.ENOTDIR) {
				return derr
			}
		}
		return err
	})
}

// RemoveAll removes name and everything under it, never following a
// symlink. A missing name is not an error.
func (s *Root) RemoveAll(name string) error {
	err := s.at("removeall", name, func(dfd int, base string) error { return removeAllAt(dfd, base) })
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

func removeAllAt(dfd int, base string) error {
	err := unix.Unlinkat(dfd, base, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EPERM) {
		return err
	}
	fd, oerr := unix.Openat(dfd, base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if oerr != nil {
		if errors.Is(oerr, unix.ENOENT) {
			return nil
		}
		return err
	}
	d := os.NewFile(uintptr(fd), base)
	var first error
	for {
		names, rerr := d.Readdirnames(256)
		for _, n := range names {
			if e := removeAllAt(fd, n); e != nil && first == nil {
				first = e
			}
		}
		if rerr != nil || len(names) == 0 {
			break
		}
	}
	d.Close()
	if err := unix.Unlinkat(dfd, base, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		if first == nil {
			first = err
		}
	}
	return first
}

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

// OpenDir opens the directory name ("." for the session) as a file.
func (s *Root) OpenDir(name string) (*os.File, error) {
	fd, err := s.dirFd(name)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), s.Abs(name)), nil
}

// dirFd is OpenDir's open, returning the descriptor.
func (s *Root) dirFd(name string) (int, error) {
	var fd int
	var err error
	if name == "." {
		// A file of its own (not a dup of the root's, which would share
		// its offset: a second listing would start at the end).
		fd, err = unix.Openat(s.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		runtime.KeepAlive(s)
	} else {
		if _, _, err = split(name); err != nil {
			return -1, &os.PathError{Op: "open", Path: name, Err: err}
		}
		fd, err = s.openDir(name, unix.O_RDONLY)
	}
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: s.Abs(name), Err: dirErr(err)}
	}
	return fd, nil
}

// SyncDir is SyncDir inside the session.
func (s *Root) SyncDir(name string) error {
	f, err := s.OpenDir(name)
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

// Revalidate is Revalidate inside the session (an open and a close,
// which makes an NFS client revalidate the directory).
func (s *Root) Revalidate(name string) {
	if fd, err := s.dirFd(name); err == nil {
		unix.Close(fd)
	}
}

// TouchDir is TouchDir inside the session.
func (s *Root) TouchDir(name string) error {
	now := []unix.Timespec{{Nsec: unix.UTIME_NOW}, {Nsec: unix.UTIME_NOW}}
	return s.at("utimes", name, func(dfd int, base string) error {
		return unix.UtimesNanoAt(dfd, base, now, unix.AT_SYMLINK_NOFOLLOW)
	})
}

// Statfs describes the filesystem of the directory name.
func (s *Root) Statfs(name string, st *unix.Statfs_t) error {
	f, err := s.OpenDir(name)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Fstatfs(int(f.Fd()), st)
}

// WriteAtomicVia is WriteAtomicVia inside the session: the temporary
// file is created in tmpDir (O_EXCL, never through a symlink) and renamed
// onto name, which is replaced, never followed. Not fsynced.
func (s *Root) WriteAtomicVia(tmpDir, name string, data []byte, perm os.FileMode) error {
	return s.writeAtomic(tmpDir, name, data, perm, Volatile)
}

// WriteAtomic is WriteAtomic inside the session, with the same
// durability levels: the temporary file is a dot-file beside name.
func (s *Root) WriteAtomic(name string, data []byte, perm os.FileMode, d Durability) error {
	dir, _, err := split(name)
	if err != nil {
		return &os.PathError{Op: "write", Path: name, Err: err}
	}
	if dir == "" {
		dir = "."
	}
	return s.writeAtomic(dir, name, data, perm, d)
}

func (s *Root) writeAtomic(tmpDir, name string, data []byte, perm os.FileMode, d Durability) error {
	_, base, err := split(name)
	if err != nil {
		return &os.PathError{Op: "write", Path: name, Err: err}
	}
	prefix := "." + base + "."
	var f *os.File
	if tmpDir == "." {
		f, err = s.createTempTop(prefix, perm)
	} else {
		f, err = s.CreateTemp(tmpDir, prefix, perm)
	}
	if err != nil {
		return err
	}
	tmp := s.RelOf(f.Name())
	err = chmodIfUmasked(f, perm)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil && d != Volatile {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = s.Rename(tmp, name)
	}
	if err != nil {
		s.RemoveOrLater(tmp) // A leftover dot-file is ignored by readers; see RemoveOrLater.
		return err
	}
	if d == Durable {
		dir, _, _ := split(name)
		if dir == "" {
			dir = "."
		}
		return s.SyncDir(dir)
	}
	return nil
}

// chmodIfUmasked gives a file just created with perm exactly perm, which
// the umask may have narrowed. It looks first (an fstat, which an NFS
// client answers from the attributes its create returned) and changes the
// mode only when it differs: a chmod on NFS is a round trip to the server,
// on every heartbeat, state and result write.
func chmodIfUmasked(f *os.File, perm os.FileMode) error {
	const bits = os.ModePerm | os.ModeSetuid | os.ModeSetgid | os.ModeSticky
	if fi, err := f.Stat(); err == nil && fi.Mode()&bits == perm&bits {
		return nil
	}
	return f.Chmod(perm)
}

// createTempTop is CreateTemp in the session directory itself.
func (s *Root) createTempTop(prefix string, perm os.FileMode) (*os.File, error) {
	for i := 0; ; i++ {
		f, err := s.OpenFile(prefix+strconv.FormatUint(rand.Uint64(), 36)+".tmp", os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
		if err == nil || !errors.Is(err, os.ErrExist) || i > 100 {
			return f, err
		}
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

// Stat describes the session directory the root holds.
func (s *Root) Stat() (os.FileInfo, error) {
	defer runtime.KeepAlive(s)
	var st syscall.Stat_t
	if err := syscall.Fstat(s.fd, &st); err != nil {
		return nil, &os.PathError{Op: "stat", Path: s.dir, Err: err}
	}
	return newFileInfo(path.Base(s.dir), &st), nil
}

// The cast in Lstat relies on both packages' Stat_t being the kernel's.
var _ = [1]struct{}{}[unsafe.Sizeof(unix.Stat_t{})-unsafe.Sizeof(syscall.Stat_t{})]

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

package fsq

import (
	"errors"
	"fmt"
	"os"
	"path"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

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
	r.mnt, r.hasMnt = mountID(fd) // The same mount as s's (openDir crosses none).
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

// Dir returns the directory the root was opened on, as given to OpenRoot.
func (s *Root) Dir() string { return s.dir }

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

// ProcAbs returns a path of name through the root's own descriptor,
// /proc/<pid>/fd/<fd>/name: it holds no character of the session
// directory's path (a space, a quote) and names the directory the root
// opened whatever renamed it since. Another process of the same user on
// this host can open it (a tool handed a path where no quoting exists).
func (s *Root) ProcAbs(name string) string {
	return "/proc/" + strconv.Itoa(os.Getpid()) + "/fd/" + strconv.Itoa(s.fd) + "/" + name
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

// The errors a root's operations wrap (test with errors.Is): each says
// what was refused, and that nothing was read, written or changed through
// it.
var (
	// ErrBadName reports a name the root refuses: absolute, empty, or
	// with a "." or ".." component.
	ErrBadName = errors.New("runner: not a plain path inside the session") // Worded as when it was the runner's.
	// ErrLayout reports that a directory on the way to a name is not a
	// plain directory of the session (a symlink, a file, a mount point,
	// or a path leaving it): the layout is broken, the operation was not
	// done, and it is worth retrying once the layout is fixed. It is not
	// ErrSymlink, which says the file itself is a symlink.
	ErrLayout = errors.New("a session directory on the path is a symlink or not a directory; nothing was written through it")
	// ErrSymlink reports a symlink at the last component of a name: it
	// was not followed.
	ErrSymlink = errors.New("fsq: refusing to follow a symlink")
	// ErrNotRegular reports a FIFO, socket, device or directory where a
	// regular file was to be read or written; it was not opened so as
	// to block (O_NONBLOCK).
	ErrNotRegular = errors.New("fsq: not a regular file")
	// ErrTooLarge reports a file bigger than ReadFile's limit; no more
	// than limit+1 bytes of it were read.
	ErrTooLarge = errors.New("fsq: file too large")
	// ErrHardLink reports a file opened for writing, appending or a
	// mode change that has more than one link: a hard link planted in
	// the session to a file elsewhere. Nothing was written or changed
	// through it.
	ErrHardLink = errors.New("fsq: refusing a file with more than one hard link")
)

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

// dirErr turns an error of openDir into one that wraps ErrLayout when the
// walk met a symlink or a non-directory.
func dirErr(err error) error {
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV) || errors.Is(err, unix.ENOTDIR) {
		return fmt.Errorf("%w (%v)", ErrLayout, err)
	}
	return err
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

// ForceWalk makes every root walk directories one component at a time, as
// where openat2 is missing (on), or try openat2 again (off). For tests.
func ForceWalk(on bool) { noOpenat2.Store(on) }

// noOpenat2 is set once openat2(2) turned out to be missing (ENOSYS) or
// refused by a seccomp filter (EPERM): then directories are walked one
// component at a time.
var noOpenat2 atomic.Bool

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
// too (ErrSymlink). Nothing else is added or checked: without O_NONBLOCK
// or O_EXCL a FIFO planted at name blocks the open, and any type of file
// is opened. OpenRegular, OpenAppend, OpenLog and CreateNew are the
// checked opens. The file is not registered with the runtime poller (see
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
	f, _, err := s.openRegularInfo(name, flag, perm)
	return f, err
}

// openRegularInfo is openRegular, returning the file's description too
// (the fstat it checked), so that a caller needs no second one.
func (s *Root) openRegularInfo(name string, flag int, perm os.FileMode) (*os.File, os.FileInfo, error) {
	f, err := s.OpenFile(name, flag|unix.O_NONBLOCK, perm)
	if err != nil {
		if errors.Is(err, unix.ENXIO) { // A FIFO without a reader, opened for writing.
			if fi, lerr := s.Lstat(name); lerr == nil && !fi.Mode().IsRegular() {
				return nil, nil, fmt.Errorf("%s: %w (%s)", s.Abs(name), ErrNotRegular, FileType(fi))
			}
		}
		return nil, nil, err
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
		return nil, nil, err
	}
	return f, fi, nil
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

package fsq

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/google/renameio/v2"
	"golang.org/x/sys/unix"
)

// Durability says how hard WriteAtomic works to survive a crash.
type Durability int

const (
	// Durable fsyncs the file before the rename and the directory after it:
	// after WriteAtomic returns, the new content survives a power loss.
	Durable Durability = iota
	// FileSynced fsyncs the file before the rename but not the directory: a
	// crash leaves the old or the new file, never a torn one, but the rename
	// itself may be lost.
	FileSynced
	// Volatile skips both fsyncs: readers still never see a partial file, but
	// a crash of the machine may lose it. For previews and heartbeats.
	Volatile
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
		return SyncDir(dir)
	}
	return nil
}

// SyncDir fsyncs a directory so that renames and creations in it are durable.
func SyncDir(dir string) error {
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

// Claim renames src to dst. It reports false, nil when src no longer exists
// (another process claimed it first, or it was withdrawn): losing that race
// is not an error. ESTALE from a network filesystem is retried once and then
// reported as a lost race if src is gone.
func Claim(src, dst string) (bool, error) {
	for attempt := 0; ; attempt++ {
		err := os.Rename(src, dst)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, os.ErrNotExist):
			// On NFS a retried rename can report ENOENT although it
			// succeeded: then dst exists and is ours.
			if attempt > 0 {
				if _, serr := os.Lstat(dst); serr == nil {
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
		return nil, fi, fmt.Errorf("%s: %w", path, ErrNotRegular)
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

// Errors of ReadFile.
var (
	ErrSymlink    = errors.New("fsq: refusing to follow a symlink")
	ErrNotRegular = errors.New("fsq: not a regular file")
	ErrTooLarge   = errors.New("fsq: file too large")
)

// writeVolatile is tmp + rename without fsync. The temp name is unique so
// that concurrent writers (masters on several hosts) never share one.
func writeVolatile(dir, path string, data []byte, perm os.FileMode) error {
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

// Prepared is new content written under a temporary name in the target's
// directory, not yet visible. Unlike renameio's PendingFile, whose
// CloseAtomicallyReplace always fsyncs right before the rename, it
// separates the two, so that a caller can fsync it alongside other files
// (the runner fsyncs a command's output and its result together) and
// rename when all are durable. Abort is a no-op after Commit.
type Prepared struct {
	f    *os.File
	tmp  string
	path string
}

// Prepare writes data to a new temporary dot-file beside path.
func Prepare(path string, data []byte, perm os.FileMode) (*Prepared, error) {
	dir, base := filepath.Split(path)
	var f *os.File
	var tmp string
	for i := 0; ; i++ {
		tmp = filepath.Join(dir, "."+base+"."+strconv.FormatUint(uint64(rand.Uint32()), 36)+".tmp")
		var err error
		f, err = CreateFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrExist) || i > 100 {
			return nil, err
		}
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, err
	}
	return &Prepared{f: f, tmp: tmp, path: path}, nil
}

// PrepareIn is Prepare writing into f, an empty file under a temporary
// name in path's directory (a spare from a Spares pool).
func PrepareIn(f *os.File, path string, data []byte) (*Prepared, error) {
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	return &Prepared{f: f, tmp: f.Name(), path: path}, nil
}

// Sync flushes the temporary file to stable storage.
func (p *Prepared) Sync() error { return p.f.Sync() }

// Commit closes the temporary file and renames it over the target: a
// reader sees the old content or the new. The directory is not fsynced;
// the caller does that (SyncDir) when the rename itself must be durable.
func (p *Prepared) Commit() error {
	if err := p.f.Close(); err != nil {
		os.Remove(p.tmp)
		return err
	}
	if err := os.Rename(p.tmp, p.path); err != nil {
		os.Remove(p.tmp)
		return err
	}
	p.f = nil
	return nil
}

// Abort removes the temporary file; a no-op after Commit.
func (p *Prepared) Abort() {
	if p.f != nil {
		p.f.Close()
		os.Remove(p.tmp)
		p.f = nil
	}
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

// TouchDir sets dir's modification time to the current time of the server
// that holds it (UTIME_NOW; on NFS, SET_TO_SERVER_TIME). NFS v3 clients
// detect directory changes by mtime, whose granularity on the server is
// coarse: if a directory changes twice within one tick and a client looks
// a name up in between, that client caches "absent" under an mtime that the
// second change does not alter, and stays blind to the new name until the
// directory changes again. Touching the directory a tick or more after a
// change that others wait for ends that blindness.
func TouchDir(dir string) error {
	now := []unix.Timespec{{Nsec: unix.UTIME_NOW}, {Nsec: unix.UTIME_NOW}}
	return unix.UtimesNanoAt(unix.AT_FDCWD, dir, now, 0)
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

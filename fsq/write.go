package fsq

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"strconv"
	"syscall"

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

// WriteAtomic replaces name with data so that a concurrent reader sees
// the old content or the new, never a mix, and gives it exactly perm
// (whatever the umask). The data goes to a new temporary file (O_EXCL)
// that is renamed onto name: whatever is at name (a planted symlink or
// FIFO included) is replaced, never followed or opened. The temporary
// file is a dot-file beside name (readers that skip dot-files never see
// it), removed on failure (RemoveOrLater). d says what is fsynced.
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

// Overwrite writes data over the start of the existing regular file
// name, in one write and in place: no temporary file, no new inode,
// nothing replaced or deleted. It is for hints that are rewritten often
// and whose readers survive any content (seq/hint): a reader may see old
// and new bytes mixed, which WriteAtomic never shows. The point is the
// cost: replacing a file deletes the old one, and where the filesystem
// discards freed blocks at once (ext4 mounted with discard and no
// journal) that deletion waits for the disk, 0.4-1.2 ms on the machines
// of BENCHMARKS.md against 0.03-0.1 ms for this write. It refuses, so
// that the caller replaces the file instead: a missing file
// (fs.ErrNotExist), one that is not regular (ErrNotRegular, a FIFO
// included: never blocked on), one with more than one link (ErrHardLink:
// a write would reach the other name's file), and one longer than data
// (ErrTooLarge: its tail would be left behind). A symlink is never
// followed.
func (s *Root) Overwrite(name string, data []byte) error {
	f, fi, err := s.openRegularInfo(name, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if fi.Size() > int64(len(data)) {
		return fmt.Errorf("%s: %w (%d bytes, more than the %d written over it)", s.Abs(name), ErrTooLarge, fi.Size(), len(data))
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		return err
	}
	return f.Close()
}

// WriteAtomicVia is WriteAtomic, Volatile, with the temporary file made
// in the directory tmpDir of the session rather than beside name: a
// writer killed between the write and the rename leaves its leftover in
// tmpDir, where its owner sweeps it, and never in a directory that others
// list.
func (s *Root) WriteAtomicVia(tmpDir, name string, data []byte, perm os.FileMode) error {
	return s.writeAtomic(tmpDir, name, data, perm, Volatile)
}

// WriteAtomicReaped is WriteAtomicVia, except that the file it replaces
// is not deleted by the rename: the new file is exchanged with it
// (renameat2 RENAME_EXCHANGE), which leaves the old one under the
// temporary name in tmpDir, and rp removes it there, off the caller's
// path. Readers see the old content or the new, as with WriteAtomic; one
// that opened the old file keeps reading it whole. The point is the
// caller's time: deleting a file that has blocks waits for the disk where
// the filesystem discards freed blocks at once (ext4 mounted with discard
// and no journal), 0.4 ms and more a rename over state.json on the
// machines of BENCHMARKS.md. Where there is nothing to exchange with
// (name missing) or the filesystem cannot exchange (NFS), it renames as
// WriteAtomicVia does, and so it does where a directory sits at name
// (the exchange is undone: the directory stays where it is, the write
// fails as a rename over it does). A nil rp is WriteAtomicVia.
func (s *Root) WriteAtomicReaped(tmpDir, name string, data []byte, perm os.FileMode, rp *Reaper) error {
	if rp == nil || noExchange.Load() {
		return s.writeAtomic(tmpDir, name, data, perm, Volatile)
	}
	tmp, err := s.writeTemp(tmpDir, name, data, perm, Volatile)
	if err != nil {
		return err
	}
	switch err = s.Exchange(tmp, name); {
	case err == nil:
		// The exchange swaps whatever was at name. A directory planted
		// there (a rename over it fails: EISDIR, ENOTEMPTY) goes back
		// where it was, so that it is never moved, and never emptied by
		// the sweep of tmpDir; the rename below then fails as before.
		if fi, lerr := s.Lstat(tmp); lerr != nil || !fi.IsDir() {
			rp.Reap(tmp) // The old file, now under the temporary name.
			return nil
		}
		if err = s.Exchange(tmp, name); err == nil {
			err = s.Rename(tmp, name)
		}
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, errors.ErrUnsupported):
		err = s.Rename(tmp, name)
	}
	if err != nil {
		s.RemoveOrLater(tmp)
	}
	return err
}

// writeAtomic is WriteAtomic with the temporary file in tmpDir ("." is
// the session directory itself).
func (s *Root) writeAtomic(tmpDir, name string, data []byte, perm os.FileMode, d Durability) error {
	tmp, err := s.writeTemp(tmpDir, name, data, perm, d)
	if err != nil {
		return err
	}
	if err := s.Rename(tmp, name); err != nil {
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

// writeTemp writes data to a new temporary file in tmpDir (a dot-file
// named after name's last component) with exactly perm, fsynced unless d
// is Volatile, and returns its name; on failure nothing is left (or it is
// left to RemoveOrLater).
func (s *Root) writeTemp(tmpDir, name string, data []byte, perm os.FileMode, d Durability) (string, error) {
	_, base, err := split(name)
	if err != nil {
		return "", &os.PathError{Op: "write", Path: name, Err: err}
	}
	prefix := "." + base + "."
	var f *os.File
	if tmpDir == "." {
		f, err = s.createTempTop(prefix, perm)
	} else {
		f, err = s.CreateTemp(tmpDir, prefix, perm)
	}
	if err != nil {
		return "", err
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
	if err != nil {
		s.RemoveOrLater(tmp)
		return "", err
	}
	return tmp, nil
}

// SetMode gives f, a file just created (or opened with O_CREATE), exactly
// perm whatever the umask took from it: a look first, a chmod only when
// the mode differs (chmodIfUmasked). WriteAtomic does it itself; a file
// made by OpenFile, CreateTemp or OpenAppend that others must read or
// write (a master's files: PROTOCOL.md 19.1) needs it.
func SetMode(f *os.File, perm os.FileMode) error { return chmodIfUmasked(f, perm) }

// MkdirPerm makes the directory name with exactly perm whatever the umask
// (a chmod after the mkdir when the umask narrowed it), keeping the setgid
// bit a group-shared parent passes on. An existing name is os.ErrExist,
// left as it is.
func (s *Root) MkdirPerm(name string, perm os.FileMode) error {
	if err := s.Mkdir(name, perm); err != nil {
		return err
	}
	fi, err := s.Lstat(name)
	if err != nil {
		return err
	}
	const bits = fs.ModePerm | fs.ModeSetgid | fs.ModeSetuid | fs.ModeSticky
	want := perm&bits | fi.Mode()&fs.ModeSetgid
	if fi.Mode()&bits == want {
		return nil
	}
	return s.Chmod(name, want)
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

// CreateTemp creates a new file in the directory dir named prefix + a
// random suffix (O_EXCL: nothing already there is opened), open for
// reading and writing, with perm narrowed by the umask.
func (s *Root) CreateTemp(dir, prefix string, perm os.FileMode) (*os.File, error) {
	for i := 0; ; i++ {
		f, err := s.OpenFile(dir+"/"+prefix+strconv.FormatUint(rand.Uint64(), 36), os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
		if err == nil || !errors.Is(err, os.ErrExist) || i > 100 {
			return f, err
		}
	}
}

// CreateNew creates name exclusively (O_EXCL, so a symlink or any file
// already there is never followed, opened or truncated), open for
// writing. Whatever is in the way is removed first: callers use it in
// directories only they write.
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

// OpenAppend opens name for appending, creating it with perm if missing.
// It refuses a symlink (ErrSymlink), anything but a regular file
// (ErrNotRegular; a FIFO planted at name does not block the open) and a
// file with more than one link (ErrHardLink).
func (s *Root) OpenAppend(name string, perm os.FileMode) (*os.File, error) {
	return s.openRegular(name, os.O_WRONLY|os.O_CREATE|os.O_APPEND, perm)
}

// OpenReadAppend is OpenAppend, open for reading too (a file whose torn
// last line its writer cuts before it appends).
func (s *Root) OpenReadAppend(name string, perm os.FileMode) (*os.File, error) {
	return s.openRegular(name, os.O_RDWR|os.O_CREATE|os.O_APPEND, perm)
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

// TouchDir sets the modification time of the directory name to the
// current time of the server that holds it (UTIME_NOW; on NFS,
// SET_TO_SERVER_TIME); a symlink at name is touched itself, never
// followed. NFS v3 clients detect directory changes by mtime, whose
// granularity on the server is coarse: if a directory changes twice
// within one tick and a client looks a name up in between, that client
// caches "absent" under an mtime that the second change does not alter,
// and stays blind to the new name until the directory changes again.
// Touching the directory a tick or more after a change that others wait
// for ends that blindness.
func (s *Root) TouchDir(name string) error {
	now := []unix.Timespec{{Nsec: unix.UTIME_NOW}, {Nsec: unix.UTIME_NOW}}
	return s.at("utimes", name, func(dfd int, base string) error {
		return unix.UtimesNanoAt(dfd, base, now, unix.AT_SYMLINK_NOFOLLOW)
	})
}

// SyncDir fsyncs the directory name so that renames and creations in it
// are durable. A filesystem that cannot sync a directory (EINVAL) is not
// an error.
func (s *Root) SyncDir(name string) error {
	f, err := s.OpenDir(name)
	if err != nil {
		return err
	}
	return syncDirFile(f)
}

// syncDirFile fsyncs and closes the open directory f; EINVAL (a
// filesystem that cannot sync a directory) is not an error.
func syncDirFile(f *os.File) error {
	err := f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, syscall.EINVAL) {
		return nil
	}
	return err
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
	err := s.at("removeall", name, func(dfd int, base string) error { return s.removeAllAt(dfd, base) })
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// removeAllAt removes base in the directory dfd and, if it is a
// directory, everything under it, opening each with O_NOFOLLOW; it does
// not descend into a directory on another mount (EXDEV).
func (s *Root) removeAllAt(dfd int, base string) error {
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
	if merr := s.sameMount(fd); merr != nil { // A bind mount: its tree is not the session's.
		unix.Close(fd)
		return merr
	}
	d := os.NewFile(uintptr(fd), base)
	var first error
	for {
		names, rerr := d.Readdirnames(256)
		for _, n := range names {
			if e := s.removeAllAt(fd, n); e != nil && first == nil {
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

// FSSync flushes the whole filesystem a session is on (syncfs(2)): every
// file's data and metadata written before the call, the session's and
// anyone else's, with one journal commit and one flush of the disk's
// cache, where fsyncing k files one by one costs up to k.
//
// Each FSSync holds a file description of its own, opened when it is
// made: syncfs reports a write-back error once per file description (the
// first caller after the error takes it), so each user of it needs its
// own, made before it writes what it will flush.
type FSSync struct{ f *os.File }

// ErrNoSyncFSErrors is returned by Root.NewFSSync on kernels older than
// 5.8, whose syncfs does not report write-back errors: a caller must then
// fsync file by file.
var ErrNoSyncFSErrors = errors.New("syncfs does not report write-back errors before Linux 5.8")

// NewFSSync opens an FSSync on the session's filesystem.
func (s *Root) NewFSSync() (*FSSync, error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return nil, fmt.Errorf("uname: %w", err)
	}
	if !kernelAtLeast(unix.ByteSliceToString(u.Release[:]), 5, 8) {
		return nil, ErrNoSyncFSErrors
	}
	f, err := s.OpenDir(".")
	if err != nil {
		return nil, err
	}
	return &FSSync{f: f}, nil
}

// kernelAtLeast reports whether the kernel release rel ("6.1.0-18-amd64")
// is major.minor or later; a release it cannot read is not.
func kernelAtLeast(rel string, major, minor int) bool {
	var a, b int
	if n, _ := fmt.Sscanf(rel, "%d.%d", &a, &b); n != 2 {
		return false
	}
	return a > major || (a == major && b >= minor)
}

// Sync runs syncfs; its error is any write-back error the filesystem saw
// since this FSSync last reported one (or was opened).
func (f *FSSync) Sync() error {
	return unix.Syncfs(int(f.f.Fd()))
}

// Close releases the file description.
func (f *FSSync) Close() error { return f.f.Close() }

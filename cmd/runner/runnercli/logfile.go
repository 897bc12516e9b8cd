package runnercli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/skillpilot/skillpilot/protocol"
	"golang.org/x/sys/unix"
)

// openLogFile opens the file of --log for appending (created 0640 if
// missing). It refuses, with words, what would hang the start or harm the
// session served at session:
//
//   - a FIFO nobody reads (opened without blocking: ENXIO), where a
//     blocking open would wait for ever before the first message;
//   - anything but a regular file, a FIFO with a reader or a character
//     device (a terminal, /dev/null);
//   - a path inside one of the session's directories (tmp/ is emptied at
//     start, log/ holds the event log and the spool, the rest belongs to
//     the protocol), by identity, so a symlinked path or ".." is no way
//     around it; the top of the session directory is allowed;
//   - a file that is one of the session's own files under another name
//     (a hard link to log/meta.log, say).
//
// Nothing is created or written before these checks pass.
func openLogFile(p, session string) (*os.File, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return nil, err
	}
	if d, ok := sessionDirOf(filepath.Dir(abs), session); ok {
		return nil, fmt.Errorf("%s is inside the session's %s/ directory, which belongs to the session (tmp/ is emptied at start, log/ holds the event log): give a path outside the session's directories", p, d)
	}
	fd, err := unix.Open(abs, unix.O_WRONLY|unix.O_APPEND|unix.O_CREAT|unix.O_NONBLOCK|unix.O_CLOEXEC, 0o640)
	if errors.Is(err, unix.ENXIO) {
		return nil, fmt.Errorf("%s is a FIFO that nobody reads: start its reader first, or give a regular file", p)
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
	f := os.NewFile(uintptr(fd), abs)
	// A symlink on the way (the last component included) may lead into
	// the session: judge where the file really is, before anything is
	// written to it.
	if real, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd)); err == nil && filepath.IsAbs(real) {
		if d, ok := sessionDirOf(filepath.Dir(real), session); ok {
			f.Close()
			return nil, fmt.Errorf("%s leads to %s, inside the session's %s/ directory, which belongs to the session: give a path outside the session's directories", p, real, d)
		}
	}
	if err := checkLogFile(f, p, session); err != nil {
		f.Close()
		return nil, err
	}
	// Log writes block as they always did (a slow FIFO reader slows the
	// runner down rather than losing lines).
	if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err == nil {
		_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl&^unix.O_NONBLOCK)
	}
	return f, nil
}

// checkLogFile checks the opened --log file's kind and that it is none of
// the session's files.
func checkLogFile(f *os.File, p, session string) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	m := fi.Mode()
	if !m.IsRegular() && m&os.ModeNamedPipe == 0 && m&os.ModeCharDevice == 0 {
		return fmt.Errorf("%s is not a regular file, a FIFO or a terminal: give a regular file", p)
	}
	if !m.IsRegular() {
		return nil
	}
	for _, name := range []string{protocol.FileMeta, protocol.FileSpool, protocol.FileLock, protocol.FileState, protocol.FileHeartbeat} {
		if sfi, err := os.Lstat(filepath.Join(session, filepath.FromSlash(name))); err == nil && os.SameFile(fi, sfi) {
			return fmt.Errorf("%s is the session's %s under another name (a hard link): give a file of its own", p, name)
		}
	}
	return nil
}

// sessionDirOf reports which of the session's directories holds the
// directory dir (dir itself or an ancestor of it is that directory), by
// device and inode. A session or a dir that does not exist holds nothing.
func sessionDirOf(dir, session string) (string, bool) {
	type id struct{ dev, ino uint64 }
	dirs := map[id]string{}
	for _, d := range protocol.Dirs {
		var st syscall.Stat_t
		if syscall.Stat(filepath.Join(session, filepath.FromSlash(d)), &st) == nil {
			dirs[id{st.Dev, st.Ino}] = d
		}
	}
	if len(dirs) == 0 {
		return "", false
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", false // Then the open fails and says why.
	}
	for {
		var st syscall.Stat_t
		if syscall.Stat(real, &st) == nil {
			if d, ok := dirs[id{st.Dev, st.Ino}]; ok {
				return d, true
			}
		}
		up := filepath.Dir(real)
		if up == real {
			return "", false
		}
		real = up
	}
}

package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"syscall"

	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/protocol"
)

// The trust model (PROTOCOL.md, "Trust and permissions"): a session
// directory belongs to the user the runner runs as. Masters of that user
// (or, in a group-shared session, of its group) write queue/, ctl/, seq/
// and state/lease.json; only the runner writes anything else. A session is
// group-shared when its directory has the setgid bit (chmod g+s): then the
// directories masters write are 2770, the runner's own 2750, and the
// runner's files 0640. Otherwise it is private: 0700 and 0600.

// ErrUntrusted reports a session directory the runner refuses to serve:
// someone other than its owner could make it run commands.
var ErrUntrusted = errors.New("runner: refusing an unsafe session directory")

// layoutState is what the runner knows of the session directory's
// layout: the modes it uses, and why the session cannot be used.
type layoutState struct {
	perms    perms // modes of the session's directories and the runner's files
	err      error // why the session directory cannot be used (nil: fine)
	warnings []trustWarning
}

// setErr records why the session directory cannot be used (nil: it can)
// and returns what was recorded before.
func (l *layoutState) setErr(err error) (was error) {
	was, l.err = l.err, err
	return was
}

// repair recreates the session's missing directories and checks each one,
// with one look at each. It returns those it created and the first
// problem.
func (l *layoutState) repair(root *fsq.Root, hold *sessionHold) (created []string, err error) {
	created, infos, err := ensureLayoutInfo(root, l.perms, func(d string) error { return hold.mayRecreate(root, d) })
	if err == nil {
		for i, d := range protocol.Dirs {
			if infos[i] == nil { // Created just now: look at what is there.
				err = checkSubdir(root, d, l.perms, runnerEUID())
			} else {
				err = checkSubdirInfo(root, d, infos[i], l.perms, runnerEUID())
			}
			if err != nil {
				break
			}
		}
	}
	return created, err
}

// perms are the modes a session's directories and the runner's files get.
type perms struct {
	shared bool
	file   os.FileMode // runner files
}

func (p perms) dir(d string) os.FileMode { return protocol.DirMode(d, p.shared) }

// createSession creates the session directory itself (its parent must
// exist) if it is missing, with mode 0700.
func createSession(dir string) error {
	err := os.Mkdir(dir, 0o700)
	switch {
	case err == nil, errors.Is(err, fs.ErrExist):
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("runner: cannot create the session directory %s: its parent directory does not exist (create it first)", dir)
	}
	return fmt.Errorf("runner: create session: %w", err)
}

// makeLayout creates the session directory (if missing; its parent must
// exist) and every subdirectory with the documented modes.
func makeLayout(dir string) error {
	if err := createSession(dir); err != nil {
		return err
	}
	root, err := fsq.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	p := perms{file: 0o600}
	if fi, err := root.Stat(); err == nil && fi.Mode()&fs.ModeSetgid != 0 {
		p = perms{shared: true, file: 0o640}
	}
	_, err = ensureLayout(root, p)
	return err
}

// ensureLayout creates missing subdirectories with their documented
// modes, and reports which it created. It fails on a subdirectory it
// cannot use: a symlink, a file, or one it cannot create.
func ensureLayout(root *fsq.Root, p perms) (created []string, err error) {
	created, _, err = ensureLayoutInfo(root, p, nil)
	return created, err
}

// ensureLayoutInfo is ensureLayout that also returns what it saw of each
// directory of protocol.Dirs (nil for one it created), so that the
// heartbeat's trust checks need no second look. A non-nil guard is asked
// before each directory is made (sessionHold.mayRecreate, while the runner
// runs): its error is returned and nothing more is made.
func ensureLayoutInfo(root *fsq.Root, p perms, guard func(d string) error) (created []string, infos []os.FileInfo, err error) {
	infos = make([]os.FileInfo, len(protocol.Dirs))
	for i, d := range protocol.Dirs {
		fi, lerr := root.Lstat(d)
		switch {
		case lerr == nil && fi.IsDir():
			infos[i] = fi
			continue
		case lerr == nil:
			return created, infos, fmt.Errorf("%w: %s/ is %s, not a directory: remove it", ErrUntrusted, d, fileKind(fi))
		case !errors.Is(lerr, fs.ErrNotExist):
			return created, infos, fmt.Errorf("runner: %s/: %w", d, lerr)
		}
		if guard != nil {
			if err := guard(d); err != nil {
				return created, infos, err
			}
		}
		if err := root.Mkdir(d, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return created, infos, fmt.Errorf("runner: cannot create %s/: %w", d, err)
		}
		// Mkdir applies the umask and never sets setgid explicitly.
		if err := root.Chmod(d, p.dir(d)); err != nil {
			return created, infos, fmt.Errorf("runner: cannot set the mode of %s/: %w", d, err)
		}
		created = append(created, d)
	}
	return created, infos, nil
}

func fileKind(fi os.FileInfo) string {
	m := fi.Mode()
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symlink"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m.IsDir():
		return "a directory"
	case m.IsRegular():
		return "a regular file"
	}
	return "a special file"
}

// runnerEUID is the runner's effective uid (asked once: the trust checks
// run on every heartbeat and before every command).
var runnerEUID = sync.OnceValue(os.Geteuid)

// trustWarning is something the runner tolerates but reports.
type trustWarning string

// checkTrust decides whether the runner may serve dir (it must exist), and
// returns the modes to use. It refuses (ErrUntrusted, with a message that
// says how to fix it):
//   - a session directory or subdirectory owned by another user (root
//     included: a root runner never serves another user's directory);
//   - anything writable by others (o+w);
//   - a session directory writable by its group without the setgid bit,
//     and a runner-owned subdirectory writable by its group at all;
//   - a subdirectory that is a symlink or not a directory.
//
// It warns about a session others can read or enter (their outputs are
// readable), and about a shared session whose group cannot use it.
func checkTrust(root *fsq.Root) (perms, []trustWarning, error) {
	var p perms
	var warns []trustWarning
	dir := root.Abs(".")
	fi, err := root.Stat()
	if err != nil {
		return p, nil, fmt.Errorf("runner: session: %w", err)
	}
	if !fi.IsDir() {
		return p, nil, fmt.Errorf("%w: %s is not a directory", ErrUntrusted, dir)
	}
	euid := os.Geteuid()
	st, ok := fi.Sys().(*syscall.Stat_t)
	if ok && int(st.Uid) != euid {
		return p, nil, fmt.Errorf("%w: %s is owned by uid %d but the runner runs as uid %d: run the runner as the directory's owner, or give the directory to the runner's user (chown)",
			ErrUntrusted, dir, st.Uid, euid)
	}
	mode := fi.Mode()
	p.shared = mode&fs.ModeSetgid != 0
	p.file = 0o600
	if p.shared {
		p.file = 0o640
	}
	switch {
	case mode&0o002 != 0:
		return p, nil, fmt.Errorf("%w: %s is writable by others (mode %v): chmod o-w %s", ErrUntrusted, dir, mode.Perm(), dir)
	case mode&0o020 != 0 && !p.shared:
		return p, nil, fmt.Errorf("%w: %s is writable by its group but not marked shared (mode %v): chmod g-w %s for a private session, or chmod g+s %s to share it with its group (PROTOCOL.md, \"Trust and permissions\")",
			ErrUntrusted, dir, mode.Perm(), dir, dir)
	}
	if mode&0o007 != 0 {
		warns = append(warns, trustWarning(fmt.Sprintf("%s can be read by others (mode %v): their commands' outputs are readable; chmod o-rwx %s", dir, mode.Perm(), dir)))
	}
	if p.shared && mode&0o070 != 0o070 {
		warns = append(warns, trustWarning(fmt.Sprintf("%s is marked shared (setgid) but its group lacks rwx (mode %v): chmod g+rwx %s", dir, mode.Perm(), dir)))
	}
	for _, d := range protocol.Dirs {
		if err := checkSubdir(root, d, p, euid); err != nil {
			return p, warns, err
		}
	}
	return p, warns, nil
}

// checkSubdir applies the trust rules to one subdirectory (missing is fine:
// it is created).
func checkSubdir(root *fsq.Root, d string, p perms, euid int) error {
	fi, err := root.Lstat(d)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("runner: %s/: %w", d, err)
	}
	return checkSubdirInfo(root, d, fi, p, euid)
}

// checkSubdirInfo is checkSubdir on what a look at d found.
func checkSubdirInfo(root *fsq.Root, d string, fi os.FileInfo, p perms, euid int) error {
	path := root.Abs(d)
	if !fi.IsDir() {
		return fmt.Errorf("%w: %s/ is %s, not a directory: remove it (the runner recreates it)", ErrUntrusted, d, fileKind(fi))
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if ok && int(st.Uid) != euid && !(p.shared && protocol.IsMasterDir(d)) {
		return fmt.Errorf("%w: %s is owned by uid %d, not by the runner's uid %d: remove it (the runner recreates it) or chown it",
			ErrUntrusted, path, st.Uid, euid)
	}
	mode := fi.Mode()
	switch {
	case mode&0o002 != 0:
		return fmt.Errorf("%w: %s is writable by others (mode %v): chmod o-w %s", ErrUntrusted, path, mode.Perm(), path)
	case mode&0o020 != 0 && !(p.shared && protocol.IsMasterDir(d)):
		return fmt.Errorf("%w: %s is writable by its group (mode %v), and only the runner may write it: chmod g-w %s",
			ErrUntrusted, path, mode.Perm(), path)
	}
	return nil
}

// checkLayout runs on every heartbeat: it recreates a session directory
// someone deleted (with a warning event) and reports one it cannot use.
// While it fails, no command starts and the phase is error with the
// reason; the heartbeat keeps beating.
//
// It also notices the session's path no longer naming the directory the
// runner holds open (renamed, removed or replaced: fsq.Root.Moved);
// that is reported the same way, and nothing is written at the new path.
func (r *Runner) checkLayout() {
	if err := r.root.Moved(); err != nil {
		r.setLayoutErr(fmt.Errorf("runner: %w", err))
		return
	}
	if why := r.hold.lockGone(r.root); why != "" { // An rm -rf under way: stop, make nothing.
		r.checkSessionLost()
		r.setLayoutErr(fmt.Errorf("runner: %s", why))
		return
	}
	// One look at each directory serves both the repair and the trust
	// checks (this runs on every heartbeat).
	created, err := r.layout.repair(r.root, r.hold)
	for _, d := range created {
		r.log.Warn("recreated a deleted session directory", "dir", d)
		r.event(protocol.Event{Event: protocol.EvWarning, Detail: map[string]any{"recreated": d + "/"}})
		if d == protocol.DirLog || d == protocol.DirRejected {
			if lerr := r.reopenLogs(); err == nil {
				err = lerr
			}
		}
	}
	// One verdict per heartbeat, logs included: judging the directories
	// "usable again" and then the logs unusable flapped the phase and
	// wrote two events on every heartbeat while a FIFO sat in log/.
	if lerr := r.reopenLogsIfGone(); err == nil {
		err = lerr
	}
	if err == nil {
		r.root.SweepLater() // Temp files left while tmp/ was unreachable.
	}
	r.setLayoutErr(err)
}

// setLayoutErr records whether the layout is usable, with an event and a
// log line when that changes.
func (r *Runner) setLayoutErr(err error) {
	was := r.layout.setErr(err)
	switch {
	case err != nil && (was == nil || was.Error() != err.Error()):
		r.log.Error("the session directory cannot be used", "err", err)
		r.event(protocol.Event{Event: protocol.EvWarning, Detail: map[string]any{"layout": err.Error()}})
	case err == nil && was != nil:
		r.log.Info("the session directory is usable again")
		r.event(protocol.Event{Event: protocol.EvWarning, Detail: map[string]any{"layout": "usable again"}})
	}
}

// ownDir checks, just before a result is put into it, that the runner-only
// directory d is still the runner's: owned by its user and writable by
// nobody else. The heartbeat's layout check would see another user's
// directory swapped in only at the next beat; meanwhile a runner running as
// root (whose writes no mode stops) would put results into it. What stands
// between this look and the rename is a window of one system call, not of
// a heartbeat. A missing d is for the caller to handle (ENOENT).
func ownDir(s *fsq.Root, d string) error {
	fi, err := s.Lstat(d)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("%w: %s/ is %s, not a directory: remove it (the runner recreates it)", ErrUntrusted, d, fileKind(fi))
	case ok && int(st.Uid) != runnerEUID():
		return fmt.Errorf("%w: %s is owned by uid %d, not by the runner's uid %d: nothing is written into it; remove it (the runner recreates it) or chown it",
			ErrUntrusted, s.Abs(d), st.Uid, runnerEUID())
	case fi.Mode()&0o022 != 0:
		return fmt.Errorf("%w: %s is writable by others than the runner (mode %v): nothing is written into it; chmod go-w %s",
			ErrUntrusted, s.Abs(d), fi.Mode().Perm(), s.Abs(d))
	}
	return nil
}

package runner

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// ptyTerm is a tool process on a pseudo-terminal, in its own session
// and process group, started with echo off and a wide window. Its reader
// goroutine sends output until end of stream or Close; its waiter
// goroutine reports the exit once the process is reaped. Neither can block
// forever on a send: both stop when the terminal is closed.
type ptyTerm struct {
	cmd     *exec.Cmd
	ptmx    *os.File // non-blocking, so that Close interrupts a pending Read
	pid     int
	started uint64
	out     chan chunk
	exited  chan toolExit
	done    chan struct{} // closed by Close
	readers sync.WaitGroup
	once    sync.Once
}

// procStarter starts tool processes from one OS thread that stays alive
// for the runner's whole life. The tool gets SIGKILL as its parent-death
// signal, and on Linux that signal fires when the *thread* that forked the
// child exits (see syscall.SysProcAttr.Pdeathsig): a child forked from an
// ordinary goroutine would be killed whenever the Go scheduler retires
// that thread. Locking the starter goroutine to its thread, and never
// unlocking it, ties the tool's life to the runner's: if the runner dies
// (even by SIGKILL), the kernel kills the tool, whatever signals it
// ignores. A tool's own children are not covered; the next runner kills
// the previous tool's process group (see killPreviousTool).
type procStarter struct {
	reqs chan startReq
	done chan struct{}
	once sync.Once
}

type startReq struct {
	cmd *exec.Cmd
	res chan error
}

func newProcStarter() *procStarter {
	p := &procStarter{reqs: make(chan startReq), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		runtime.LockOSThread()
		// Deliberately never unlocked: when this goroutine returns, its
		// thread exits with it, and any tool still alive gets its
		// parent-death signal.
		for r := range p.reqs {
			r.res <- r.cmd.Start()
		}
	}()
	return p
}

// start runs cmd.Start on the starter's thread.
func (p *procStarter) start(cmd *exec.Cmd) error {
	res := make(chan error, 1)
	select {
	case p.reqs <- startReq{cmd, res}:
		return <-res
	case <-p.done:
		return errors.New("runner: the process starter is closed")
	}
}

// close ends the starter's thread.
func (p *procStarter) close() {
	p.once.Do(func() { close(p.reqs) })
	<-p.done
}

// ptyStarter returns a termStarter that starts tools on PTYs from p.
func ptyStarter(p *procStarter) termStarter {
	return func(spec termSpec) (toolTerm, error) { return startPTY(p, spec) }
}

func startPTY(p *procStarter, spec termSpec) (toolTerm, error) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		return nil, fmt.Errorf("open pty: %w", err)
	}
	defer tty.Close() // The child holds its own copy.
	master, err := nonBlocking(ptmx)
	if err != nil {
		return nil, err
	}
	if err := setWinsize(master, spec.Cols, spec.Rows); err != nil {
		master.Close()
		return nil, err
	}
	if err := setTermios(tty); err != nil {
		master.Close()
		return nil, err
	}
	cmd := exec.Command(spec.Argv[0], spec.Argv[1:]...)
	cmd.Env, cmd.Dir = spec.Env, spec.Dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Pdeathsig: syscall.SIGKILL}
	if err := p.start(cmd); err != nil {
		master.Close()
		return nil, fmt.Errorf("start %s: %w", spec.Argv[0], err)
	}
	s := &ptyTerm{cmd: cmd, ptmx: master, pid: cmd.Process.Pid, out: make(chan chunk, 16),
		exited: make(chan toolExit, 1), done: make(chan struct{})}
	if st, err := readProcStat(s.pid); err == nil {
		s.started = st.startTime
	}
	s.readers.Add(1)
	go s.readLoop()
	go s.wait()
	return s, nil
}

// nonBlocking returns a non-blocking duplicate of f and closes f. creack/pty
// leaves the master in blocking mode (it calls Fd), where a Read that
// nothing will ever satisfy — a daemonised grandchild keeps the terminal
// open — cannot be interrupted. A non-blocking descriptor is served by the
// runtime's poller, and Close then ends a pending Read at once.
func nonBlocking(f *os.File) (*os.File, error) {
	defer f.Close()
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("dup pty: %w", err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("pty: %w", err)
	}
	return os.NewFile(uintptr(fd), "/dev/ptmx"), nil
}

// setTermios turns echo off (the runner's typed lines are not output) and
// output post-processing off, so that what the tool writes reaches the
// runner byte for byte: with ONLCR the terminal would turn every "\n" into
// "\r\n", and a "\r" the tool printed before a newline could no longer be
// told from the one the terminal added.
func setTermios(tty *os.File) error {
	fd := int(tty.Fd())
	tio, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return fmt.Errorf("termios: %w", err)
	}
	clearModes(tio)
	return unix.IoctlSetTermios(fd, unix.TCSETS, tio)
}

func setWinsize(f *os.File, cols, rows int) error {
	c, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ierr error
	err = c.Control(func(fd uintptr) {
		ierr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Col: uint16(cols), Row: uint16(rows)})
	})
	if err == nil {
		err = ierr
	}
	if err != nil {
		return fmt.Errorf("size pty: %w", err)
	}
	return nil
}

// readLoop reads the PTY until end of stream or Close. On Linux a read of
// the master after the last slave descriptor closes returns EIO: that is
// the end of the stream.
func (s *ptyTerm) readLoop() {
	defer s.readers.Done()
	defer close(s.out)
	for {
		buf := chunkPool.Get().(*[]byte)
		n, err := s.ptmx.Read(*buf)
		if n > 0 {
			select {
			case s.out <- chunk{buf: buf, n: n}:
			case <-s.done:
				chunkPool.Put(buf)
				return
			}
		} else {
			chunkPool.Put(buf)
		}
		if err != nil {
			return // EIO, EOF, or closed: the stream is over.
		}
	}
}

func (s *ptyTerm) wait() {
	err := s.cmd.Wait()
	ex := toolExit{err: err}
	if ps := s.cmd.ProcessState; ps != nil {
		ex.err = nil
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			ex.signal = unix.SignalName(ws.Signal())
		} else {
			c := ps.ExitCode()
			ex.code = &c
		}
	}
	s.exited <- ex // Buffered: never blocks.
}

func (s *ptyTerm) Output() <-chan chunk    { return s.out }
func (s *ptyTerm) Exited() <-chan toolExit { return s.exited }
func (s *ptyTerm) Pid() int                { return s.pid }
func (s *ptyTerm) StartTime() uint64       { return s.started }

// Write writes what the terminal takes of p now: the master is
// non-blocking, and a write it cannot take (EAGAIN) is not waited for.
func (s *ptyTerm) Write(p []byte) (int, error) {
	c, err := s.ptmx.SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int
	var werr error
	if err := c.Write(func(fd uintptr) bool {
		n, werr = unix.Write(int(fd), p)
		return true // Never wait for the poller.
	}); err != nil {
		return 0, err
	}
	if werr != nil {
		if errors.Is(werr, unix.EAGAIN) {
			return 0, nil
		}
		return 0, werr
	}
	return n, nil
}

// peer runs f on a descriptor of the terminal's slave side, the tool's
// terminal, opened from the master (TIOCGPTPEER, so that it is this
// terminal's and no other's, whatever reused its /dev/pts name) and closed
// right after: the runner holding it would keep the master from seeing the
// end of the stream.
func (s *ptyTerm) peer(f func(fd int) error) error {
	c, err := s.ptmx.SyscallConn()
	if err != nil {
		return err
	}
	pfd := -1
	var perr error
	if err := c.Control(func(fd uintptr) {
		r, _, errno := unix.Syscall(unix.SYS_IOCTL, fd, unix.TIOCGPTPEER, uintptr(unix.O_RDWR|unix.O_NOCTTY|unix.O_NONBLOCK|unix.O_CLOEXEC))
		if errno != 0 {
			perr = errno
			return
		}
		pfd = int(r)
	}); err != nil {
		return err
	}
	if perr != nil {
		return fmt.Errorf("the tool's terminal: %w", perr)
	}
	defer unix.Close(pfd)
	return f(pfd)
}

// PendingInput reads the tool's terminal's input queue (TIOCINQ).
func (s *ptyTerm) PendingInput() (int, error) {
	var n int
	err := s.peer(func(fd int) error {
		var err error
		n, err = unix.IoctlGetInt(fd, unix.TIOCINQ)
		return err
	})
	return n, err
}

// Activity reads what the terminal's foreground process group is doing,
// from /proc.
func (s *ptyTerm) Activity() (fgActivity, error) { return readActivity(s.foreground()) }

// FlushInput empties the tool's terminal's input queue (tcflush TCIFLUSH).
func (s *ptyTerm) FlushInput() error {
	return s.peer(func(fd int) error { return unix.IoctlSetInt(fd, unix.TCFLSH, unix.TCIFLUSH) })
}

// foreground returns the terminal's foreground process group (the tool's
// own when nothing else is in the foreground).
func (s *ptyTerm) foreground() int {
	pgrp := s.pid
	if c, err := s.ptmx.SyscallConn(); err == nil {
		_ = c.Control(func(fd uintptr) {
			if p, err := unix.IoctlGetInt(int(fd), unix.TIOCGPGRP); err == nil && p > 0 {
				pgrp = p
			}
		})
	}
	return pgrp
}

// Interrupt sends SIGINT to the terminal's foreground process group, which
// is what a user's Ctrl-C does. Writing 0x03 would depend on ISIG and would
// flush typed-ahead input.
func (s *ptyTerm) Interrupt() error { return unix.Kill(-s.foreground(), unix.SIGINT) }

func (s *ptyTerm) Signal(sig syscall.Signal) error {
	err := unix.Kill(-s.pid, sig)
	if fg := s.foreground(); fg != s.pid {
		_ = unix.Kill(-fg, sig) // A job the tool started; ESRCH when gone.
	}
	if errors.Is(err, unix.ESRCH) {
		return nil // Already gone.
	}
	return err
}

func (s *ptyTerm) Resize(cols, rows int) error { return setWinsize(s.ptmx, cols, rows) }

// SignalForeground sends sig to the terminal's foreground process group.
func (s *ptyTerm) SignalForeground(sig syscall.Signal) error {
	return unix.Kill(-s.foreground(), sig)
}

// Input writes p to the PTY master. The master is non-blocking and served
// by the runtime's poller, so a write the terminal cannot take yet parks
// until it can; closing abort sets a write deadline in the past, which
// ends it at once with the count written so far.
func (s *ptyTerm) Input(p []byte, abort <-chan struct{}) (int, error) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-abort:
			_ = s.ptmx.SetWriteDeadline(time.Unix(1, 0))
		case <-stop:
		}
	}()
	n, err := s.ptmx.Write(p)
	close(stop)
	wg.Wait()
	_ = s.ptmx.SetWriteDeadline(time.Time{}) // For the runner's own lines.
	return n, err
}

// Echo reads the terminal's ECHO flag. On Linux, TCGETS on a PTY master
// returns the settings of its slave, the tool's terminal.
func (s *ptyTerm) Echo() (bool, error) {
	c, err := s.ptmx.SyscallConn()
	if err != nil {
		return false, err
	}
	var tio *unix.Termios
	var ierr error
	if err := c.Control(func(fd uintptr) { tio, ierr = unix.IoctlGetTermios(int(fd), unix.TCGETS) }); err != nil {
		return false, err
	}
	if ierr != nil {
		return false, fmt.Errorf("termios: %w", ierr)
	}
	return tio.Lflag&unix.ECHO != 0, nil
}

// RestoreModes clears the echo and output post-processing flags setTermios
// cleared at start, where the tool turned them back on. On Linux, termios
// ioctls on a PTY master act on its slave, the tool's terminal.
func (s *ptyTerm) RestoreModes() (string, error) {
	c, err := s.ptmx.SyscallConn()
	if err != nil {
		return "", err
	}
	var changed string
	var ierr error
	if err := c.Control(func(fd uintptr) {
		var tio *unix.Termios
		if tio, ierr = unix.IoctlGetTermios(int(fd), unix.TCGETS); ierr != nil {
			return
		}
		if changed = modesChanged(tio); changed != "" {
			clearModes(tio)
			ierr = unix.IoctlSetTermios(int(fd), unix.TCSETS, tio)
		}
	}); err != nil {
		return "", err
	}
	if ierr != nil {
		return "", fmt.Errorf("termios: %w", ierr)
	}
	return changed, nil
}

// modesChanged names the flags among those clearModes clears that are
// set, and the special characters it would put back (kill='_').
func modesChanged(tio *unix.Termios) string {
	var on []string
	for _, f := range []struct {
		set  bool
		name string
	}{
		{tio.Lflag&unix.ECHO != 0, "echo"}, {tio.Lflag&unix.ECHONL != 0, "echonl"},
		{tio.Oflag&unix.ONLCR != 0, "onlcr"}, {tio.Oflag&unix.OCRNL != 0, "ocrnl"}, {tio.Oflag&unix.ONLRET != 0, "onlret"},
	} {
		if f.set {
			on = append(on, f.name)
		}
	}
	for _, c := range specialChars {
		if v := tio.Cc[c.index]; typedByte(v) {
			on = append(on, fmt.Sprintf("%s=%q", c.name, rune(v)))
		}
	}
	return strings.Join(on, ",")
}

// specialChars are the terminal's special characters and their Linux
// defaults. One set to a byte the runner types (`stty kill _`, `stty
// intr ^J`) would edit or cut every line it types from then on, or signal
// the tool, and the next command would never begin (clearModes puts the
// default back).
var specialChars = []struct {
	index int
	name  string
	def   uint8
}{
	{unix.VINTR, "intr", 0x03}, {unix.VQUIT, "quit", 0x1c}, {unix.VERASE, "erase", 0x7f},
	{unix.VKILL, "kill", 0x15}, {unix.VEOF, "eof", 0x04}, {unix.VEOL, "eol", 0},
	{unix.VEOL2, "eol2", 0}, {unix.VSTART, "start", 0x11}, {unix.VSTOP, "stop", 0x13},
	{unix.VSUSP, "susp", 0x1a}, {unix.VREPRINT, "rprnt", 0x12}, {unix.VWERASE, "werase", 0x17},
	{unix.VLNEXT, "lnext", 0x16}, {unix.VDISCARD, "discard", 0x0f},
}

// typedByte reports whether b can occur in a line the runner types:
// printable ASCII, or the newline that ends it.
func typedByte(b uint8) bool { return b >= 0x20 && b < 0x7f || b == '\n' || b == '\r' }

// Close releases the PTY master: every process still holding the terminal
// gets a hangup, and the reader stops. It waits for the reader goroutine.
func (s *ptyTerm) Close() error {
	var err error
	s.once.Do(func() {
		close(s.done)
		err = s.ptmx.Close()
		s.readers.Wait()
	})
	return err
}

// clearModes turns off echo and the output post-processing that would
// change the tool's bytes (setTermios), and puts back the default of a
// special character set to a byte the runner types (specialChars).
func clearModes(tio *unix.Termios) {
	tio.Lflag &^= unix.ECHO | unix.ECHONL
	tio.Oflag &^= unix.ONLCR | unix.OCRNL | unix.ONLRET
	for _, c := range specialChars {
		if typedByte(tio.Cc[c.index]) {
			tio.Cc[c.index] = c.def
		}
	}
}

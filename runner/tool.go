package runner

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// chunkSize is the PTY read size. Linux PTYs hand out at most 4 KiB per
// read in practice; a larger buffer costs nothing and helps when they do
// more.
const chunkSize = 32 << 10

var chunkPool = sync.Pool{New: func() any { b := make([]byte, chunkSize); return &b }}

// chunk is bytes read from the tool's PTY. The receiver returns buf to
// chunkPool when done.
type chunk struct {
	buf  *[]byte
	n    int
	tool *tool
}

func (c chunk) bytes() []byte { return (*c.buf)[:c.n] }

// toolExit reports the end of a tool process.
type toolExit struct {
	tool  *tool
	state *os.ProcessState
	err   error
}

// tool is one tool process on a PTY, in its own session and process group.
// Its reader goroutine sends output on chunks until EOF (EIO); its waiter
// goroutine sends on exited once the process has been reaped.
type tool struct {
	cmd     *exec.Cmd
	ptmx    *os.File
	pid     int
	started time.Time
	readEOF chan struct{} // closed when the reader has seen EOF
}

// startTool starts argv on a new PTY with echo off and a wide window.
func startTool(argv []string, env []string, dir string, chunks chan<- chunk, exited chan<- toolExit) (*tool, error) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		return nil, fmt.Errorf("open pty: %w", err)
	}
	defer tty.Close() // The child holds its own copy.
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: 50, Cols: 512}); err != nil {
		ptmx.Close()
		return nil, fmt.Errorf("size pty: %w", err)
	}
	if err := setEcho(tty, false); err != nil {
		ptmx.Close()
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Dir = env, dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		ptmx.Close()
		return nil, fmt.Errorf("start %s: %w", argv[0], err)
	}
	t := &tool{cmd: cmd, ptmx: ptmx, pid: cmd.Process.Pid, started: time.Now(), readEOF: make(chan struct{})}
	go t.readLoop(chunks)
	go func() {
		err := cmd.Wait()
		exited <- toolExit{tool: t, state: cmd.ProcessState, err: err}
	}()
	return t, nil
}

func setEcho(tty *os.File, on bool) error {
	fd := int(tty.Fd())
	tio, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return fmt.Errorf("termios: %w", err)
	}
	if on {
		tio.Lflag |= unix.ECHO
	} else {
		tio.Lflag &^= unix.ECHO | unix.ECHONL
	}
	return unix.IoctlSetTermios(fd, unix.TCSETS, tio)
}

// readLoop reads the PTY until EOF. On Linux a read of the master after
// the last slave descriptor closes returns EIO: that is EOF.
func (t *tool) readLoop(chunks chan<- chunk) {
	defer close(t.readEOF)
	for {
		buf := chunkPool.Get().(*[]byte)
		n, err := t.ptmx.Read(*buf)
		if n > 0 {
			chunks <- chunk{buf: buf, n: n, tool: t}
		} else {
			chunkPool.Put(buf)
		}
		if err != nil {
			// EIO (the last slave descriptor closed), EOF, or anything
			// else: the stream is over. The waiter reports the process's
			// fate.
			return
		}
	}
}

// write types s followed by a newline.
func (t *tool) writeLine(s string) error {
	_, err := io.WriteString(t.ptmx, s+"\n")
	return err
}

// interrupt does what a user's Ctrl-C does: SIGINT to the terminal's
// foreground process group (the tool itself when nothing else is in the
// foreground). Writing 0x03 would depend on ISIG and would flush input.
func (t *tool) interrupt() error {
	pgrp := t.pid
	if c, err := t.ptmx.SyscallConn(); err == nil {
		_ = c.Control(func(fd uintptr) {
			if p, err := unix.IoctlGetInt(int(fd), unix.TIOCGPGRP); err == nil && p > 0 {
				pgrp = p
			}
		})
	}
	return unix.Kill(-pgrp, unix.SIGINT)
}

// signalGroup sends sig to the tool's process group and to the terminal's
// foreground group if that differs (a job the tool started).
func (t *tool) signalGroup(sig unix.Signal) {
	_ = unix.Kill(-t.pid, sig) // ESRCH when already gone.
	if c, err := t.ptmx.SyscallConn(); err == nil {
		_ = c.Control(func(fd uintptr) {
			if p, err := unix.IoctlGetInt(int(fd), unix.TIOCGPGRP); err == nil && p > 0 && p != t.pid {
				_ = unix.Kill(-p, sig)
			}
		})
	}
}

// close releases the PTY. Every process of the tool's session loses its
// terminal (SIGHUP) when the last master descriptor closes.
func (t *tool) close() {
	_ = t.ptmx.Close() // Best effort.
}

// describeExit turns a process state into an exit code or a signal name.
func describeExit(ps *os.ProcessState) (code *int, sig string) {
	if ps == nil {
		return nil, ""
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return nil, unix.SignalName(ws.Signal())
	}
	c := ps.ExitCode()
	return &c, ""
}

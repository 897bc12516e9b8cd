// Package refloop holds the reference implementations the benchmarks
// compare the runner with: tclsh on a bare PTY, and the minimal file queue
// loop (the least a file queue on a PTY must do). They live outside the
// test files so that the minimal loop can also run as a process of its own
// (test/bench/minloop), measured with nothing else alive.
package refloop

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/creack/pty"
	"github.com/fsnotify/fsnotify"
	"golang.org/x/sys/unix"
)

// PTYTool is tclsh on a PTY with echo off.
type PTYTool struct {
	cmd  *exec.Cmd
	ptmx *os.File
	buf  []byte
	tail []byte
}

// StartPTYTool starts tclsh on a fresh PTY with echo off and TERM=dumb.
func StartPTYTool() (*PTYTool, error) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		return nil, err
	}
	defer tty.Close()
	tio, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
	if err != nil {
		return nil, err
	}
	tio.Lflag &^= unix.ECHO
	if err := unix.IoctlSetTermios(int(tty.Fd()), unix.TCSETS, tio); err != nil {
		return nil, err
	}
	cmd := exec.Command("tclsh")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	cmd.Env = append(os.Environ(), "TERM=dumb")
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &PTYTool{cmd: cmd, ptmx: ptmx, buf: make([]byte, 32<<10)}, nil
}

// Run types line and reads until marker appears, scanning only new bytes
// plus a marker-sized tail. It returns the number of bytes read; with keep
// it also returns them.
func (p *PTYTool) Run(line string, marker []byte, keep bool) (int, []byte, error) {
	if _, err := io.WriteString(p.ptmx, line); err != nil {
		return 0, nil, err
	}
	total := 0
	var kept []byte
	p.tail = p.tail[:0]
	for {
		n, err := p.ptmx.Read(p.buf)
		if err != nil {
			return total, kept, err
		}
		total += n
		if keep {
			kept = append(kept, p.buf[:n]...)
		}
		p.tail = append(p.tail, p.buf[:n]...)
		if bytes.Contains(p.tail, marker) {
			return total, kept, nil
		}
		if len(p.tail) > len(marker) {
			p.tail = append(p.tail[:0], p.tail[len(p.tail)-len(marker):]...)
		}
	}
}

// Close kills tclsh and releases the PTY.
func (p *PTYTool) Close() {
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
	_ = p.ptmx.Close()
}

// MinimalLoop is the least a file queue on a PTY must do: inotify on
// queue/, read the command, rename it into inflight/, type it with a
// marker, wait for the marker, write the result with the captured output
// (temp + fsync + rename), remove the inflight file.
type MinimalLoop struct {
	dir  string
	tool *PTYTool
	w    *fsnotify.Watcher
	done chan struct{}
	sync bool
}

// StartMinimalLoop serves dir until Close.
func StartMinimalLoop(dir string, sync bool) (*MinimalLoop, error) {
	for _, d := range []string{"queue", "inflight", "result"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return nil, err
		}
	}
	tool, err := StartPTYTool()
	if err != nil {
		return nil, err
	}
	w, err := fsnotify.NewBufferedWatcher(4096)
	if err != nil {
		return nil, err
	}
	if err := w.Add(filepath.Join(dir, "queue")); err != nil {
		return nil, err
	}
	m := &MinimalLoop{dir: dir, tool: tool, w: w, done: make(chan struct{}), sync: sync}
	go m.loop()
	return m, nil
}

func (m *MinimalLoop) loop() {
	defer close(m.done)
	for ev := range m.w.Events {
		if ev.Op&fsnotify.Create == 0 {
			continue
		}
		name := filepath.Base(ev.Name)
		if name[0] == '.' {
			continue
		}
		b, err := os.ReadFile(ev.Name)
		if err != nil {
			continue
		}
		var c struct {
			CmdID   string `json:"cmd_id"`
			Payload string `json:"payload"`
		}
		if json.Unmarshal(b, &c) != nil {
			continue
		}
		inflight := filepath.Join(m.dir, "inflight", name)
		if os.Rename(ev.Name, inflight) != nil {
			continue
		}
		mk := "MK_" + c.CmdID
		_, out, _ := m.tool.Run(c.Payload+"\nputs "+mk+"\n", []byte(mk+"\r"), true)
		res, _ := json.Marshal(map[string]any{"cmd_id": c.CmdID, "status": "ok", "output": string(out)})
		tmp := filepath.Join(m.dir, "result", "."+name)
		f, err := os.Create(tmp)
		if err != nil {
			continue
		}
		_, _ = f.Write(res)
		if m.sync {
			_ = f.Sync()
		}
		_ = f.Close()
		_ = os.Rename(tmp, filepath.Join(m.dir, "result", name))
		_ = os.Remove(inflight)
	}
}

// Close stops watching, lets the current command finish, and ends tclsh.
func (m *MinimalLoop) Close() {
	_ = m.w.Close()
	<-m.done
	m.tool.Close()
}

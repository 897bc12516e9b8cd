package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/creack/pty"
	"github.com/fsnotify/fsnotify"
	"golang.org/x/sys/unix"
)

// ptyTool is tclsh on a PTY with echo off, for the reference loops.
type ptyTool struct {
	cmd  *exec.Cmd
	ptmx *os.File
	buf  []byte
	tail []byte
}

func startPTYTool() (*ptyTool, error) {
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
	return &ptyTool{cmd: cmd, ptmx: ptmx, buf: make([]byte, 32<<10)}, nil
}

// run types line and reads until marker appears as a line, scanning only
// new bytes plus a marker-sized tail. It returns the bytes read.
func (p *ptyTool) run(line string, marker []byte) (int, error) {
	if _, err := io.WriteString(p.ptmx, line); err != nil {
		return 0, err
	}
	total := 0
	p.tail = p.tail[:0]
	for {
		n, err := p.ptmx.Read(p.buf)
		if err != nil {
			return total, err
		}
		total += n
		p.tail = append(p.tail, p.buf[:n]...)
		if bytes.Contains(p.tail, marker) {
			return total, nil
		}
		if len(p.tail) > len(marker) {
			p.tail = append(p.tail[:0], p.tail[len(p.tail)-len(marker):]...)
		}
	}
}

func (p *ptyTool) close() {
	p.cmd.Process.Kill()
	p.cmd.Wait()
	p.ptmx.Close()
}

// ptyFloor measures one `puts hi` plus a marker on a bare PTY.
func ptyFloor(p *ptyTool, i int) (time.Duration, error) {
	t0 := time.Now()
	_, err := p.run(fmt.Sprintf("puts hi; puts MK%d\n", i), []byte(fmt.Sprintf("MK%d\r", i)))
	return time.Since(t0), err
}

// oneShot measures exec'ing a fresh tclsh for one command.
func oneShot(script string) (time.Duration, error) {
	t0 := time.Now()
	err := exec.Command("tclsh", script).Run()
	return time.Since(t0), err
}

// minimalLoop is the least a file queue on a PTY must do: inotify on
// queue/, read the command, rename it into inflight/, type it with a
// marker, wait for the marker, write the result (temp + fsync + rename).
type minimalLoop struct {
	dir  string
	tool *ptyTool
	w    *fsnotify.Watcher
	done chan struct{}
	sync bool
}

func startMinimalLoop(dir string, sync bool) (*minimalLoop, error) {
	for _, d := range []string{"queue", "inflight", "result"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return nil, err
		}
	}
	tool, err := startPTYTool()
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
	m := &minimalLoop{dir: dir, tool: tool, w: w, done: make(chan struct{}), sync: sync}
	go m.loop()
	return m, nil
}

func (m *minimalLoop) loop() {
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
		m.tool.run(c.Payload+"\nputs "+mk+"\n", []byte(mk+"\r"))
		res, _ := json.Marshal(map[string]any{"cmd_id": c.CmdID, "status": "ok"})
		tmp := filepath.Join(m.dir, "result", "."+name)
		f, _ := os.Create(tmp)
		f.Write(res)
		if m.sync {
			f.Sync()
		}
		f.Close()
		os.Rename(tmp, filepath.Join(m.dir, "result", name))
		os.Remove(inflight)
	}
}

func (m *minimalLoop) close() {
	m.w.Close()
	<-m.done
	m.tool.close()
}

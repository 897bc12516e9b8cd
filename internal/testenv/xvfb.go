package testenv

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Xvfb starts a virtual X server for the test (Debian package xvfb) and
// returns its DISPLAY (":N"); it is killed when the test ends. The GUI
// tools' Tcl shells (xschem, gtkwave, wish) need one even when they draw
// nothing. The server picks a free display itself (-displayfd).
func Xvfb(t testing.TB) string {
	t.Helper()
	bin := NeedTool(t, "Xvfb", "xvfb")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command(bin, "-displayfd", "3", "-screen", "0", "1024x768x24", "-nolisten", "tcp", "-noreset")
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		t.Fatal(err)
	}
	w.Close()
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	got := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(r).ReadString('\n')
		got <- strings.TrimSpace(line)
	}()
	select {
	case n := <-got:
		if n == "" {
			t.Fatal("Xvfb did not say which display it took")
		}
		return ":" + n
	case <-done:
		t.Fatal("Xvfb exited at start")
	case <-time.After(LongWait):
		t.Fatal("Xvfb did not start")
	}
	return ""
}

package runnercli

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/internal/testenv"

	"github.com/skillpilot/skillpilot/protocol"
	"github.com/skillpilot/skillpilot/runner"
)

// runMain runs Main in-process and returns its exit code and stderr.
func runMain(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var stdout, stderr strings.Builder
	code := Main(args, &stdout, &stderr)
	return code, stderr.String()
}

// TestCPUProfileReleasesSession: a --cpuprofile that cannot be created is
// a usage error, and the session it had opened is released: a second
// runner on the same session starts at once (the lock used to leak).
func TestCPUProfileReleasesSession(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "sess")
	code, stderr := runMain(t, "--session", dir, "--cpuprofile", filepath.Join(base, "missing", "cpu.prof"))
	if code != ExitUsage || !strings.Contains(stderr, "cpu.prof") {
		t.Fatalf("exit %d, want %d; stderr:\n%s", code, ExitUsage, stderr)
	}
	r, err := runner.Open(runner.Config{Session: dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatalf("a second runner on the session: %v", err)
	}
	r.Close()
}

// TestRefusedStartLeavesNothing (issue 26.6): flags that are refused
// (a --metrics-file in a missing directory, an unknown kind or watch mode)
// are refused before the session directory is created, with the exit codes
// of old.
func TestRefusedStartLeavesNothing(t *testing.T) {
	base := t.TempDir()
	cases := []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--metrics-file", filepath.Join(base, "nodir", "m.prom")}, ExitError, "its directory does not exist"},
		{[]string{"--kind", "zz"}, ExitUsage, `unknown kind "zz"`},
		{[]string{"--watch", "zz"}, ExitUsage, `unknown watch mode "zz"`},
	}
	for i, c := range cases {
		dir := filepath.Join(base, "s"+string(rune('0'+i)))
		code, stderr := runMain(t, append([]string{"--session", dir}, c.args...)...)
		if code != c.code || !strings.HasPrefix(stderr, "runner: ") || !strings.Contains(stderr, c.msg) {
			t.Errorf("%v: exit %d, want %d; stderr:\n%s", c.args, code, c.code, stderr)
		}
		if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%v: the session directory was created (%v)", c.args, err)
		}
	}
}

// TestMetricsInvalidUTF8Session (issue 22.3): `runner --session $'m\xff'
// --metrics-file m.prom` serves the session and writes its metrics (it
// used to panic at the start).
func TestMetricsInvalidUTF8Session(t *testing.T) {
	testenv.NeedTool(t, "tclsh", "tcl")
	base := t.TempDir()
	dir := filepath.Join(base, "m\xff")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	prom := filepath.Join(base, "m.prom")
	done := make(chan int, 1)
	var stderr lockedBuilder
	go func() {
		done <- Main([]string{"--session", dir, "--heartbeat", "100ms", "--metrics-file", prom}, io.Discard, &stderr)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for {
		b, err := os.ReadFile(prom)
		if err == nil && strings.Contains(string(b), `session="`+filepath.Join(base, "m\uFFFD")+`"`) {
			break
		}
		select {
		case code := <-done:
			t.Fatalf("the runner exited %d:\n%s", code, stderr.String())
		case <-ctx.Done():
			t.Fatalf("no metrics file with the session label; stderr:\n%s", stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err := os.WriteFile(filepath.Join(dir, protocol.FileStop), []byte(`{"mode":"force"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if code != ExitOK {
			t.Fatalf("exit %d:\n%s", code, stderr.String())
		}
	case <-ctx.Done():
		t.Fatal("the runner did not stop")
	}
}

// lockedBuilder is a strings.Builder safe for a writer and a reader.
type lockedBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuilder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuilder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A negative --max-output-bytes is refused before the session is created.
func TestMaxOutputBytesFlagRefusesNegative(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s")
	code, stderr := runMain(t, "--session", dir, "--max-output-bytes", "-1")
	if code != ExitUsage || !strings.Contains(stderr, "--max-output-bytes must not be negative") {
		t.Errorf("exit %d, want %d; stderr:\n%s", code, ExitUsage, stderr)
	}
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the session directory was created (%v)", err)
	}
}

// Issue 32, document 002's working directory: --cwd DIR starts the tool in
// DIR (the runner changes to it before the tool starts); relative paths in
// the other flags (--session here) still mean what they meant where the
// runner was started; runner_start records the directory. Real runner
// process, real tclsh.
func TestCwdFlagStartsToolThere(t *testing.T) {
	bin := testenv.BuildBinary(t, testenv.Runner)
	base := t.TempDir()
	work := filepath.Join(base, "work")
	if err := os.Mkdir(work, 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--session", "sess", "--cwd", "work", "--heartbeat", "100ms", "--", "tclsh")
	cmd.Dir = base
	stderr := &logFile{path: filepath.Join(base, "stderr")}
	f, err := os.Create(stderr.path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd.Stderr = f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done; done <- nil })
	dir := filepath.Join(base, "sess")
	name := protocol.CommandName(1, "where")
	waitFile(t, filepath.Join(dir, protocol.DirQueue), stderr)
	tmp := filepath.Join(dir, protocol.DirQueue, "."+name)
	if err := os.WriteFile(tmp, []byte(`{"cmd_id":"where","seq":1,"kind":"tcl","payload":"pwd"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, protocol.DirQueue, name)); err != nil {
		t.Fatal(err)
	}
	res := filepath.Join(dir, protocol.DirResult, name)
	waitFile(t, res, stderr)
	b, _ := os.ReadFile(res)
	var r protocol.Result
	if err := json.Unmarshal(b, &r); err != nil || r.Value == nil || *r.Value != work {
		t.Errorf("the tool did not start in --cwd %s: %s (%v)", work, b, err)
	}
	if err := os.WriteFile(filepath.Join(dir, protocol.FileStop), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		done <- err
		if err != nil {
			t.Fatalf("runner: %v\n%s", err, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("runner did not stop\n%s", stderr.String())
	}
	meta, _ := os.ReadFile(filepath.Join(dir, protocol.FileMeta))
	if !strings.Contains(string(meta), `"cwd":"`+work+`"`) {
		t.Errorf("runner_start does not record the working directory:\n%s", meta)
	}
	// A --cwd that is not a directory is a usage error, before the
	// session is made.
	code, msg := runMain(t, "--session", filepath.Join(base, "other"), "--cwd", filepath.Join(base, "missing"))
	if code != ExitUsage || !strings.Contains(msg, "--cwd") {
		t.Errorf("missing --cwd: exit %d, %q", code, msg)
	}
	if _, err := os.Stat(filepath.Join(base, "other")); !os.IsNotExist(err) {
		t.Errorf("a refused --cwd made the session: %v", err)
	}
}

// logFile is a process's stderr, kept in a file.
type logFile struct{ path string }

func (l *logFile) String() string { b, _ := os.ReadFile(l.path); return string(b) }

// waitFile waits for path to exist (an anti-hang bound, not a timing check).
func waitFile(t *testing.T, path string, stderr *logFile) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear\n%s", path, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

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
	"syscall"
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

// TestRefusedStartLeavesNothing: flags that are refused
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

// TestMetricsInvalidUTF8Session: `runner --session $'m\xff'
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
	var stderr testenv.LockedBuffer
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

// --cwd DIR starts the tool in
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

// runMainUntil runs Main in-process and returns its exit code and stderr
// once it returns. A runner that was accepted and started serving instead
// (its heartbeat appears in dir) is stopped and reported as started; one
// that hangs before serving (blocked in open) is reported after a bound,
// unblocked by unblock.
func runMainUntil(t *testing.T, dir string, unblock func(), args ...string) (code int, stderr string, started bool) {
	t.Helper()
	var out, errw testenv.LockedBuffer
	done := make(chan int, 1)
	go func() { done <- Main(args, &out, &errw) }()
	hb := filepath.Join(dir, protocol.FileHeartbeat)
	deadline := time.After(60 * time.Second)
	for {
		select {
		case code := <-done:
			return code, errw.String(), false
		case <-deadline:
			t.Errorf("runner %v hangs at start", args)
			if unblock != nil {
				unblock() // Then it starts serving, and is stopped below.
			}
			started = true
		case <-time.After(20 * time.Millisecond):
			if _, err := os.Stat(hb); err == nil {
				os.WriteFile(filepath.Join(dir, protocol.FileStop), []byte(`{"mode":"force"}`), 0o600)
				return <-done, errw.String(), true
			}
		}
	}
}

// runner --log: a FIFO nobody reads never blocks the
// start; a log inside the session's directories (tmp/, emptied at start;
// log/meta.log, the event log) or a hard link to a session file is
// refused with words, and the session file is left as it was.
func TestLogFlagRefusals(t *testing.T) {
	newSession := func(t *testing.T) string {
		dir := filepath.Join(t.TempDir(), "s")
		for _, d := range protocol.Dirs {
			if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, protocol.FileMeta), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	t.Run("fifo without reader", func(t *testing.T) {
		dir := newSession(t)
		fifo := filepath.Join(t.TempDir(), "log.fifo")
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
		unblock := func() {
			if f, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
				t.Cleanup(func() { f.Close() })
			}
		}
		code, stderr, started := runMainUntil(t, dir, unblock, "--session", dir, "--log", fifo)
		if started || code != ExitUsage || !strings.Contains(stderr, "FIFO") || !strings.Contains(stderr, "--log") {
			t.Errorf("exit %d started %v; stderr:\n%s", code, started, stderr)
		}
	})
	for _, rel := range []string{protocol.DirTmp + "/runner.log", protocol.FileMeta, protocol.FileSpool, protocol.DirLog + "/runner.log"} {
		t.Run(rel, func(t *testing.T) {
			dir := newSession(t)
			p := filepath.Join(dir, rel)
			code, stderr, started := runMainUntil(t, dir, nil, "--session", dir, "--log", p)
			if started || code != ExitUsage || !strings.Contains(stderr, "--log") || !strings.Contains(stderr, "session") {
				t.Errorf("exit %d started %v; stderr:\n%s", code, started, stderr)
			}
			if b, _ := os.ReadFile(filepath.Join(dir, protocol.FileMeta)); len(b) != 0 {
				t.Errorf("log lines in the event log: %q", b)
			}
		})
	}
	t.Run("symlink into tmp", func(t *testing.T) {
		dir := newSession(t)
		p := filepath.Join(t.TempDir(), "runner.log")
		if err := os.Symlink(filepath.Join(dir, protocol.DirTmp, "runner.log"), p); err != nil {
			t.Fatal(err)
		}
		code, stderr, started := runMainUntil(t, dir, nil, "--session", dir, "--log", p)
		if started || code != ExitUsage || !strings.Contains(stderr, "--log") || !strings.Contains(stderr, "tmp/") {
			t.Errorf("exit %d started %v; stderr:\n%s", code, started, stderr)
		}
	})
	t.Run("hard link to meta.log", func(t *testing.T) {
		dir := newSession(t)
		p := filepath.Join(t.TempDir(), "runner.log")
		if err := os.Link(filepath.Join(dir, protocol.FileMeta), p); err != nil {
			t.Fatal(err)
		}
		code, stderr, started := runMainUntil(t, dir, nil, "--session", dir, "--log", p)
		if started || code != ExitUsage || !strings.Contains(stderr, "--log") {
			t.Errorf("exit %d started %v; stderr:\n%s", code, started, stderr)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, protocol.FileMeta)); len(b) != 0 {
			t.Errorf("log lines in the event log: %q", b)
		}
	})
}

// --keep-ids past the bound is refused before the session is created: the
// index it asks for could not be read back by the next runner (which
// refused to start), and every lookup by a master would read hundreds of
// megabytes.
func TestKeepIDsFlagBounded(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  string
	}{
		{"-1", "--keep-ids must not be negative"},
		{"2000001", "--keep-ids 2000001 is more than 2000000"},
	} {
		dir := filepath.Join(t.TempDir(), "s")
		code, stderr := runMain(t, "--session", dir, "--keep-last", "10", "--keep-ids", tc.value)
		if code != ExitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("--keep-ids %s: exit %d, want %d and %q; stderr:\n%s", tc.value, code, ExitUsage, tc.want, stderr)
		}
		if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("--keep-ids %s: the session directory was created (%v)", tc.value, err)
		}
	}
}

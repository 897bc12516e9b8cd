package runnercli

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
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

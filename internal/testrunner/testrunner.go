// Package testrunner runs a real runner (on tclsh) in-process for the tests
// of packages built on top of it: the master library, the MCP server, the
// pools. It is test support only.
package testrunner

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
	"github.com/skillpilot/skillpilot/runner"
)

// StopWait bounds how long the cleanup waits for the runner to stop.
const StopWait = 90 * time.Second

// Start runs a runner on dir (created if needed) until the test ends, with
// a fast heartbeat (100 ms), poll (200 ms) and kill grace (1 s); mods
// change the configuration. At the end a force stop is requested and the
// test fails if the runner does not stop within StopWait.
func Start(t testing.TB, dir string, mods ...func(*runner.Config)) {
	t.Helper()
	cfg := runner.Config{Session: dir, Heartbeat: 100 * time.Millisecond, Poll: 200 * time.Millisecond,
		KillGrace: time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, m := range mods {
		m(&cfg)
	}
	r, err := runner.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(context.Background(), nil) }()
	t.Cleanup(func() {
		_ = os.WriteFile(filepath.Join(dir, protocol.FileStop), []byte(`{"mode":"force"}`), 0o600)
		select {
		case <-done:
		case <-time.After(StopWait):
			t.Error("runner did not stop")
		}
	})
}

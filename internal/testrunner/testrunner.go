// Package testrunner runs a real runner (on tclsh) in-process for the tests
// of packages built on top of it: the master library, the MCP server, the
// pools. It is test support only, the in-process half of internal/testenv
// (which cannot import the runner library: the runner's own tests use it).
package testrunner

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/internal/sessioncheck"
	"github.com/skillpilot/skillpilot/internal/testenv"
	"github.com/skillpilot/skillpilot/protocol"
	"github.com/skillpilot/skillpilot/runner"
)

// StopWait bounds how long the cleanup waits for the runner to stop.
const StopWait = 90 * time.Second

// Start runs a runner on dir (created if needed) until the test ends, with
// a fast heartbeat (100 ms), poll (200 ms) and kill grace (1 s); mods
// change the configuration. At the end a force stop is requested and the
// test fails if the runner does not stop within StopWait; if the test
// failed, the runner's log is logged.
//
// Start does not check the session: new tests call [StartChecked].
// (master's tests still call Start; they switch when master's CLI has
// moved to cmd/master, issue #21.)
func Start(t testing.TB, dir string, mods ...func(*runner.Config)) {
	t.Helper()
	log := &testenv.LockedBuffer{}
	cfg := runner.Config{Session: dir, Heartbeat: 100 * time.Millisecond, Poll: 200 * time.Millisecond,
		KillGrace: time.Second, Logger: slog.New(slog.NewTextHandler(log, nil))}
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
		_ = testenv.WriteAtomic(filepath.Join(dir, protocol.FileStop), []byte(`{"mode":"force"}`)) // Whole: an empty stop.json is a graceful stop.
		select {
		case <-done:
		case <-time.After(StopWait):
			t.Error("runner did not stop")
		}
		if t.Failed() {
			t.Logf("runner log (%s):\n%s", dir, log.String())
		}
	})
}

// StartChecked is [Start], and when the test ends, after the runner has
// stopped, the session-invariant check ([testenv.CheckSession]) on dir
// with check. The force stop at the end cancels the running command and
// leaves queued ones in queue/: tests that may leave commands queued set
// check.AllowQueued.
func StartChecked(t testing.TB, dir string, check sessioncheck.Options, mods ...func(*runner.Config)) {
	t.Helper()
	testenv.NeedTool(t, "tclsh", "tcl")
	testenv.CheckSession(t, dir, check) // Registered first: runs after Start's stop.
	Start(t, dir, mods...)
}

// Package launchtest is the test support package launch's and package
// pool's tests share: the test binary on the PATH as "runner" (what a
// local launch runs), a context bounded by LongWait, and a runner started
// in process on a fresh session with the session-invariant check at
// cleanup. Only tests import it.
package launchtest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/skillpilot/skillpilot/cmd/runner/runnercli"
	"github.com/skillpilot/skillpilot/internal/sessioncheck"
	"github.com/skillpilot/skillpilot/internal/testrunner"
	"github.com/skillpilot/skillpilot/runner"
)

// LongWait bounds a test's waits, as in package master's tests.
const LongWait = 90 * time.Second

// Main runs the tests with this test binary on the PATH as "runner";
// call it from TestMain.
func Main(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"runner": func() { os.Exit(runnercli.Main(os.Args[1:], os.Stdout, os.Stderr)) },
	})
}

// Ctx is a context that ends after LongWait or with the test.
func Ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), LongWait)
	t.Cleanup(cancel)
	return c
}

// StartRunner starts a runner in process on a new session (queued
// commands allowed at the invariant check) and returns its directory.
func StartRunner(t testing.TB, mods ...func(*runner.Config)) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "sess")
	testrunner.StartChecked(t, dir, sessioncheck.Options{AllowQueued: true}, mods...)
	return dir
}

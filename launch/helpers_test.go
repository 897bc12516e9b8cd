package launch

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/skillpilot/skillpilot/cmd/runner/runnercli"
	"github.com/skillpilot/skillpilot/internal/sessioncheck"
	"github.com/skillpilot/skillpilot/internal/testrunner"
	"github.com/skillpilot/skillpilot/runner"
)

// TestMain puts this test binary on the PATH as "runner" (what a local
// launch runs), as package master's tests did.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"runner": func() { os.Exit(runnercli.Main(os.Args[1:], os.Stdout, os.Stderr)) },
	})
}

// As in package master's tests.
const longWait = 90 * time.Second

func startRunner(t testing.TB, mods ...func(*runner.Config)) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "sess")
	testrunner.StartChecked(t, dir, sessioncheck.Options{AllowQueued: true}, mods...)
	return dir
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), longWait)
	t.Cleanup(cancel)
	return c
}

func regexpMust(s string) *regexp.Regexp { return regexp.MustCompile(s) }

package pool

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/skillpilot/skillpilot/internal/launchtest"
	"github.com/skillpilot/skillpilot/internal/testenv"
	"github.com/skillpilot/skillpilot/launch"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/sched"
)

// TestMain puts this test binary on the PATH as "runner" (launchtest.Main).
func TestMain(m *testing.M) { launchtest.Main(m) }

const longWait = launchtest.LongWait

var (
	ctx = launchtest.Ctx
)

// needTool returns the path of a program a test needs. Under CI (CI=true)
// a missing program fails the test; elsewhere the test is skipped with the
// program's name, so a developer knows what to install.
func needTool(t *testing.T, name string) string {
	t.Helper()
	pkg := map[string]string{"tclsh": "tcl", "promtool": "prometheus"}[name]
	if pkg == "" {
		pkg = name
	}
	return testenv.NeedTool(t, name, pkg) // scripts/deps.sh installs it
}

// launchLocal launches a runner (the test binary as "runner", from the PATH
// testscript.Main set up) detached on a new session, stopped at the end.
func launchLocal(t *testing.T, dir string, mods ...func(*launch.Options)) *launch.Result {
	t.Helper()
	opts := launch.Options{Via: "local", RunnerArgs: []string{"--heartbeat", "200ms", "--kill-grace", "1s"}}
	for _, m := range mods {
		m(&opts)
	}
	res, err := launch.Launch(ctx(t), dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killLaunched(t, dir) })
	return res
}

// killLaunched makes sure no launched process outlives the test.
func killLaunched(t *testing.T, dir string) {
	li, err := launch.ReadLaunch(dir)
	if err != nil {
		return
	}
	if j, err := (sched.Local{}).Query(context.Background(), nil, li.JobID); err == nil && j.State.Active() {
		_ = (sched.Local{}).Cancel(context.Background(), nil, li.JobID, true)
		_, _ = launch.WaitJobGone(ctx(t), sched.Local{}, nil, li.JobID)
	}
}

// commandsIn is commandNames for the session directory named by its path
// (a session's subdirectory, such as .../s00/result).
func commandsIn(p string) []string {
	s, err := master.Open(filepath.Dir(p))
	if err != nil {
		return nil
	}
	return commandNames(s, filepath.Base(p))
}

package conformance

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/skillpilot/skillpilot/internal/testenv"
)

func TestMain(m *testing.M) {
	Main()
	os.Exit(m.Run())
}

// TestConformance runs every scenario with every master against a real
// runner on tclsh, on this host.
func TestConformance(t *testing.T) {
	Run(t, localEnv(t))
}

// localEnv is the environment of a run on this host: every master, a
// runner on tclsh.
func localEnv(t *testing.T) Env {
	testenv.NeedTool(t, "tclsh", "tcl")
	testenv.NeedTool(t, "python3", "python3")
	testenv.NeedTool(t, "bash", "bash")
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Env{Repo: repo, Bin: MakeBin(t), Self: self, RunnerRoot: t.TempDir()}
}

// coreScenarios are the scenarios every master also passes against
// OpenSTA (a shell that evaluates each line alone and dies of Ctrl-C):
// each outcome and its exit code, submit/wait/run, status, cancel, stop,
// send to a prompt, waitfor, trace ids and labels, withdraw.
var coreScenarios = []string{"outcomes", "submit_wait_run", "status", "cancel", "stop", "interactive", "waitfor",
	"correlation", "withdraw", "errors_context"}

// TestConformanceOpenSTA runs the core scenarios with every master against
// runners on OpenSTA instead of tclsh.
func TestConformanceOpenSTA(t *testing.T) {
	testenv.NeedTool(t, "sta", "opensta")
	e := localEnv(t)
	e.Tool, e.Only = []string{"sta", "-no_splash"}, coreScenarios
	Run(t, e)
}

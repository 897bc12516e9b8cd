package conformance

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/skillpilot/skillpilot/internal/testenv"
)

func TestMain(m *testing.M) {
	Main()
	flag.Parse()
	// Scenarios mostly wait (liveness graces, leases, polls): unless told
	// otherwise, run five at a time rather than GOMAXPROCS (two here):
	// make test took 675 s for this package at two, 442 s at four on a
	// loaded 2-core machine, using 4.8 minutes of CPU in 9. The package's
	// top-level tests are parallel too, so the masters' own suites (Python,
	// Tcl) and the OpenSTA scenarios run beside the tclsh ones instead of
	// before and after them.
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", "5")
	}
	os.Exit(m.Run())
}

// TestConformance runs every scenario with every master against a real
// runner on tclsh, on this host.
func TestConformance(t *testing.T) {
	t.Parallel()
	e := localEnv(t)
	if testing.Short() {
		// The developer's loop: the in-process Go master through the
		// core scenarios. make test runs every master through all.
		e.Masters, e.Only = []string{"go"}, coreScenarios
	}
	Run(t, e)
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
	return Env{Repo: repo, Bin: MakeBin(t), Self: self, RunnerRoot: t.TempDir(), ParallelScenarios: true}
}

// coreScenarios are the scenarios every master also passes against
// OpenSTA (a shell that evaluates each line alone and dies of Ctrl-C):
// each outcome and its exit code, submit/wait/run, status, cancel, stop,
// send to a prompt, waitfor, trace ids and labels, withdraw, a restart
// that runs --init again.
var coreScenarios = []string{"outcomes", "submit_wait_run", "status", "cancel", "stop", "interactive", "waitfor",
	"correlation", "withdraw", "errors_context", "restart_init"}

// TestConformanceOpenSTA runs the core scenarios with every master against
// runners on OpenSTA instead of tclsh.
func TestConformanceOpenSTA(t *testing.T) {
	t.Parallel()
	testenv.Slow(t, "five masters on OpenSTA")
	testenv.NeedTool(t, "sta", "opensta")
	e := localEnv(t)
	e.Tool, e.Only = []string{"sta", "-no_splash"}, coreScenarios
	Run(t, e)
}

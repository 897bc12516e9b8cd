package farm

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/internal/sessioncheck"
	"github.com/skillpilot/skillpilot/internal/testenv"
	"github.com/skillpilot/skillpilot/launch"
	"github.com/skillpilot/skillpilot/protocol"
	"github.com/skillpilot/skillpilot/sched"
)

// runnerBin and masterBin are the runner and master built for the suite
// (or found in $SP_BIN): Slurm runs the runner as a separate program, from
// a path every job can see.
var runnerBin, masterBin string

// slurm and sge say which schedulers the suite was asked to test; local
// asks for the scale test with the local launcher (SP_LOCAL=1: no
// scheduler, no root).
var slurm, sge, local = os.Getenv("SP_SLURM") == "1", os.Getenv("SP_SGE") == "1", os.Getenv("SP_LOCAL") == "1"

func TestMain(m *testing.M) {
	if !slurm && !sge && !local {
		fmt.Println("farm: skipping the scheduler suite: run make test-slurm (root; scripts/slurm-up.sh installs slurm-wlm and munge) or make test-sge (scripts/sge-up.sh, gridengine)")
		os.Exit(0)
	}
	if sge {
		if os.Getenv("SGE_ROOT") == "" {
			os.Setenv("SGE_ROOT", "/var/lib/gridengine") // Where Debian's gridengine and scripts/sge-up.sh put it.
		}
		if os.Getenv("SGE_CELL") == "" {
			os.Setenv("SGE_CELL", "default")
		}
	}
	if bin := os.Getenv("SP_BIN"); bin != "" {
		runnerBin, masterBin = filepath.Join(bin, "runner"), filepath.Join(bin, "master")
	} else {
		var err error
		if runnerBin, err = testenv.Build(testenv.Runner); err == nil {
			masterBin, err = testenv.Build(testenv.Master)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "farm: %v\n", err)
			os.Exit(1)
		}
	}
	if out, err := exec.Command("sinfo", "-h", "-o", "%T").CombinedOutput(); slurm && err != nil {
		fmt.Fprintf(os.Stderr, "farm: SP_SLURM=1 but Slurm does not answer (sinfo: %v %s); start it with scripts/slurm-up.sh\n", err, out)
		os.Exit(1)
	}
	if out, err := exec.Command("qstat", "-f").CombinedOutput(); sge && err != nil {
		fmt.Fprintf(os.Stderr, "farm: SP_SGE=1 but Grid Engine does not answer (qstat: %v %s); start it with scripts/sge-up.sh\n", err, out)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

const long = 3 * time.Minute

// needSlurm and needSGE skip a test of a scheduler the run was not asked
// to test (make test-slurm sets SP_SLURM=1, make test-sge SP_SGE=1).
func needSlurm(t *testing.T) {
	if !slurm {
		t.Skip("Slurm suite not requested (SP_SLURM=1, make test-slurm)")
	}
}

func needSGE(t *testing.T) {
	if !sge {
		t.Skip("Grid Engine suite not requested (SP_SGE=1, make test-sge)")
	}
}

func needLocal(t *testing.T) {
	if !local {
		t.Skip("local scale test not requested (SP_LOCAL=1)")
	}
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), long)
	t.Cleanup(cancel)
	return c
}

// workDir is a directory for sessions; kept (and named in the log) when a
// test fails, for post-mortem.
func workDir(t *testing.T) string {
	d, err := os.MkdirTemp("", "farm-"+strings.ReplaceAll(t.Name(), "/", "_")+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kept %s", d)
			return
		}
		os.RemoveAll(d)
	})
	return d
}

func runnerPath() string { return runnerBin }

// launchSession launches a runner on a new session through Slurm; its job is
// cancelled when the test ends.
func launchSession(t *testing.T, dir string, mods ...func(*launch.Options)) *launch.Result {
	t.Helper()
	o := launch.Options{Via: "slurm", Runner: runnerPath(), RunnerArgs: []string{"--heartbeat", "250ms"}}
	for _, m := range mods {
		m(&o)
	}
	res, err := launch.Launch(ctx(t), dir, o)
	if res != nil {
		cancelAtEnd(t, o.Via, res.Info.JobID)
	}
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// cancelAtEnd makes sure a job does not outlive the test.
func cancelAtEnd(t *testing.T, via, job string) { t.Cleanup(func() { cancelNow(via, job) }) }

func cancelNow(via, job string) {
	if via == "local" {
		_ = sched.Local{}.Cancel(context.Background(), nil, job, true)
	} else if via == "sge" {
		_ = exec.Command("qdel", "-f", job).Run()
	} else {
		_ = exec.Command("scancel", "--signal=KILL", "--full", job).Run()
	}
}

// cli runs the built master and returns stdout, stderr and the exit code.
func cli(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(masterBin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// checkStopped runs the session-invariant check on a session whose runner
// has stopped gracefully after serving every command.
func checkStopped(t *testing.T, dir string) {
	t.Helper()
	testenv.VerifySession(t, dir, sessioncheck.Options{})
}

// resultsByID counts result files per cmd_id in the given sessions.
func resultsByID(dirs ...string) map[string]int {
	n := map[string]int{}
	for _, d := range dirs {
		entries, _ := os.ReadDir(filepath.Join(d, protocol.DirResult))
		for _, e := range entries {
			if _, id, err := protocol.ParseCommandName(e.Name()); err == nil && !strings.HasPrefix(e.Name(), ".") {
				n[id]++
			}
		}
	}
	return n
}

// sideEffects counts the lines of a file the payloads append their cmd_id to.
func sideEffects(t *testing.T, path string) map[string]int {
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, l := range strings.Fields(string(b)) {
		n[l]++
	}
	return n
}

func sidePayload(side, id, extra string) string {
	return fmt.Sprintf("%sset f [open {%s} a]; puts $f %s; close $f", extra, side, id)
}

func squeueState(t *testing.T, job string) string {
	out, _ := exec.Command("squeue", "-h", "-t", "all", "-j", job, "-o", "%T").Output()
	return strings.TrimSpace(string(out))
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(long)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

var regexpStarted = regexp.MustCompile(`started`)

func killPID(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }

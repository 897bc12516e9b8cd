package cli

import (
	"context"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/skillpilot/skillpilot/cmd/runner/runnercli"
	"github.com/skillpilot/skillpilot/internal/sessioncheck"
	"github.com/skillpilot/skillpilot/internal/testenv"
	"github.com/skillpilot/skillpilot/launch"
	"github.com/skillpilot/skillpilot/sched"
)

func TestMain(m *testing.M) {
	// The scripts mostly wait (a runner's heartbeat, a command's end, a
	// grace): run five at a time rather than GOMAXPROCS (two here) unless
	// -test.parallel says otherwise (it is parsed later and wins). At two,
	// make test spent 277 s in this package on a 2-core machine using about
	// one core.
	_ = flag.Set("test.parallel", "5")
	testscript.Main(m, map[string]func(){
		"master": func() { os.Exit(Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) },
		"runner": func() { os.Exit(runnercli.Main(os.Args[1:], os.Stdout, os.Stderr)) },
	})
}

// TestScripts runs the CLI end to end: testdata/script/*.txtar start a real
// runner (on tclsh) in the background and drive it with master.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		Setup: func(env *testscript.Env) error {
			// Runners a script launched detached (master launch/pool start
			// --via local) must not outlive a failed script.
			env.Defer(func() { killLocalLaunches(env.WorkDir) })
			// `master mcp` runs the master-mcp binary.
			mcpBin, err := testenv.Build(testenv.MasterMCP)
			if err != nil {
				return err
			}
			env.Setenv(MCPEnv, mcpBin)
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			// checksession [-queued] [-running] DIR: the session invariants (internal/sessioncheck).
			"checksession": sessioncheck.Command,
			// waitgrep PATTERN FILE: wait (up to a minute) until a line of
			// FILE matches the regexp PATTERN: for what the runner writes
			// just after what a master waited for (a cmd_end event follows
			// its result, PROTOCOL.md section 22).
			"waitgrep": func(ts *testscript.TestScript, neg bool, args []string) {
				if len(args) != 2 || neg {
					ts.Fatalf("usage: waitgrep PATTERN FILE")
				}
				re, err := regexp.Compile("(?m)" + args[0])
				if err != nil {
					ts.Fatalf("waitgrep: %v", err)
				}
				var b []byte
				for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
					if b, err = os.ReadFile(ts.MkAbs(args[1])); err == nil && re.Match(b) {
						return
					}
				}
				ts.Fatalf("waitgrep: no line of %s matched %q within a minute:\n%s", args[1], args[0], b)
			},
			// exitcode N prog args...: run prog and require exit code N.
			"exitcode": func(ts *testscript.TestScript, neg bool, args []string) {
				if len(args) < 2 {
					ts.Fatalf("usage: exitcode N prog args...")
				}
				want, err := strconv.Atoi(args[0])
				if err != nil {
					ts.Fatalf("exitcode: %v", err)
				}
				err = ts.Exec(args[1], args[2:]...)
				got := 0
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					got = ee.ExitCode()
				} else if err != nil {
					ts.Fatalf("exitcode: %v", err)
				}
				if (got == want) == neg {
					ts.Fatalf("%s exited %d, want %d", args[1], got, want)
				}
			},
		},
	})
}

// killLocalLaunches SIGKILLs the runners of every session under dir that
// was launched --via local and still runs.
func killLocalLaunches(dir string) {
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "launch.json" {
			return nil
		}
		if li, err := launch.ReadLaunch(filepath.Dir(filepath.Dir(p))); err == nil && li.Via == "local" {
			_ = (sched.Local{}).Cancel(context.Background(), nil, li.JobID, true)
		}
		return nil
	})
}

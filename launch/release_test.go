package launch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/sched"
)

// heldSlurm is a Slurm that holds the job it was given ("launch failed
// requeued held", as slurmctld does when a node could not confirm a batch
// launch) until it has been released failures+1 times, and then runs the
// job script for real. With refuse, scontrol release fails as it does for
// a user who may not release the job.
type heldSlurm struct {
	t        *testing.T
	failures int
	refuse   bool
	stale    int // held answers given after the job started (answers to queries that began before)

	mu       sync.Mutex
	script   string
	output   string
	releases int  // successful
	tries    int  // releases asked for
	started  bool // released for the last time (its script runs once the stale answers are given)
	cmd      *exec.Cmd
}

func (f *heldSlurm) exec(ctx context.Context, argv []string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch argv[0] {
	case "sbatch":
		for _, a := range argv[1:] {
			if o, ok := strings.CutPrefix(a, "--output="); ok {
				f.output = o
			}
		}
		f.script = argv[len(argv)-1]
		return "12\n", nil
	case "squeue":
		if f.started && f.stale > 0 {
			f.stale--
		} else if f.started {
			if f.cmd == nil {
				if err := f.start(); err != nil {
					return "", err
				}
			}
			return "12|RUNNING|None|0:01\n", nil
		}
		return "12|PENDING|launch failed requeued held|0:00\n", nil
	case "scontrol":
		if len(argv) == 3 && argv[1] == "release" && argv[2] == "12" {
			f.tries++
			switch {
			case f.refuse:
				return "", &sched.ExitError{Argv: argv, Code: 1, Stderr: "Access/permission denied for job 12"}
			case f.started:
				return "", &sched.ExitError{Argv: argv, Code: 1, Stderr: "Job is no longer pending execution for job 12"}
			}
			f.releases++
			if f.releases > f.failures {
				f.started = true
				if f.stale == 0 {
					return "", f.start()
				}
			}
			return "", nil
		}
	case "scancel":
		f.stop()
		return "", nil
	}
	return "", fmt.Errorf("heldSlurm: unexpected %q", argv)
}

// startJob runs a job script as sbatch would (in a session of its own,
// its output appended to output).
func startJob(script, output string) (*exec.Cmd, error) {
	out, err := os.OpenFile(output, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	cmd := exec.Command("/bin/sh", script)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	return cmd, cmd.Start()
}

// start runs the job script as sbatch would have (f.mu held).
func (f *heldSlurm) start() error {
	cmd, err := startJob(f.script, f.output)
	if err != nil {
		return err
	}
	f.cmd = cmd
	f.t.Cleanup(func() { f.mu.Lock(); f.stop(); f.mu.Unlock() })
	return nil
}

// stop kills the job's processes (f.mu held).
func (f *heldSlurm) stop() {
	if f.cmd == nil || f.cmd.ProcessState != nil {
		return
	}
	_ = syscall.Kill(-f.cmd.Process.Pid, syscall.SIGKILL)
	_ = f.cmd.Wait()
}

// launchHeld launches a session through f, releases settling for settle
// (past the next query, queryEvery later, and before the one after; 0: every
// held answer is acted on).
func launchHeld(t *testing.T, f *heldSlurm, settle time.Duration) (*Result, string, error) {
	t.Helper()
	f.t = t
	was := releaseSettle
	releaseSettle = settle
	t.Cleanup(func() { releaseSettle = was })
	dir := filepath.Join(t.TempDir(), "s")
	var said []string
	var mu sync.Mutex
	res, err := Launch(ctx(t), dir, Options{Via: "slurm", Exec: f.exec,
		RunnerArgs: []string{"--heartbeat", "200ms", "--kill-grace", "1s"},
		Progress:   func(s string) { mu.Lock(); said = append(said, s); mu.Unlock() }})
	mu.Lock()
	defer mu.Unlock()
	return res, strings.Join(said, "\n"), err
}

// A job Slurm held after failing to start it is released, and the launch
// serves once it runs; each release is said.
func TestLaunchReleasesAJobHeldAfterAFailedStart(t *testing.T) {
	f := &heldSlurm{failures: 1}
	res, said, err := launchHeld(t, f, 1500*time.Millisecond)
	if err != nil {
		t.Fatalf("%v\n%s", err, said)
	}
	if res.Releases != 2 || !res.Status.Alive {
		t.Errorf("releases %d, status %+v", res.Releases, res.Status)
	}
	for _, want := range []string{"released it (scontrol release 12), release 1 of 3", "release 2 of 3", "runner serves the session"} {
		if !strings.Contains(said, want) {
			t.Errorf("progress does not say %q:\n%s", want, said)
		}
	}
}

// A held answer to a query that began before the release (stale: an
// array's elements share their queries) does not fail the launch: a
// release soon after another is not tried, and one that fails is judged on
// the next answer, which finds the job running.
func TestLaunchHeldAnswerAfterTheRelease(t *testing.T) {
	f := &heldSlurm{stale: 1}
	res, said, err := launchHeld(t, f, 1500*time.Millisecond)
	if err != nil || res.Releases != 1 {
		t.Fatalf("%v, %d releases\n%s", err, res.Releases, said)
	}
	if f.stale != 0 {
		t.Errorf("the stale answer was not given")
	}
}

// A release that fails fails the launch only if the next answer (past the
// settle time) still finds the job held.
func TestReleaserJudgesAFailedReleaseOnTheNextAnswer(t *testing.T) {
	settle := releaseSettle
	releaseSettle = 0
	t.Cleanup(func() { releaseSettle = settle })
	f := &heldSlurm{refuse: true, t: t}
	s, err := createSession(filepath.Join(t.TempDir(), "s"))
	if err != nil {
		t.Fatal(err)
	}
	h := &releaser{r: sched.Slurm{}}
	j := sched.Job{ID: "12", State: sched.Pending, Raw: "PENDING", Reason: "launch failed requeued held"}
	if err := h.held(ctx(t), s, f.exec, "slurm", j, Options{}, &Result{}); err != nil {
		t.Fatalf("first answer: %v", err)
	}
	if err := h.held(ctx(t), s, f.exec, "slurm", j, Options{}, &Result{}); !errors.Is(err, ErrLaunchFailed) || f.tries != 1 {
		t.Fatalf("second answer: %v after %d tries", err, f.tries)
	}
}

// Right after a release, a held answer is let be.
func TestReleaserSettles(t *testing.T) {
	f := &heldSlurm{failures: 100, t: t}
	s, err := createSession(filepath.Join(t.TempDir(), "s"))
	if err != nil {
		t.Fatal(err)
	}
	h := &releaser{r: sched.Slurm{}}
	j := sched.Job{ID: "12", State: sched.Pending, Raw: "PENDING", Reason: "launch failed requeued held"}
	res := &Result{}
	for range 3 {
		if err := h.held(ctx(t), s, f.exec, "slurm", j, Options{}, res); err != nil {
			t.Fatal(err)
		}
	}
	if f.releases != 1 || res.Releases != 1 {
		t.Errorf("%d releases within the settle time, want 1", f.releases)
	}
}

// A job that stays held after maxReleases releases fails the launch at
// once, naming the state and how to cancel it, instead of waiting for the
// ready timeout; so does a release the scheduler refuses.
func TestLaunchGivesUpOnAJobHeldAgainAndAgain(t *testing.T) {
	for _, f := range []*heldSlurm{{failures: 100}, {refuse: true}} {
		_, said, err := launchHeld(t, f, 0)
		if !errors.Is(err, ErrLaunchFailed) {
			t.Fatalf("refuse=%v: %v\n%s", f.refuse, err, said)
		}
		want := []string{"job 12 (slurm) is PENDING (launch failed requeued held) again", "4 times", "the job stays held (master stop --session "}
		if f.refuse {
			want = []string{"scontrol release 12 failed", "Access/permission denied", "the job stays held"}
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), strings.ReplaceAll(w, "'", "")) {
				t.Errorf("refuse=%v: error does not say %q: %v", f.refuse, w, err)
			}
		}
		if _, exit := master.Classify(err); exit != master.ExitNoRunner {
			t.Errorf("exit %d", exit)
		}
		if f.refuse && f.releases != 0 || !f.refuse && f.releases != maxReleases {
			t.Errorf("refuse=%v: %d releases", f.refuse, f.releases)
		}
	}
}

// stuckJobs is a Slurm or a Grid Engine that keeps every job it is given in
// the queue without ever running it, until it is cancelled: Slurm holds it
// after a failed start, Grid Engine puts it in error state (Eqw).
type stuckJobs struct {
	mu        sync.Mutex
	next      int
	cancelled []string
}

func (f *stuckJobs) exec(_ context.Context, argv []string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch argv[0] {
	case "sbatch", "qsub":
		f.next++
		return fmt.Sprintf("%d\n", 11+f.next), nil
	case "squeue":
		for _, a := range argv {
			if id, ok := strings.CutPrefix(a, "--jobs="); ok {
				if slices.Contains(f.cancelled, id) {
					return id + "|CANCELLED|None|0:00\n", nil
				}
				return id + "|PENDING|launch failed requeued held|0:00\n", nil
			}
		}
	case "qstat":
		var b strings.Builder
		for i := 1; i <= f.next; i++ {
			if id := fmt.Sprint(11 + i); !slices.Contains(f.cancelled, id) {
				fmt.Fprintf(&b, "    %s 0.55500 sp-s       root         Eqw   11/28/2026 12:00:00       1\n", id)
			}
		}
		return b.String(), nil
	case "qacct":
		return "", &sched.ExitError{Argv: argv, Code: 1, Stderr: "error: job id not found"}
	case "scancel", "qdel":
		f.cancelled = append(f.cancelled, argv[len(argv)-1])
		return "", nil
	}
	return "", fmt.Errorf("stuckJobs: unexpected %q", argv)
}

// A pool's respawn cancels a job the scheduler keeps but will never run
// (Slurm's hold after a failed start, Grid Engine's Eqw) and submits a new
// one, so none is left behind in the queue. A plain launch refuses either,
// naming it and the command that removes it, and cancels nothing.
func TestRespawnReplacesAStuckJob(t *testing.T) {
	for _, via := range []string{"slurm", "sge"} {
		f := &stuckJobs{}
		dir := filepath.Join(t.TempDir(), via)
		opts := Options{Via: via, Exec: f.exec, NoWait: true}
		if _, err := Launch(ctx(t), dir, opts); err != nil {
			t.Fatal(err)
		}
		_, err := Launch(ctx(t), dir, opts)
		if !errors.Is(err, ErrAlreadyLaunched) || !strings.Contains(err.Error(), "job 12 ("+via+") is ") ||
			!strings.Contains(err.Error(), "which "+via+" will not run on its own: "+map[string]string{"slurm": "scancel 12", "sge": "qdel 12"}[via]) ||
			len(f.cancelled) != 0 || f.next != 1 {
			t.Fatalf("a plain launch over a stuck %s job: %v (cancelled %q, %d submitted)", via, err, f.cancelled, f.next)
		}
		opts.Respawn = true
		res, err := Launch(ctx(t), dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		if res.Info.JobID != "13" || !slices.Equal(f.cancelled, []string{"12"}) {
			t.Errorf("%s respawn: job %s (launch %d), cancelled %q", via, res.Info.JobID, res.Info.Launches, f.cancelled)
		}
	}
}

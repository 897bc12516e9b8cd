package farm

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/launch"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
	"github.com/skillpilot/skillpilot/sched"
)

// The flow a user follows: launch on Slurm, run, look, stop.
func TestSlurmLaunchRunStop(t *testing.T) {
	needSlurm(t)
	dir := filepath.Join(workDir(t), "s")
	out, errOut, code := cli(t, "launch", "--session", dir, "--via", "slurm", "--runner", runnerPath(), "--runner-arg=--heartbeat=250ms")
	if code != 0 || !strings.HasPrefix(out, "slurm ") {
		t.Fatalf("launch exit %d: %s %s", code, out, errOut)
	}
	job := strings.Fields(out)[1]
	cancelAtEnd(t, "slurm", job)
	if !strings.Contains(errOut, "job "+job+" submitted (slurm)") || !strings.Contains(errOut, "runner serves the session") {
		t.Errorf("progress: %s", errOut)
	}
	li, err := launch.ReadLaunch(dir)
	if err != nil || li.Via != "slurm" || li.JobID != job || li.SubmitCommand[0] != "sbatch" {
		t.Fatalf("launch.json %+v %v", li, err)
	}
	if out, _, code := cli(t, "submit", "--session", dir, "--wait", "puts [info hostname]-ok"); code != 0 || !strings.Contains(out, "-ok") {
		t.Fatalf("submit: %d %s", code, out)
	}
	out, _, code = cli(t, "status", "--session", dir)
	if code != 0 || !strings.Contains(out, "job       "+job+" (slurm) RUNNING") {
		t.Fatalf("status %d:\n%s", code, out)
	}
	// A second launch while the job runs is refused (exit 7) and submits nothing.
	if _, errOut, code := cli(t, "launch", "--session", dir, "--via", "slurm", "--runner", runnerPath()); code != 7 || !strings.Contains(errOut, "RUNNING") {
		t.Fatalf("second launch: %d %s", code, errOut)
	}
	out, errOut, code = cli(t, "stop", "--session", dir)
	if code != 0 || !strings.Contains(out, "stopped (stop_request)") || !strings.Contains(out, "COMPLETED") {
		t.Fatalf("stop %d: %s %s", code, out, errOut)
	}
	if st := squeueState(t, job); st != "COMPLETED" {
		t.Errorf("job %s after stop: %q", job, st)
	}
	if _, _, code := cli(t, "stop", "--session", dir); code != 5 {
		t.Errorf("stop of a stopped session: exit %d", code)
	}
	checkStopped(t, dir)
}

// A runner busy with a long command does not stop on a graceful request
// within the grace: scancel ends the job, the command still gets one result.
func TestSlurmStopEscalatesToScancel(t *testing.T) {
	needSlurm(t)
	dir := filepath.Join(workDir(t), "s")
	res := launchSession(t, dir)
	s, _ := master.Open(dir)
	c, err := s.Submit(ctx(t), "puts started; flush stdout; after 600000", master.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the long command to start", func() bool { st, _ := s.Status(ctx(t)); return st.CurrentCmdID == c.ID })
	var notes []string
	rep, err := launch.StopLaunched(ctx(t), dir, launch.StopOptions{Grace: time.Second, Progress: func(m string) { notes = append(notes, m) }})
	if err != nil || rep.Step != launch.StepCancel || rep.Job.State != sched.Cancelled {
		t.Fatalf("%+v %v", rep, err)
	}
	if !strings.Contains(rep.Message, "scancel "+res.Info.JobID) || !strings.Contains(strings.Join(notes, "\n"), "did not stop") {
		t.Errorf("message %q, notes %q", rep.Message, notes)
	}
	r, err := c.Result()
	if err != nil || r == nil || r.Status == protocol.StatusOK {
		t.Fatalf("the interrupted command: %+v %v", r, err)
	}
	if n := resultsByID(dir)[c.ID]; n != 1 {
		t.Errorf("%d results", n)
	}
}

// A job cancelled by scancel (Slurm sends SIGTERM to every process of the
// job, the tool included, then SIGKILL after KillWait; scancel --signal=KILL
// takes the same path) or whose runner is killed outright (SIGKILL, as the
// OOM killer would) while a command runs: that command ends with exactly
// one result, queued commands stay queued, and a new launch serves them.
func TestSlurmJobKilledMidCommand(t *testing.T) {
	needSlurm(t)
	for _, tc := range []struct {
		name   string
		kill   func(job string, s *master.Session) error
		reason protocol.ExitReason // of the interrupted command
	}{
		{"scancel", func(job string, _ *master.Session) error { return exec.Command("scancel", job).Run() }, protocol.ReasonToolDied},
		{"scancel-signal-KILL", func(job string, _ *master.Session) error {
			return exec.Command("scancel", "--signal=KILL", job).Run()
		}, protocol.ReasonToolDied},
		{"runner-SIGKILL", func(_ string, s *master.Session) error {
			st, err := s.Status(context.Background())
			if err != nil {
				return err
			}
			return syscall.Kill(st.RunnerPID, syscall.SIGKILL)
		}, protocol.ReasonRunnerRestarted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(workDir(t), "s")
			side := filepath.Join(filepath.Dir(dir), "side")
			res := launchSession(t, dir)
			s, _ := master.Open(dir)
			running, err := s.Submit(ctx(t), sidePayload(side, "first", "")+"; puts started; flush stdout; after 600000", master.SubmitOptions{})
			if err != nil {
				t.Fatal(err)
			}
			queued, _ := s.Submit(ctx(t), sidePayload(side, "second", ""), master.SubmitOptions{})
			if _, err := s.WaitFor(ctx(t), regexpStarted, 0); err != nil {
				t.Fatal(err)
			}
			if err := tc.kill(res.Info.JobID, s); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the job to end", func() bool {
				j, err := sched.Slurm{}.Query(ctx(t), sched.RunCommand, res.Info.JobID)
				return err == nil && !j.State.Active()
			})
			res2 := launchSession(t, dir)
			if res2.Info.Launches != 2 {
				t.Errorf("launches %d", res2.Info.Launches)
			}
			r, err := running.Wait(ctx(t), master.WaitOptions{})
			if r == nil || r.ExitReason != tc.reason {
				t.Fatalf("interrupted command: %+v %v", r, err)
			}
			if r, err := queued.Wait(ctx(t), master.WaitOptions{}); err != nil || r.Status != protocol.StatusOK {
				t.Fatalf("queued command: %+v %v", r, err)
			}
			n, ran := resultsByID(dir), sideEffects(t, side)
			if n[running.ID] != 1 || n[queued.ID] != 1 || ran["first"] != 1 || ran["second"] != 1 {
				t.Errorf("results %v, side effects %v", n, ran)
			}
			if rep, err := launch.StopLaunched(ctx(t), dir, launch.StopOptions{}); err != nil || rep.Step != launch.StepStopRequest {
				t.Errorf("stop: %+v %v", rep, err)
			} else {
				checkStopped(t, dir) // The killed runner's command was settled by the second.
			}
		})
	}
}

// A job that cannot start yet (--begin in an hour): launch reports it
// pending and times out leaving it queued; another launch refuses; stop
// cancels the pending job; then a launch works.
func TestSlurmPendingJob(t *testing.T) {
	needSlurm(t)
	dir := filepath.Join(workDir(t), "s")
	var notes []string
	res, err := launch.Launch(ctx(t), dir, launch.Options{Via: "slurm", Runner: runnerPath(), SubmitArgs: []string{"--begin=now+3600"},
		ReadyTimeout: 3 * time.Second, Progress: func(m string) { notes = append(notes, m) }})
	if res != nil {
		cancelAtEnd(t, "slurm", res.Info.JobID)
	}
	if !errors.Is(err, master.ErrWaitTimeout) || !strings.Contains(err.Error(), "PENDING (BeginTime)") || !strings.Contains(err.Error(), "stays") {
		t.Fatalf("%v", err)
	}
	if !strings.Contains(strings.Join(notes, "\n"), "PENDING (BeginTime)") {
		t.Errorf("progress %q", notes)
	}
	if _, err := launch.Launch(ctx(t), dir, launch.Options{Via: "slurm", Runner: runnerPath()}); !errors.Is(err, launch.ErrAlreadyLaunched) || !strings.Contains(err.Error(), "PENDING") {
		t.Fatalf("launch over a pending job: %v", err)
	}
	out, _, code := cli(t, "status", "--session", dir)
	if code != 5 || !strings.Contains(out, "PENDING (BeginTime)") {
		t.Errorf("status %d: %s", code, out)
	}
	rep, err := launch.StopLaunched(ctx(t), dir, launch.StopOptions{})
	if err != nil || rep.Step != launch.StepCancel || rep.Job.State != sched.Cancelled {
		t.Fatalf("stop of a pending job: %+v %v", rep, err)
	}
	launchSession(t, dir)
}

// A runner that cannot start: the launch fails as soon as the job does,
// with Slurm's state and the runner's own message.
func TestSlurmLaunchFails(t *testing.T) {
	needSlurm(t)
	dir := filepath.Join(workDir(t), "s")
	_, errOut, code := cli(t, "launch", "--session", dir, "--via", "slurm", "--runner", runnerPath(), "--runner-arg=--bogus")
	if code != 5 || !strings.Contains(errOut, "FAILED") || !strings.Contains(errOut, "-bogus") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// sbatch refusing the job: exit 10 with sbatch's words.
	_, errOut, code = cli(t, "launch", "--session", filepath.Join(filepath.Dir(dir), "s2"), "--via", "slurm", "--runner", runnerPath(), "--submit-arg=--partition=nosuch")
	if code != 10 || !strings.Contains(errOut, "sbatch") || !strings.Contains(strings.ToLower(errOut), "partition") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}

// docs/farms.md's advice for time limits: --signal=B:TERM@N makes Slurm send
// SIGTERM to the batch shell (the runner, which the job script execs) N s
// before the limit, so the runner stops gracefully: the command it runs
// finishes, queued ones stay queued, and the job ends COMPLETED, not
// TIMEOUT. (Slurm may send the signal up to a minute early; with --time=1
// it comes between the start and 10 s later.)
func TestSlurmTimeLimitSignalStopsGracefully(t *testing.T) {
	needSlurm(t)
	dir := filepath.Join(workDir(t), "s")
	side := filepath.Join(filepath.Dir(dir), "side")
	res := launchSession(t, dir, func(o *launch.Options) { o.SubmitArgs = []string{"--time=1", "--signal=B:TERM@50"} })
	s, _ := master.Open(dir)
	var cmds []*master.Command
	for i := 0; i < 20; i++ {
		id := master.NewCmdID()
		c, err := s.Submit(ctx(t), sidePayload(side, id, "after 1000; "), master.SubmitOptions{CmdID: id})
		if err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, c)
	}
	var job sched.Job
	waitFor(t, "the job to end", func() bool {
		j, err := sched.Slurm{}.Query(ctx(t), sched.RunCommand, res.Info.JobID)
		job = j
		return err == nil && !j.State.Active()
	})
	st, _ := s.Status(ctx(t))
	if job.State != sched.Done || st.Phase != protocol.PhaseStopped || !strings.Contains(st.Reason, "signal") {
		t.Fatalf("job %s, runner %s (%s)", job, st.Phase, st.Reason)
	}
	ranFirst := len(resultsByID(dir))
	launchSession(t, dir)
	for _, c := range cmds {
		r, err := c.Wait(ctx(t), master.WaitOptions{})
		if err != nil || r.Status != protocol.StatusOK {
			t.Fatalf("%s: %+v %v", c.ID, r, err)
		}
	}
	ran := sideEffects(t, side)
	for _, c := range cmds {
		if ran[c.ID] != 1 {
			t.Errorf("%s ran %d times", c.ID, ran[c.ID])
		}
	}
	t.Logf("%d commands ran before the signal, %d after the relaunch", ranFirst, len(cmds)-ranFirst)
}

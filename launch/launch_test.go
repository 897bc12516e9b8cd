package launch

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
	"github.com/skillpilot/skillpilot/sched"
)

// launchLocal launches a runner (the test binary as "runner", from the PATH
// testscript.Main set up) detached on a new session, stopped at the end.
func launchLocal(t *testing.T, dir string, mods ...func(*Options)) *Result {
	t.Helper()
	opts := Options{Via: "local", RunnerArgs: []string{"--heartbeat", "200ms", "--kill-grace", "1s"}}
	for _, m := range mods {
		m(&opts)
	}
	res, err := Launch(ctx(t), dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killLaunched(t, dir) })
	return res
}

// killLaunched makes sure no launched process outlives the test.
func killLaunched(t *testing.T, dir string) {
	li, err := ReadLaunch(dir)
	if err != nil {
		return
	}
	if j, err := (sched.Local{}).Query(context.Background(), nil, li.JobID); err == nil && j.State.Active() {
		_ = (sched.Local{}).Cancel(context.Background(), nil, li.JobID, true)
		_, _ = WaitJobGone(ctx(t), sched.Local{}, nil, li.JobID)
	}
}

func TestLaunchLocalServesRefusesAndStops(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s")
	var lines []string
	var mu sync.Mutex
	res := launchLocal(t, dir, func(o *Options) {
		o.Progress = func(m string) { mu.Lock(); lines = append(lines, m); mu.Unlock() }
	})
	if !res.Status.Alive || res.Info.Via != "local" || res.Info.Launches != 1 || res.Info.Script != FileLaunchScript {
		t.Fatalf("%+v", res)
	}
	li, err := ReadLaunch(dir)
	if err != nil || li.JobID != res.Info.JobID || li.RunnerCommand[1] != "--session" {
		t.Fatalf("launch.json %+v %v", li, err)
	}
	mu.Lock()
	if !strings.Contains(strings.Join(lines, "\n"), "runner serves the session") {
		t.Errorf("progress: %q", lines)
	}
	mu.Unlock()
	s, _ := master.Open(dir)
	if r, err := s.Run(ctx(t), "expr 6*7", master.SubmitOptions{}); err != nil || *r.Value != "42" {
		t.Fatalf("%+v %v", r, err)
	}
	// A second launch while the first runner serves changes nothing.
	if _, err := Launch(ctx(t), dir, Options{Via: "local"}); !errors.Is(err, ErrAlreadyLaunched) {
		t.Fatalf("second launch: %v", err)
	}
	if li2, _ := ReadLaunch(dir); li2.LaunchID != li.LaunchID {
		t.Fatal("a refused launch rewrote launch.json")
	}
	if code, exit := master.Classify(ErrAlreadyLaunched); code != CodeAlreadyLaunched || exit != 7 {
		t.Errorf("classify: %s %d", code, exit)
	}
	if ls := Status(ctx(t), s); ls == nil || ls.Job.State != sched.Running || !strings.Contains(ls.String(), "(local) running") {
		t.Errorf("launch status %+v", ls)
	}
	rep, err := StopLaunched(ctx(t), dir, StopOptions{})
	if err != nil || rep.Step != StepStopRequest || rep.Job.State.Active() {
		t.Fatalf("stop: %+v %v", rep, err)
	}
	// Nothing left to stop: exit 5, nothing written.
	if _, err := StopLaunched(ctx(t), dir, StopOptions{}); !errors.Is(err, master.ErrRunnerNotAlive) {
		t.Fatalf("second stop: %v", err)
	}
	// Relaunch: the count goes up, the new runner serves.
	res2 := launchLocal(t, dir)
	if res2.Info.Launches != 2 || res2.Status.SessionID == res.Status.SessionID {
		t.Fatalf("relaunch %+v", res2.Info)
	}
}

// A runner that does not stop in time (a long command, graceful stop) is
// ended by the scheduler's cancel; the command still gets one result.
func TestLaunchStopEscalates(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s")
	launchLocal(t, dir)
	s, _ := master.Open(dir)
	c, err := s.Submit(ctx(t), "puts started; flush stdout; after 600000", master.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.WaitFor(ctx(t), regexpMust("started"), 0); err != nil {
		t.Fatal(err)
	}
	rep, err := StopLaunched(ctx(t), dir, StopOptions{Grace: 500 * time.Millisecond})
	if err != nil || rep.Step != StepCancel {
		t.Fatalf("%+v %v", rep, err)
	}
	if !strings.Contains(rep.Message, "kill -TERM") {
		t.Errorf("message %q", rep.Message)
	}
	r, err := c.Result()
	if err != nil || r == nil || r.Status == protocol.StatusOK {
		t.Fatalf("the interrupted command: %+v %v", r, err)
	}
}

// A runner that cannot start makes Launch fail at once with the job's end
// and the runner's own message.
func TestLaunchFailsWhenTheRunnerExits(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s")
	_, err := Launch(ctx(t), dir, Options{Via: "local", RunnerArgs: []string{"--no-such-flag"}})
	if !errors.Is(err, ErrLaunchFailed) || !strings.Contains(err.Error(), "no-such-flag") || !strings.Contains(err.Error(), "exit 2") {
		t.Fatalf("%v", err)
	}
	if _, exit := master.Classify(err); exit != master.ExitNoRunner {
		t.Errorf("exit %d", exit)
	}
}

// A session served by a runner started by hand is not launched again.
func TestLaunchRefusesARunnerStartedByHand(t *testing.T) {
	dir := startRunner(t)
	_, err := Launch(ctx(t), dir, Options{Via: "local"})
	if !errors.Is(err, ErrAlreadyLaunched) {
		t.Fatalf("%v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, FileLaunch)); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("launch.json written by a refused launch")
	}
}

func TestLaunchUsage(t *testing.T) {
	for _, o := range []Options{{Via: "pbs"}, {Via: "local", SubmitArgs: []string{"-x"}}, {Via: "slurm", Runner: "/nonexistent/runner"}} {
		if _, err := Launch(ctx(t), t.TempDir(), o); !errors.Is(err, master.ErrUsage) {
			t.Errorf("%+v: %v", o, err)
		}
	}
}

func TestShellJoin(t *testing.T) {
	got := shellJoin([]string{"/a b/runner", "--session", "it's", "--", "tclsh"})
	want := `'/a b/runner' '--session' 'it'\''s' '--' 'tclsh'`
	if got != want {
		t.Errorf("%s", got)
	}
}

// The job script's check of state/launch.out, run by sh: a
// regular file or none yet goes on; a symlink (to a file elsewhere, or
// dangling), a directory or a FIFO stops the job before the runner, with
// the reason on stderr, and nothing is written through the symlink.
func TestOutputCheck(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "it's", "launch.out")
	elsewhere := filepath.Join(dir, "elsewhere")
	for _, tc := range []struct {
		name  string
		plant func() error
		ok    bool
	}{
		{"regular file", func() error { return os.WriteFile(out, []byte("x"), 0o600) }, true},
		{"none yet", func() error { return nil }, true},
		{"symlink", func() error { os.WriteFile(elsewhere, nil, 0o600); return os.Symlink(elsewhere, out) }, false},
		{"dangling symlink", func() error { return os.Symlink(filepath.Join(dir, "nothing"), out) }, false},
		{"directory", func() error { return os.Mkdir(out, 0o700) }, false},
		{"FIFO", func() error { return syscall.Mkfifo(out, 0o600) }, false},
	} {
		os.RemoveAll(filepath.Dir(out))
		os.MkdirAll(filepath.Dir(out), 0o700)
		if err := tc.plant(); err != nil {
			t.Fatal(err)
		}
		script := outputCheck(out) + "exec >>" + shellJoin([]string{out}) + " 2>&1\necho started\n"
		cmd := exec.Command("sh", "-c", script)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v (stderr %q)", tc.name, err, stderr.String())
		}
		if !tc.ok && !strings.Contains(stderr.String(), "the runner is not started") {
			t.Errorf("%s: stderr %q", tc.name, stderr.String())
		}
		if b, _ := os.ReadFile(elsewhere); len(b) != 0 {
			t.Errorf("%s: written through the symlink: %q", tc.name, b)
		}
	}
}

// A local job of another host cannot be asked about or cancelled from
// here; stop still sends the stop request to a live runner.
func TestStopLaunchedSchedulerUnreachable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s")
	launchLocal(t, dir)
	li, _ := ReadLaunch(dir)
	real := *li
	li.JobID = "1@another-host:5"
	s, _ := master.Open(dir)
	if err := writeLaunch(s, li, fsq.Durable); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { writeLaunch(s, &real, fsq.Durable) }) // So that killLaunched finds the real process.
	rep, err := StopLaunched(ctx(t), dir, StopOptions{})
	if err != nil || rep.Step != StepStopRequest || !strings.Contains(rep.Message, "could not be checked") {
		t.Fatalf("%+v %v", rep, err)
	}
	if _, err := StopLaunched(ctx(t), dir, StopOptions{}); err == nil || !strings.Contains(err.Error(), "another-host") {
		t.Fatalf("second stop: %v", err)
	}
}

package launch

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
)

// endedSlurm runs the job script at sbatch, lists the job in squeue as
// RUNNING while it runs and FAILED once it has ended, and gives its exit
// code through scontrol only. Every command is counted.
type endedSlurm struct {
	t     *testing.T
	mu    sync.Mutex
	cmd   *exec.Cmd
	ended chan struct{}
	calls map[string]int
}

func (f *endedSlurm) exec(_ context.Context, argv []string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[argv[0]]++
	switch argv[0] {
	case "sbatch":
		var output string
		for _, a := range argv[1:] {
			if o, ok := strings.CutPrefix(a, "--output="); ok {
				output = o
			}
		}
		cmd, err := startJob(argv[len(argv)-1], output)
		if err != nil {
			return "", err
		}
		f.cmd, f.ended = cmd, make(chan struct{})
		ended := f.ended
		go func() { _ = cmd.Wait(); close(ended) }()
		f.t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); <-ended })
		return "12\n", nil
	case "squeue":
		select {
		case <-f.ended:
			return "12|FAILED|NonZeroExitCode|0:02\n", nil
		default:
			return "12|RUNNING|None|0:01\n", nil
		}
	case "scontrol":
		return "JobId=12 JobState=FAILED ExitCode=0:9\n", nil
	}
	return "", fmt.Errorf("endedSlurm: unexpected %q", argv)
}

// A stop of a session whose runner is gone and whose job has ended stops
// nothing, and says how the job ended, its exit code included: the one
// place a stop asks for more than the queue listing.
func TestStopEndedJobSaysItsExitCode(t *testing.T) {
	f := &endedSlurm{t: t, calls: map[string]int{}}
	dir := filepath.Join(t.TempDir(), "s")
	if _, err := Launch(ctx(t), dir, Options{Via: "slurm", Exec: f.exec, RunnerArgs: []string{"--heartbeat", "200ms"}}); err != nil {
		t.Fatal(err)
	}
	s, err := master.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.ReadState()
	if err != nil || st.Phase == protocol.PhaseStopped {
		t.Fatalf("state %+v, %v", st, err)
	}
	// The job's end: its runner (and the job's shell with it) killed.
	f.mu.Lock()
	pgid, ended := f.cmd.Process.Pid, f.ended
	f.mu.Unlock()
	_ = syscall.Kill(st.RunnerPID, syscall.SIGKILL)
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	<-ended
	_, err = StopLaunched(ctx(t), dir, StopOptions{Exec: f.exec})
	if !errors.Is(err, master.ErrRunnerNotAlive) || !strings.Contains(err.Error(), "FAILED (NonZeroExitCode, exit 0:9)") {
		t.Errorf("stop: %v; want runner not alive and the job FAILED (NonZeroExitCode, exit 0:9)", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls["scontrol"] != 1 || f.calls["scancel"] != 0 {
		t.Errorf("scheduler commands %v: want one scontrol, no scancel", f.calls)
	}
}

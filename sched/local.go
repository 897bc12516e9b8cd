package sched

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Local runs the job script as a detached process on this host (its own
// session, stdin from /dev/null, output to the submission's file). Its job
// id is "<pid>@<host>:<start>", start being the process's start time in
// clock ticks since boot (/proc/<pid>/stat), so that a reused pid is never
// mistaken for the job. Only the host that started a job can query or
// cancel it.
type Local struct{}

// Name returns "local".
func (Local) Name() string { return "local" }

// exits holds the exit status of local jobs this process started and
// reaped, by job id.
var exits sync.Map

// Submit starts the script and returns its job id. The output is opened
// with s.OpenOutput where set (a session's root), else by path. The process is reaped by
// a goroutine of this process (so it never lingers as a zombie); when this
// process exits first, init adopts it.
func (Local) Submit(ctx context.Context, _ Exec, s Submission) (string, error) {
	open := s.OpenOutput
	if open == nil {
		open = func() (*os.File, error) { return os.OpenFile(s.Output, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600) }
	}
	out, err := open()
	if err != nil {
		return "", fmt.Errorf("sched: the job's output %s: %w", s.Output, err)
	}
	defer out.Close()
	cmd := exec.Command("/bin/sh", append(append([]string{}, s.Args...), s.Script)...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = s.WorkDir, out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("sched: start %s: %w", s.Script, err)
	}
	host, _ := os.Hostname()
	start, _, err := procStat(cmd.Process.Pid)
	if err != nil {
		start = 0 // Already gone: the reaper records its exit.
	}
	id := fmt.Sprintf("%d@%s:%d", cmd.Process.Pid, host, start)
	done := make(chan struct{})
	exits.Store(id, done) // Present but open: running.
	go func() {
		_ = cmd.Wait() // Status read below.
		exits.Store(id, cmd.ProcessState)
		close(done)
	}()
	return id, nil
}

// ParseLocalID splits "<pid>@<host>:<start>".
func ParseLocalID(id string) (pid int, host string, start uint64, err error) {
	p, rest, ok1 := strings.Cut(id, "@")
	i := strings.LastIndex(rest, ":")
	if !ok1 || i < 0 {
		return 0, "", 0, fmt.Errorf("sched: bad local job id %q", id)
	}
	pid, err1 := strconv.Atoi(p)
	start, err2 := strconv.ParseUint(rest[i+1:], 10, 64)
	if err1 != nil || err2 != nil || pid <= 0 {
		return 0, "", 0, fmt.Errorf("sched: bad local job id %q", id)
	}
	return pid, rest[:i], start, nil
}

// Query looks the process up in /proc.
func (Local) Query(_ context.Context, _ Exec, id string) (Job, error) {
	pid, host, start, err := ParseLocalID(id)
	if err != nil {
		return Job{ID: id}, err
	}
	if me, _ := os.Hostname(); host != me {
		return Job{ID: id}, fmt.Errorf("sched: local job %s was started on %s; only that host can see it", id, host)
	}
	if v, ok := exits.Load(id); ok {
		if ps, ok := v.(*os.ProcessState); ok {
			return exitedJob(id, ps), nil
		}
	}
	st, state, err := procStat(pid)
	if err != nil || st != start || state == "Z" || state == "X" {
		return Job{ID: id, State: Gone, Raw: "exited", Reason: "the process is gone"}, nil
	}
	return Job{ID: id, State: Running, Raw: "running"}, nil
}

func exitedJob(id string, ps *os.ProcessState) Job {
	j := Job{ID: id, Raw: "exited", State: Done, ExitCode: strconv.Itoa(ps.ExitCode())}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		j.State, j.ExitCode, j.Reason = Killed, "", "killed by "+ws.Signal().String()
	} else if ps.ExitCode() != 0 {
		j.State = Failed
	}
	return j
}

// procStat returns the start time (field 22) and state (field 3) of pid.
func procStat(pid int) (uint64, string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, "", err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // comm may hold spaces and parentheses
	if i < 0 {
		return 0, "", fmt.Errorf("sched: cannot parse /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return 0, "", fmt.Errorf("sched: cannot parse /proc/%d/stat", pid)
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	return start, f[0], err
}

// CancelCommand describes what Cancel does (signals, not a command).
func (Local) CancelCommand(id string, force bool) []string {
	pid, _, _, _ := ParseLocalID(id)
	if force {
		return []string{"kill", "-KILL", strconv.Itoa(pid)}
	}
	return []string{"kill", "-TERM", strconv.Itoa(pid), "(twice)"}
}

// termPause separates the two SIGTERMs of a local cancel.
const termPause = 200 * time.Millisecond

// Cancel sends SIGTERM twice (for the runner, a first signal asks for a
// graceful stop and a second one for a force stop: the running command is
// ended at once, as when a scheduler cancels a job), or SIGKILL with
// force, to the job's process after checking it is still the same process.
func (d Local) Cancel(ctx context.Context, x Exec, id string, force bool) error {
	pid, _, _, err := ParseLocalID(id)
	if err != nil {
		return err
	}
	sigs := []syscall.Signal{syscall.SIGTERM, syscall.SIGTERM}
	if force {
		sigs = []syscall.Signal{syscall.SIGKILL}
	}
	for i, sig := range sigs {
		if i > 0 {
			time.Sleep(termPause)
		}
		j, err := d.Query(ctx, x, id)
		if err != nil || !j.State.Active() {
			return err
		}
		if err := syscall.Kill(pid, sig); err != nil && err != syscall.ESRCH {
			return fmt.Errorf("sched: kill %d: %w", pid, err)
		}
	}
	return nil
}

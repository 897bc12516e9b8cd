package sched

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// State is a job's state in words common to every scheduler. The
// scheduler's own word is kept in [Job].Raw.
type State string

// States. Pending, Running, Ending and Suspended are active: the job holds
// (or waits for) a slot and may still start or run a runner.
const (
	Pending   State = "pending"   // queued, not started (Slurm PENDING, SGE qw, LSF PEND)
	Running   State = "running"   // started
	Ending    State = "ending"    // being torn down (Slurm COMPLETING, SGE dr)
	Suspended State = "suspended" // held or suspended while it had started
	Done      State = "done"      // ended with exit code 0
	Failed    State = "failed"    // ended with a non-zero exit code, or could not start
	Cancelled State = "cancelled" // cancelled by a user or an admin (scancel, qdel, bkill)
	Killed    State = "killed"    // ended by the scheduler: time limit, preemption, node failure
	Gone      State = "gone"      // the scheduler no longer knows the job (or never did)
)

// Active reports whether a job in state s is queued or holds resources.
func (s State) Active() bool {
	return s == Pending || s == Running || s == Ending || s == Suspended
}

// Job is a scheduler's view of one job.
type Job struct {
	ID       string `json:"job_id"`
	State    State  `json:"state"`
	Raw      string `json:"scheduler_state,omitempty"` // the scheduler's own word: PENDING, qw, PEND
	Reason   string `json:"reason,omitempty"`          // why pending, or why it ended, in the scheduler's words
	ExitCode string `json:"exit_code,omitempty"`       // as the scheduler reports it ("0:15", "3")
	Elapsed  string `json:"elapsed,omitempty"`         // run (or pending) time as the scheduler reports it
}

// String is the job's state for people: "PENDING (Resources)",
// "FAILED (NonZeroExitCode, exit 3:0)".
func (j Job) String() string {
	s := j.Raw
	if s == "" {
		s = string(j.State)
	}
	var why []string
	if j.Reason != "" && j.Reason != "None" {
		why = append(why, j.Reason)
	}
	if j.ExitCode != "" && !j.State.Active() {
		why = append(why, "exit "+j.ExitCode)
	}
	if len(why) > 0 {
		s += " (" + strings.Join(why, ", ") + ")"
	}
	return s
}

// Submission is what a driver submits: a job script and where its output goes.
type Submission struct {
	Script  string   // absolute path of the job script (a /bin/sh script)
	Output  string   // absolute path of the job's stdout and stderr
	Name    string   // job name
	WorkDir string   // working directory of the job
	Args    []string // extra arguments for the submit command, before the script (--submit-arg)
	// OpenOutput, when set, opens Output for a driver that writes it
	// itself (Local): the session's own way to its file (through its
	// root: no symlink followed, no FIFO blocked on, no hard link written
	// through). Nil: Output is opened by path.
	OpenOutput func() (*os.File, error)
}

// Driver submits, inspects and cancels jobs of one scheduler. Every method
// runs the scheduler's commands through x, so tests can replay outputs.
type Driver interface {
	// Name is the --via word: slurm, sge, lsf or local.
	Name() string
	// Submit submits s and returns the job id.
	Submit(ctx context.Context, x Exec, s Submission) (string, error)
	// Query returns the scheduler's view of the job. A job the scheduler
	// does not know is State Gone with a nil error; an error means the
	// scheduler could not be asked.
	Query(ctx context.Context, x Exec, id string) (Job, error)
	// Cancel asks the scheduler to end the job: its usual cancel (signals
	// the job, then kills it after the scheduler's grace) or, with force,
	// SIGKILL at once.
	Cancel(ctx context.Context, x Exec, id string, force bool) error
	// CancelCommand is the command line Cancel runs, for messages.
	CancelCommand(id string, force bool) []string
}

// Releaser is a Driver whose scheduler may hold a job it failed to start
// and then waits for someone to release it (Slurm: PENDING, reason
// "launch failed requeued held"): such a job never starts on its own.
type Releaser interface {
	// HeldAfterFailedStart reports whether j waits only for a release.
	HeldAfterFailedStart(j Job) bool
	// Release asks the scheduler to queue the held job again.
	Release(ctx context.Context, x Exec, id string) error
	// ReleaseCommand is the command line Release runs, for messages.
	ReleaseCommand(id string) []string
}

// Stuck reports whether the scheduler keeps job j in its queue although it
// will never run it on its own: Slurm holds a job a node failed to start
// ([Releaser]), Grid Engine keeps a job in error state (Eqw) until it is
// deleted. A pool's respawn cancels such a job before it launches the
// session again, so that none is left behind in the queue.
func Stuck(d Driver, j Job) bool {
	if r, ok := d.(Releaser); ok && r.HeldAfterFailedStart(j) {
		return true
	}
	_, sge := d.(SGE)
	return sge && j.State == Failed && strings.Contains(j.Raw, "E") // qstat's word; qacct's is "finished".
}

// For returns the driver named by a --via word.
func For(via string) (Driver, error) {
	switch via {
	case "slurm":
		return Slurm{}, nil
	case "sge":
		return SGE{}, nil
	case "lsf":
		return LSF{}, nil
	case "local":
		return Local{}, nil
	}
	return nil, fmt.Errorf("sched: unknown scheduler %q (want local, slurm, sge or lsf)", via)
}

// Exec runs one command line and returns its stdout. A non-zero exit is an
// *ExitError carrying stderr; a missing program wraps ErrNoScheduler.
type Exec func(ctx context.Context, argv []string) (stdout string, err error)

// ErrNoScheduler means the scheduler's command is not installed here.
var ErrNoScheduler = errors.New("sched: scheduler command not found")

// ExitError is a scheduler command that exited non-zero.
type ExitError struct {
	Argv   []string
	Code   int
	Stdout string
	Stderr string
}

func (e *ExitError) Error() string {
	msg := strings.TrimSpace(e.Stderr)
	if msg == "" {
		msg = strings.TrimSpace(e.Stdout)
	}
	return fmt.Sprintf("%s exited %d: %s", strings.Join(e.Argv, " "), e.Code, msg)
}

// CommandTimeout bounds every scheduler command RunCommand runs.
const CommandTimeout = 60 * time.Second

// RunCommand is the real Exec: it runs argv with CommandTimeout.
func RunCommand(ctx context.Context, argv []string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, CommandTimeout)
	defer cancel()
	if _, err := exec.LookPath(argv[0]); err != nil {
		return "", fmt.Errorf("%w: %s (is the scheduler's client installed and on PATH?)", ErrNoScheduler, argv[0])
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return out.String(), &ExitError{Argv: argv, Code: ee.ExitCode(), Stdout: out.String(), Stderr: errb.String()}
	}
	if err != nil {
		return out.String(), fmt.Errorf("sched: %s: %w", argv[0], err)
	}
	return out.String(), nil
}

// stderrOf returns the stderr (and stdout) of a failed command, lowercased,
// for matching "unknown job" messages.
func stderrOf(err error) string {
	var ee *ExitError
	if errors.As(err, &ee) {
		return strings.ToLower(ee.Stderr + "\n" + ee.Stdout)
	}
	return ""
}

// firstLine returns the first non-empty line of s, trimmed.
func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return l
		}
	}
	return ""
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

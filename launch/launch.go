package launch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/internal/sessionio"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
	"github.com/skillpilot/skillpilot/sched"
)

// Files of a launched session (PROTOCOL.md, "Launch").
const (
	FileLaunch       = "state/launch.json" // the scheduler and job that run the session's runner
	FileLaunchScript = "state/launch.sh"   // the job script: exec runner --session DIR -- TOOL ARGS
	FileLaunchOutput = "state/launch.out"  // the job's stdout and stderr (the runner's log)
	fileLaunchLock   = "state/launch.lock" // flock held by a launcher while it checks, submits and records
)

// Options say how Launch starts a runner.
type Options struct {
	// Via names the scheduler: "local" (a detached process on this host),
	// "slurm", "sge" or "lsf". Required.
	Via string
	// SubmitArgs are passed to the submit command before the script
	// (sbatch --time=4:00:00, qsub -l h_rt=..., bsub -q ...). Not for local.
	SubmitArgs []string
	// Tool is the tool and its arguments (empty: the runner's default, tclsh).
	Tool []string
	// RunnerArgs are extra runner flags (--init FILE, --heartbeat 500ms, ...).
	RunnerArgs []string
	// Runner is the runner executable. Empty: $SP_RUNNER, else "runner"
	// beside this executable, else "runner" on PATH. On a farm it must be
	// a path the execution hosts see.
	Runner string
	// JobName defaults to "sp-" and the session directory's base name.
	JobName string
	// ReadyTimeout bounds the wait for the runner to serve (0: as long as
	// the job lives). When it passes, the job is left as it is.
	ReadyTimeout time.Duration
	// NoWait returns as soon as the job is submitted and recorded.
	NoWait bool
	// Progress, if set, receives one line per change of the job's state
	// and one every ten seconds while the job is pending.
	Progress func(string)
	// Exec runs scheduler commands (nil: sched.RunCommand).
	Exec sched.Exec

	// Respawn: a pool's heal relaunches the session. It refuses (with
	// ErrStoppedOnPurpose) a session whose launch.json says it was stopped
	// by StopLaunched, so a deliberate stop is never undone. It cancels
	// and replaces an earlier job the scheduler keeps but will never run
	// (sched.Stuck: Slurm's "launch failed requeued held", SGE's Eqw).
	Respawn bool
}

// Info is state/launch.json. It is written by the launcher only, once
// per launch, atomically.
type Info struct {
	ProtocolVersion int           `json:"protocol_version"`
	LaunchID        string        `json:"launch_id"`
	Via             string        `json:"via"`
	JobID           string        `json:"job_id"`
	Launches        int           `json:"launches"` // 1 for the session's first launch, +1 for each relaunch
	SubmittedAt     protocol.Time `json:"submitted_at"`
	SubmitHost      string        `json:"submit_host"`
	Submitter       string        `json:"submitter"`
	SubmitCommand   []string      `json:"submit_command"`
	RunnerCommand   []string      `json:"runner_command"`
	Script          string        `json:"script"`
	Output          string        `json:"output"`
	// StoppedAt and StoppedBy are set by StopLaunched (master stop, master
	// pool stop) before it stops the session: a pool's heal does not
	// respawn a session stopped on purpose. A new launch clears them.
	StoppedAt *protocol.Time `json:"stopped_at,omitempty"`
	StoppedBy string         `json:"stopped_by,omitempty"`
	// ArrayJobID and ArrayIndex are set when the runner is one element of
	// a job array (master pool start/grow via slurm, sge or lsf): JobID is
	// then the element's id ("123_4", "123.4", "123[4]"), ArrayJobID the
	// array's ("123") and ArrayIndex the element's index (>= 1).
	ArrayJobID string `json:"array_job_id,omitempty"`
	ArrayIndex int    `json:"array_index,omitempty"`
}

// Result is what Launch found.
type Result struct {
	Info    Info
	Job     sched.Job     // the scheduler's last view of the job
	Status  master.Status // the runner's status once it serves (zero with NoWait)
	Pending time.Duration // how long the job was seen pending (our clock)
	Elapsed time.Duration // submit to serving (our clock)
	// Releases counts the times the wait released the job after the
	// scheduler held it for a failed start (see [sched.Releaser]).
	Releases int
}

// Launch starts a runner for the session in dir through a scheduler and
// waits until it serves: state.json has a new session_id, phase idle or
// busy, and the runner holds its lock (local filesystem) or has written a
// heartbeat (network filesystem). While it waits it asks the scheduler
// about the job, and fails with ErrLaunchFailed as soon as the job ended
// without serving, saying how (the scheduler's state, reason and exit code,
// and the last lines of the job's output).
//
// Launch refuses (ErrAlreadyLaunched, changing nothing) when a runner
// serves the session or the job of an earlier launch is still queued or
// running. The check, the submission and launch.json are done under a
// flock on state/launch.lock, so two launchers on one host (or on NFS
// v4 clients) cannot both submit.
func Launch(ctx context.Context, dir string, opts Options) (*Result, error) {
	d, err := sched.For(opts.Via)
	if err != nil {
		return nil, sessionio.UsageError("%v", err)
	}
	if opts.Via == "local" && len(opts.SubmitArgs) > 0 {
		return nil, sessionio.UsageError("--submit-arg has no meaning with --via local")
	}
	x := opts.Exec
	if x == nil {
		x = sched.RunCommand
	}
	runnerPath, err := FindRunner(opts.Runner)
	if err != nil {
		return nil, err
	}
	s, err := createSession(dir)
	if err != nil {
		return nil, err
	}
	info, before, err := submitLocked(ctx, s, d, x, runnerPath, opts)
	if err != nil {
		return nil, err
	}
	res := &Result{Info: *info}
	progress(opts.Progress, "job %s submitted (%s)", info.JobID, info.Via)
	if opts.NoWait {
		return res, nil
	}
	return res, waitServing(ctx, s, d, x, before, opts, res)
}

// submitLocked checks that nothing serves the session, writes the job
// script, submits it and records launch.json, all under the launch lock.
// It returns the session_id state.json held before the launch.
func submitLocked(ctx context.Context, s *master.Session, d sched.Driver, x sched.Exec, runnerPath string, opts Options) (*Info, string, error) {
	unlock, err := lockLaunch(ctx, s)
	if err != nil {
		return nil, "", err
	}
	defer unlock()
	info, before, err := prepare(ctx, s, d, x, runnerPath, opts, "")
	if err != nil {
		return nil, "", err
	}
	name := opts.JobName
	if name == "" {
		name = "sp-" + filepath.Base(s.Dir())
	}
	sub := sched.Submission{Script: jobPath(s, FileLaunchScript), Output: jobPath(s, FileLaunchOutput), Name: name, WorkDir: s.Dir(), Args: opts.SubmitArgs,
		OpenOutput: func() (*os.File, error) { return appendOutput(s) }}
	info.SubmitCommand = submitCommand(d, sub)
	id, err := d.Submit(ctx, x, sub)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %w", ErrSubmitFailed, err)
	}
	info.JobID = id
	if err := writeLaunch(s, info, fsq.Durable); err != nil {
		return nil, "", fmt.Errorf("master: job %s submitted but not recorded (cancel it by hand): %w", id, err)
	}
	return info, before, nil
}

// prepare, under the launch lock, checks that nothing serves the session
// and no earlier job is active, writes the job script and returns the
// launch's Info (without job id and submit command) and the session_id
// state.json held before the launch. A non-empty redirect is prepended to
// the script as a shell line (an array element sends its output there).
func prepare(ctx context.Context, s *master.Session, d sched.Driver, x sched.Exec, runnerPath string, opts Options, redirect string) (*Info, string, error) {
	prev, err := Read(s)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, "", err
	}
	if prev != nil {
		if opts.Respawn && prev.StoppedAt != nil {
			return nil, "", fmt.Errorf("%w (by %s at %s)", ErrStoppedOnPurpose, prev.StoppedBy, prev.StoppedAt)
		}
		if err := refuseActive(ctx, prev, x, opts); err != nil {
			return nil, "", err
		}
	}
	if st, err := s.Status(ctx); err == nil && st.Alive {
		return nil, "", fmt.Errorf("%w: a runner serves %s (pid %d on %s, phase %s)", ErrAlreadyLaunched, s.Dir(), st.RunnerPID, st.RunnerHost, st.Phase)
	}
	if !s.Core().OnNetworkFS() && s.Core().LockHeld() { // A runner that has not written its state yet.
		return nil, "", fmt.Errorf("%w: a runner holds %s of %s", ErrAlreadyLaunched, protocol.FileLock, s.Dir())
	}
	var before string
	if st, err := s.ReadState(); err == nil {
		before = st.SessionID
	}
	info := &Info{ProtocolVersion: protocol.Version, LaunchID: master.NewCmdID(), Via: d.Name(), Launches: 1,
		SubmittedAt: protocol.Now(), Submitter: s.Core().Owner(), Script: FileLaunchScript, Output: FileLaunchOutput}
	if prev != nil {
		info.Launches = prev.Launches + 1
	}
	info.SubmitHost, _ = os.Hostname()
	info.RunnerCommand = append([]string{runnerPath, "--session", s.Dir()}, opts.RunnerArgs...)
	if len(opts.Tool) > 0 {
		info.RunnerCommand = append(append(info.RunnerCommand, "--"), opts.Tool...)
	}
	if d.Name() != (sched.Local{}).Name() { // local opens launch.out through the session's root (OpenOutput).
		redirect = outputCheck(jobPath(s, FileLaunchOutput)) + redirect
	}
	script := fmt.Sprintf("#!/bin/sh\n# Written by master launch (launch_id %s): runs the session's runner.\n%sSP_LAUNCH_ID=%s; export SP_LAUNCH_ID\nexec %s\n",
		info.LaunchID, redirect, info.LaunchID, shellJoin(info.RunnerCommand))
	if err := writeFile(s, FileLaunchScript, []byte(script), 0o700, fsq.FileSynced); err != nil {
		return nil, "", fmt.Errorf("master: write job script: %w", err)
	}
	return info, before, nil
}

// refuseActive returns ErrAlreadyLaunched if prev's job is queued or
// running, or kept by the scheduler but never to run ([sched.Stuck]:
// Slurm's hold after a failed start, Grid Engine's error state), and an
// error if the scheduler cannot say. A respawn cancels a stuck job instead
// and goes on: the relaunch replaces it, and the pool's bound on
// relaunches bounds the retries.
func refuseActive(ctx context.Context, prev *Info, x sched.Exec, opts Options) error {
	pd, err := sched.For(prev.Via)
	if err != nil {
		return fmt.Errorf("master: %s: %w", FileLaunch, err)
	}
	j, err := pd.Query(ctx, x, prev.JobID)
	if err != nil {
		return fmt.Errorf("master: cannot tell whether job %s (%s) of the last launch still runs, so not launching another: %w (remove %s once it is known to be gone)",
			prev.JobID, prev.Via, err, FileLaunch)
	}
	if sched.Stuck(pd, j) {
		cancel := strings.Join(pd.CancelCommand(prev.JobID, false), " ")
		if !opts.Respawn {
			// Slurm's hold and Grid Engine's error state alike: a job left
			// in the queue behind a new one would run a second runner on
			// the session if anyone cleared it.
			return fmt.Errorf("%w: job %s (%s) is %s, which %s will not run on its own: %s or master stop --session removes it; then launch again",
				ErrAlreadyLaunched, prev.JobID, prev.Via, j, prev.Via, cancel)
		}
		if err := pd.Cancel(ctx, x, prev.JobID, false); err != nil {
			return fmt.Errorf("master: job %s (%s) is %s and %s failed, so not launching another: %w",
				prev.JobID, prev.Via, j, cancel, err)
		}
		progress(opts.Progress, "job %s (%s) was %s: %s will not run it; cancelled it to launch again", prev.JobID, prev.Via, j, prev.Via)
		return nil
	}
	if j.State.Active() {
		return fmt.Errorf("%w: job %s (%s) is %s", ErrAlreadyLaunched, prev.JobID, prev.Via, j)
	}
	return nil
}

// submitCommand is the command line a driver runs, for launch.json.
func submitCommand(d sched.Driver, s sched.Submission) []string {
	switch v := d.(type) {
	case sched.Slurm:
		return v.SubmitCommand(s)
	case sched.SGE:
		return v.SubmitCommand(s)
	case sched.LSF:
		return v.SubmitCommand(s)
	}
	return []string{"/bin/sh", s.Script}
}

// ReadLaunch returns the session's launch.json (an error wrapping
// os.ErrNotExist if the session was never launched).
func ReadLaunch(dir string) (*Info, error) {
	s, err := master.Open(dir)
	if err != nil {
		return nil, err
	}
	return Read(s)
}

// Read is ReadLaunch for an open session.
func Read(s *master.Session) (*Info, error) {
	b, err := readLaunchFile(s)
	if err != nil {
		return nil, err
	}
	var li Info
	if err := json.Unmarshal(b, &li); err != nil {
		return nil, fmt.Errorf("master: %s: %w", FileLaunch, err)
	}
	if li.Via == "" || li.JobID == "" {
		return nil, fmt.Errorf("master: %s: via and job_id are required", FileLaunch)
	}
	return &li, nil
}

// ErrStoppedOnPurpose: a respawn found the session stopped by StopLaunched.
var ErrStoppedOnPurpose = errors.New("master: the session was stopped on purpose")

// markStopped records in launch.json, under the launch lock, that the
// session is being stopped on purpose, and returns the launch it stops.
// Under the lock a concurrent respawn either sees the mark or has already
// written the launch this stop then stops. The mark is visible when it
// returns (a rename) but not yet durable: the caller makes it so
// (syncFile) while the runner stops, and reports the stop only then.
func markStopped(ctx context.Context, s *master.Session) (*Info, error) {
	unlock, err := lockLaunch(ctx, s)
	if err != nil {
		return nil, err
	}
	defer unlock()
	li, err := Read(s)
	if err != nil {
		return nil, err
	}
	now := protocol.Now()
	li.StoppedAt, li.StoppedBy = &now, s.Core().Owner()
	return li, writeLaunch(s, li, fsq.Volatile)
}

// writeLaunch replaces launch.json with li, durably unless d says otherwise.
func writeLaunch(s *master.Session, li *Info, d fsq.Durability) error {
	b, err := json.MarshalIndent(li, "", "  ")
	if err != nil {
		return err
	}
	return writeFile(s, FileLaunch, append(b, '\n'), 0o660, d)
}

// FindRunner resolves the runner executable to an absolute path.
func FindRunner(p string) (string, error) {
	if p == "" {
		p = os.Getenv("SP_RUNNER")
	}
	if p == "" {
		if exe, err := os.Executable(); err == nil {
			if cand := filepath.Join(filepath.Dir(exe), "runner"); isExecutable(cand) {
				p = cand
			}
		}
	}
	if p == "" {
		p = "runner"
	}
	if !strings.Contains(p, "/") {
		lp, err := exec.LookPath(p)
		if err != nil {
			return "", sessionio.UsageError("cannot find the runner executable (%v): give --runner PATH or set SP_RUNNER", err)
		}
		p = lp
	}
	abs, err := filepath.Abs(p)
	if err != nil || !isExecutable(abs) {
		return "", sessionio.UsageError("runner %s is not an executable file", p)
	}
	return abs, nil
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// shellJoin quotes argv for /bin/sh.
// outputCheck is the job script's first line where state/launch.out is
// opened by path on the execution host — by the scheduler (Slurm's
// --output, qsub -o, bsub -o) or by the script's own redirect (an array
// element): a symlink or anything but a regular file at that name is
// refused there, and the runner is not started. A scheduler
// that opened a planted symlink has written its lines through it by then
// (it takes a path; PROTOCOL.md 20), but nothing more is: no runner
// output goes there, and the job fails saying why on stderr.
func outputCheck(p string) string {
	q := shellJoin([]string{p})
	msg := shellJoin([]string{"master launch: " + p + " is a symlink or not a regular file: the runner is not started (remove it; the next launch makes it again)"})
	return fmt.Sprintf("if [ -h %s ] || { [ -e %s ] && [ ! -f %s ]; }; then echo %s >&2; exit 1; fi\n", q, q, q, msg)
}

func shellJoin(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

func progress(f func(string), format string, args ...any) {
	if f != nil {
		f(fmt.Sprintf(format, args...))
	}
}

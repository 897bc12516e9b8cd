package launch

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/skillpilot/skillpilot/internal/sessionio"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
	"github.com/skillpilot/skillpilot/sched"
)

// Steps of StopLaunched: which one ended the job.
const (
	StepStopRequest = "stop_request"     // the runner stopped on the stop request and the job ended
	StepCancel      = "scheduler_cancel" // scancel / qdel / bkill / SIGTERM ended the job
	StepKill        = "scheduler_kill"   // the forced cancel (SIGKILL) ended the job
)

// StopOptions say how StopLaunched escalates.
type StopOptions struct {
	// Mode of the stop request (default graceful: the running command
	// finishes first).
	Mode protocol.StopMode
	// Grace is how long the runner has to stop on the request before the
	// scheduler cancels the job (0: 30 s).
	Grace time.Duration
	// CancelGrace is how long the scheduler's cancel has before the forced
	// one (0: 60 s; Slurm's own KillWait is 30 s by default).
	CancelGrace time.Duration
	Progress    func(string)
	Exec        sched.Exec // nil: sched.RunCommand
	// WholeArrays (StopMany): sessions that are elements of one job array
	// are cancelled together, by one cancel of the array's job id, instead
	// of one cancel per element. Only for callers that stop every element
	// of the array (master pool stop).
	WholeArrays bool
	// NoJobWait ends step (1) when the runner has stopped (state.json
	// phase stopped, its lock free on a local filesystem) rather than when
	// the scheduler no longer lists its job as active: the job's cancel is
	// then sent once and not waited for (with WholeArrays, one cancel per
	// array once every member's runner stopped), and the report's Step is
	// StepStopRequest. The scheduler may list the job as ending (Slurm
	// COMPLETING, Grid Engine's job report) for a few seconds more. A
	// runner that does not stop within Grace escalates as without it.
	// master pool stop sets it unless --wait-jobs.
	NoJobWait bool
}

// StopReport says how a launched session's job ended.
type StopReport struct {
	ProtocolVersion int       `json:"protocol_version"`
	JobID           string    `json:"job_id"`
	Via             string    `json:"via"`
	Step            string    `json:"step"` // StepStopRequest, StepCancel or StepKill
	Job             sched.Job `json:"job"`  // the scheduler's last view
	Message         string    `json:"message"`
}

// stopQuickPoll is how long a stop's waits poll before they watch.
const stopQuickPoll = time.Second

// errNotLaunched: the session has no launch.json (a plain stop applies).
var errNotLaunched = errors.New("master: the session was not launched by master launch")

// StopLaunched stops a launched session's runner and makes sure its job is
// gone, escalating: (1) a stop request, waiting up to Grace for the runner
// to stop and the job to end; (2) the scheduler's cancel (scancel, qdel,
// bkill; SIGTERM for local), waiting up to CancelGrace; (3) the forced
// cancel (SIGKILL). A job still pending goes straight to (2). It returns
// the step that ended the job. With no live runner and no active job it
// returns ErrRunnerNotAlive and does nothing; a session never launched
// gives an error wrapping errNotLaunched.
func StopLaunched(ctx context.Context, dir string, opts StopOptions) (StopReport, error) {
	st, err := beginStop(ctx, dir, opts, nil)
	if err == nil && st.cancelAfter {
		st.sendCancel(ctx, st.li.JobID)
	}
	if err != nil || st.done {
		return st.rep, err
	}
	for _, force := range []bool{false, true} {
		if ok, err := st.cancel(ctx, st.li.JobID, force, true); ok || err != nil {
			return st.rep, err
		}
	}
	return st.rep, st.stillActive()
}

// stopping is a StopLaunched under way: the stop request is done and the
// scheduler's cancel may follow.
type stopping struct {
	opts  StopOptions
	li    *Info
	d     sched.Driver
	x     sched.Exec
	alive bool // a runner served when the stop began
	rep   StopReport
	done  bool // the job ended (or nothing more can be done): rep is final
	// cancelAfter (NoJobWait): the runner stopped on its request; the
	// job's cancel is still to be sent, not waited for.
	cancelAfter bool
}

// beginStop marks the session stopped, asks its runner to stop and waits
// up to Grace for its job to end. With done unset, the scheduler's cancel
// is next. b, if not nil, is StopMany's batch (stopBatch).
func beginStop(ctx context.Context, dir string, opts StopOptions, b *stopBatch) (st *stopping, err error) {
	st = &stopping{}
	written, allWritten := func() {}, func() {}
	if b != nil {
		var done func()
		if done, err = b.enter(ctx); err != nil {
			return st, err
		}
		defer done()
		written, allWritten = done, b.written.Wait
	}
	s, err := master.Open(dir)
	if err != nil {
		return st, err
	}
	// The reply and the runner's end come within milliseconds: poll for
	// them before joining an inotify watcher, whose instance costs
	// milliseconds of kernel time to make and to drop (128 of them per
	// pool stop).
	s.QuickPoll = stopQuickPoll
	if _, err := Read(s); err != nil {
		return st, errors.Join(errNotLaunched, err)
	}
	li, err := markStopped(ctx, s) // Before anything stops: heal must not respawn it.
	if err != nil {
		return st, err
	}
	// The mark is visible (a rename); its fsyncs overlap the stop, which
	// is reported only once they are done. 128 sessions stopping at once
	// spent most of their time in those fsyncs before the stop requests.
	synced := make(chan error, 1)
	go func() { synced <- syncFile(s, FileLaunch) }()
	defer func() {
		if serr := <-synced; serr != nil && err == nil {
			err = fmt.Errorf("master: record the stop in %s: %w", FileLaunch, serr)
		}
	}()
	d, err := sched.For(li.Via)
	if err != nil {
		return st, err
	}
	x := opts.Exec
	if x == nil {
		x = sched.RunCommand
	}
	if opts.Grace <= 0 {
		opts.Grace = 30 * time.Second
	}
	if opts.CancelGrace <= 0 {
		opts.CancelGrace = time.Minute
	}
	if opts.Mode == "" {
		opts.Mode = protocol.StopGraceful
	}
	st.opts, st.li, st.d, st.x = opts, li, d, x
	st.rep = StopReport{ProtocolVersion: protocol.Version, JobID: li.JobID, Via: li.Via}
	rep := &st.rep
	// Liveness alone, not the whole Status (queue, results, lease, spool):
	// 128 sessions stop at once.
	alive, _ := s.Alive(ctx)
	st.alive = alive
	// A live runner is asked to stop at once; the scheduler's answer (one
	// squeue or qstat shared by an array's elements) comes meanwhile. The
	// queue listing alone, as WaitJobGone asks: a runner that stops fast
	// ends its job before the listing runs, and Query would then ask
	// scontrol for that element's exit code, one RPC to slurmctld per
	// element of a pool stopping at once.
	type answer struct {
		job sched.Job
		err error
	}
	answerCh := make(chan answer, 1)
	go func() {
		j, err := sched.QueryState(ctx, d, x, li.JobID)
		answerCh <- answer{j, err}
	}()
	var serr error
	gctx, cancel := context.WithTimeout(ctx, opts.Grace)
	defer cancel()
	if alive {
		state, _ := s.ReadState()
		progress(opts.Progress, "asking the runner (pid %d on %s) to stop (%s); job %s (%s)", state.RunnerPID, state.Hostname, opts.Mode, li.JobID, li.Via)
		serr = stopRequest(gctx, s, opts.Mode, written, allWritten)
	}
	written()
	a := <-answerCh
	if a.err != nil {
		st.done = true
		// The scheduler cannot be asked (not installed here; a local job of
		// another host): the stop request is all this host can do.
		if !alive {
			return st, fmt.Errorf("master: ask %s about job %s: %w", li.Via, li.JobID, a.err)
		}
		if serr != nil {
			return st, fmt.Errorf("master: the runner did not stop within %v and job %s (%s) cannot be cancelled from here: %w", opts.Grace, li.JobID, li.Via, serr)
		}
		progress(opts.Progress, "cannot ask %s about job %s (%v); the stop request was all", li.Via, li.JobID, a.err)
		rep.Step, rep.Message = StepStopRequest, fmt.Sprintf("the runner stopped on the stop request; job %s (%s) could not be checked: %v", li.JobID, li.Via, a.err)
		return st, nil
	}
	rep.Job = a.job
	if !alive && !a.job.State.Active() {
		st.done = true
		if j, err := d.Query(ctx, x, li.JobID); err == nil && !j.State.Active() {
			a.job = j // With its exit code, where the scheduler has one.
		}
		return st, fmt.Errorf("%w: job %s (%s) is %s and no runner serves the session; nothing to stop", master.ErrRunnerNotAlive, li.JobID, li.Via, a.job)
	}
	if alive {
		if serr == nil && opts.NoJobWait {
			serr = waitRunnerGone(gctx, s)
		}
		if serr == nil && opts.NoJobWait {
			// A local job is the runner's own process, which has just said
			// it stopped: there is nothing else to cancel.
			st.done, st.cancelAfter = true, a.job.State.Active() && li.Via != "local"
			rep.Step = StepStopRequest
			rep.Message = fmt.Sprintf("the runner stopped on the stop request; job %s (%s) was %s", li.JobID, li.Via, a.job)
			if st.cancelAfter {
				rep.Message += "; cancelled, its end not waited for"
			}
			return st, nil
		}
		if serr == nil {
			rep.Job, serr = WaitJobGone(gctx, d, x, li.JobID)
		}
		if serr == nil {
			st.done = true
			rep.Step = StepStopRequest
			rep.Message = fmt.Sprintf("the runner stopped on the stop request; job %s (%s) is %s", li.JobID, li.Via, rep.Job)
			return st, nil
		}
		if ctx.Err() != nil {
			st.done = true
			return st, sessionio.ContextEnd(ctx)
		}
		progress(opts.Progress, "the runner did not stop and end its job within %v (%v)", opts.Grace, serr)
	}
	return st, nil
}

// cancel runs the scheduler's cancel (forced or not) of job id (the
// session's own job, or the whole array it is an element of) unless run
// is false (another session's cancel already covered it), then waits up
// to CancelGrace for the session's job to end. ok: it ended.
func (st *stopping) cancel(ctx context.Context, id string, force, run bool) (ok bool, err error) {
	argv := strings.Join(st.d.CancelCommand(id, force), " ")
	if run {
		progress(st.opts.Progress, "running %s", argv)
		if err := st.d.Cancel(ctx, st.x, id, force); err != nil {
			progress(st.opts.Progress, "%s: %v", argv, err) // A job that ended meanwhile makes some schedulers complain.
		}
	}
	cctx, cancel := context.WithTimeout(ctx, st.opts.CancelGrace)
	j, err := WaitJobGone(cctx, st.d, st.x, st.li.JobID)
	cancel()
	st.rep.Job = j
	if err == nil {
		st.done = true
		st.rep.Step = map[bool]string{false: StepCancel, true: StepKill}[force]
		st.rep.Message = fmt.Sprintf("job %s (%s) ended by %s: %s", st.li.JobID, st.li.Via, argv, j)
		if st.alive {
			st.rep.Message = fmt.Sprintf("the runner did not stop within %v; %s", st.opts.Grace, st.rep.Message)
		}
		return true, nil
	}
	if ctx.Err() != nil {
		st.done = true
		return false, sessionio.ContextEnd(ctx)
	}
	return false, nil
}

// waitRunnerGone waits until the runner that said it stopped has let go
// of the session: its lock is free (local filesystem; the lock cannot be
// probed on a network filesystem, where state.json's phase stopped is
// all there is). The runner appends its runner_stop event and releases
// the lock after it writes the phase, so a cancel sent after this finds
// nothing of the runner's left to interrupt.
func waitRunnerGone(ctx context.Context, s *master.Session) error {
	if s.Core().OnNetworkFS() {
		return nil
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for wait := time.Millisecond; ; wait = min(wait*2, 50*time.Millisecond) {
		if !s.Core().LockHeld() {
			return nil
		}
		t.Reset(wait)
		select {
		case <-ctx.Done():
			return fmt.Errorf("the runner said it stopped but still holds its lock: %w", sessionio.ContextEnd(ctx))
		case <-t.C:
		}
	}
}

// sendCancel (NoJobWait) runs the scheduler's cancel of job id once,
// without waiting for the job to end: its runner has stopped, the cancel
// only makes sure nothing of the job is left. A failure is a note (a job
// that ended meanwhile makes some schedulers complain).
func (st *stopping) sendCancel(ctx context.Context, id string) {
	argv := strings.Join(st.d.CancelCommand(id, false), " ")
	progress(st.opts.Progress, "running %s (not waiting for the job to end)", argv)
	if err := st.d.Cancel(ctx, st.x, id, false); err != nil {
		progress(st.opts.Progress, "%s: %v", argv, err)
	}
}

func (st *stopping) stillActive() error {
	return fmt.Errorf("master: job %s (%s) is still %s after %s; ask the cluster's administrator",
		st.li.JobID, st.li.Via, st.rep.Job, strings.Join(st.d.CancelCommand(st.li.JobID, true), " "))
}

// stopRequest asks the runner to stop and waits until it has. It is the
// one place the escalation talks to the runner, so a change of the stop
// protocol (mailbox requests) touches only this function.
// written is called once the request is in ctl/ (or nothing will be);
// the wait for the reply begins once allWritten returns.
func stopRequest(ctx context.Context, s *master.Session, mode protocol.StopMode, written, allWritten func()) error {
	p, err := s.Stop(ctx, mode)
	written()
	if err != nil {
		return err
	}
	allWritten()
	_, err = p.Wait(ctx)
	return err
}

// WaitJobGone polls the scheduler until the job is no longer active. It
// asks with sched.QueryState (the queue listing alone where the driver
// can: the job it returns may lack the exit code Query would add), first
// after 20 ms, then at intervals growing by half up to 200 ms: a runner
// that stopped on request ends its job within milliseconds.
func WaitJobGone(ctx context.Context, d sched.Driver, x sched.Exec, id string) (sched.Job, error) {
	t := time.NewTimer(0)
	defer t.Stop()
	for wait := 20 * time.Millisecond; ; wait = min(wait+wait/2, 200*time.Millisecond) {
		j, err := sched.QueryState(ctx, d, x, id)
		if err == nil && !j.State.Active() {
			return j, nil
		}
		t.Reset(wait)
		select {
		case <-ctx.Done():
			if err != nil {
				return j, err
			}
			return j, sessionio.ContextEnd(ctx)
		case <-t.C:
		}
	}
}

// statusExec shares one run of a scheduler command among the Status calls
// that ask at the same moment (master pool status asks for every session
// at once; the elements of one array ask the same squeue or qstat). It
// keeps nothing once the run has ended.
// It is made on first use, not at every master start (issue 44).
var statusExec = sync.OnceValue(func() sched.Exec { return sched.SharedExec(sched.RunCommand, 0) })

// Status returns the launch status of s (what master status shows), or nil
// if s was never launched.
func Status(ctx context.Context, s *master.Session) *JobStatus {
	li, err := Read(s)
	if err != nil {
		return nil
	}
	ls := &JobStatus{Via: li.Via, JobID: li.JobID, Launches: li.Launches}
	d, err := sched.For(li.Via)
	if err == nil {
		qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		ls.Job, err = d.Query(qctx, statusExec(), li.JobID)
		cancel()
	}
	if err != nil {
		ls.Error = err.Error()
	}
	return ls
}

package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
	"github.com/skillpilot/skillpilot/sched"
)

// Farm errors a caller may branch on with errors.Is. Each is a
// sessionio.CodedError, so master.Classify gives its code and exit status.
var (
	// ErrAlreadyLaunched: the session already has a live runner, or the
	// job of an earlier launch is still queued or running. Nothing was
	// submitted. CLI exit 7 (nothing to act on), code already_launched.
	ErrAlreadyLaunched error = &farmError{"master: the session is already served or its job is still queued or running", CodeAlreadyLaunched, master.ExitNothingToDo}
	// ErrLaunchFailed: the job ended (or the local runner exited) before
	// its runner served the session, or the scheduler holds it after
	// failing to start it and releasing it did not help. CLI exit 5, code
	// launch_failed.
	ErrLaunchFailed error = &farmError{"master: the job did not bring up a runner that serves the session", CodeLaunchFailed, master.ExitNoRunner}
	// ErrSubmitFailed: the scheduler refused the job, or its submit command
	// is missing. CLI exit 10, code submit_failed.
	ErrSubmitFailed error = &farmError{"master: the scheduler did not accept the job", CodeSubmitFailed, master.ExitIO}
)

// Codes of the farm errors in the CLI's JSON output.
const (
	CodeAlreadyLaunched = "already_launched"
	CodeLaunchFailed    = "launch_failed"
	CodeSubmitFailed    = "submit_failed"
)

// farmError is a farm sentinel: its message, code and exit status.
type farmError struct {
	msg  string
	code string
	exit int
}

func (e *farmError) Error() string { return e.msg }

// ErrorCode implements sessionio.CodedError.
func (e *farmError) ErrorCode() (code string, exit int) { return e.code, e.exit }

// queryEvery is how often a waiting launcher asks the scheduler.
const queryEvery = time.Second

// maxReleases is how many times one wait releases a job its scheduler held
// after failing to start it. A node that cannot start a job often fails
// once (a launch message that timed out on a busy node); one that fails
// every time needs its admins, not more releases.
const maxReleases = 3

// waitServing waits until a runner newer than session_id before serves
// the session, or the job ends, or ctx (bounded by ReadyTimeout) ends.
func waitServing(ctx context.Context, s *master.Session, d sched.Driver, x sched.Exec, before string, opts Options, res *Result) error {
	start := time.Now()
	if opts.ReadyTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opts.ReadyTimeout)
		defer cancel()
	}
	id := res.Info.JobID
	pctx, stopPoll := context.WithCancel(ctx)
	defer stopPoll()
	jobs := pollJob(pctx, d, x, id)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var pendingSince, lastNote time.Time
	var lastSaid, lastPhase string
	var rel *releaser
	if r, ok := d.(sched.Releaser); ok {
		rel = &releaser{r: r}
	}
	for {
		if st, ok := serving(s, before); ok {
			res.Status, res.Elapsed = st, time.Since(start)
			if !pendingSince.IsZero() && res.Pending == 0 {
				res.Pending = time.Since(pendingSince) // Upper bound: pending until the runner served.
			}
			progress(opts.Progress, "runner serves the session (pid %d on %s) %v after submission", st.RunnerPID, st.RunnerHost, res.Elapsed.Round(time.Millisecond))
			return nil
		}
		select {
		case <-ctx.Done():
			return waitEnded(ctx, s, res)
		case <-tick.C:
			continue
		case q := <-jobs:
			if q.err != nil {
				if ctx.Err() != nil {
					return waitEnded(ctx, s, res)
				}
				return fmt.Errorf("master: ask %s about job %s: %w", d.Name(), id, q.err)
			}
			j := q.job
			res.Job = j
			if j.State == sched.Pending && pendingSince.IsZero() {
				pendingSince = time.Now()
			}
			if j.State != sched.Pending && !pendingSince.IsZero() && res.Pending == 0 {
				res.Pending = time.Since(pendingSince)
			}
			if !j.State.Active() {
				if st, ok := serving(s, before); ok { // Served and stopped within one poll.
					res.Status, res.Elapsed = st, time.Since(start)
					return nil
				}
				return fmt.Errorf("%w: job %s (%s) is %s%s", ErrLaunchFailed, id, d.Name(), j, outputTail(s))
			}
			if rel != nil && rel.r.HeldAfterFailedStart(j) {
				if err := rel.held(ctx, s, x, d.Name(), j, opts, res); err != nil {
					return err
				}
				lastSaid = ""
				continue
			}
			if said := j.String(); said != lastSaid {
				progress(opts.Progress, "job %s (%s) %s", id, d.Name(), said)
				lastSaid, lastNote = said, time.Now()
			} else if j.State == sched.Pending && time.Since(lastNote) >= 10*time.Second {
				progress(opts.Progress, "job %s (%s) pending for %v: %s", id, d.Name(), time.Since(pendingSince).Round(time.Second), said)
				lastNote = time.Now()
			}
			if st, err := s.ReadState(); err == nil && st.SessionID != before && st.Phase != protocol.PhaseIdle && st.Phase != protocol.PhaseBusy {
				if ph := string(st.Phase) + " " + st.Reason; ph != lastPhase {
					progress(opts.Progress, "runner pid %d on %s: phase %s", st.RunnerPID, st.Hostname, strings.TrimSpace(ph))
					lastPhase = ph
				}
			}
		}
	}
}

// releaseSettle is how long after a release a held answer is taken for
// the answer to a query that began before it (an array's elements share
// their queries), not for a new hold. A variable for tests.
var releaseSettle = 5 * time.Second

// releaser releases a job its scheduler held after failing to start it.
// The releases that succeeded are counted in Result.Releases.
type releaser struct {
	r       sched.Releaser
	at      time.Time // of the last release tried
	lastErr error     // of the last release tried
}

// held handles an answer saying that job j is held after a failed start:
// it releases j, unless it did so maxReleases times already or the last
// release failed, which fail the launch and leave the job held (the error
// says how to cancel it). An answer within releaseSettle of a release is
// let be.
func (h *releaser) held(ctx context.Context, s *master.Session, x sched.Exec, via string, j sched.Job, opts Options, res *Result) error {
	if !h.at.IsZero() && time.Since(h.at) < releaseSettle {
		return nil
	}
	cmd := strings.Join(h.r.ReleaseCommand(j.ID), " ")
	switch {
	case h.lastErr != nil:
		return fmt.Errorf("%w: job %s (%s) is %s: %s could not start it, and %s failed: %v; the job stays held (master stop --session %s cancels it)",
			ErrLaunchFailed, j.ID, via, j, via, cmd, h.lastErr, s.Dir())
	case res.Releases >= maxReleases:
		return fmt.Errorf("%w: job %s (%s) is %s again: %s could not start it %d times, released with %s after each; the job stays held (master stop --session %s cancels it; the node may need its admins)",
			ErrLaunchFailed, j.ID, via, j, via, res.Releases+1, cmd, s.Dir())
	}
	h.at, h.lastErr = time.Now(), h.r.Release(ctx, x, j.ID)
	if h.lastErr != nil {
		if ctx.Err() != nil {
			return waitEnded(ctx, s, res)
		}
		// Judged on the next answer: the job may have started meanwhile.
		progress(opts.Progress, "job %s (%s) is %s: %s could not start it; %s failed: %v", j.ID, via, j, via, cmd, h.lastErr)
		return nil
	}
	res.Releases++
	progress(opts.Progress, "job %s (%s) is %s: %s could not start it; released it (%s), release %d of %d",
		j.ID, via, j, via, cmd, res.Releases, maxReleases)
	return nil
}

type jobAnswer struct {
	job sched.Job
	err error
}

// pollJob asks the scheduler about job id every queryEvery, in its own
// goroutine (a scheduler command can take long: it must not delay noticing
// that the runner serves), until ctx ends.
func pollJob(ctx context.Context, d sched.Driver, x sched.Exec, id string) <-chan jobAnswer {
	ch := make(chan jobAnswer)
	go func() {
		for {
			j, err := d.Query(ctx, x, id)
			select {
			case ch <- jobAnswer{j, err}:
			case <-ctx.Done():
				return
			}
			select {
			case <-time.After(queryEvery):
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch
}

// waitEnded explains an interrupted or timed-out wait; the job is left alone.
func waitEnded(ctx context.Context, s *master.Session, res *Result) error {
	state := res.Job.String()
	if res.Job.ID == "" {
		state = "not yet seen by the scheduler"
	}
	msg := fmt.Sprintf("job %s (%s) is %s and the runner does not serve yet; the job stays (master stop --session %s cancels it)",
		res.Info.JobID, res.Info.Via, state, s.Dir())
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%w: %s", master.ErrWaitTimeout, msg)
	}
	return fmt.Errorf("%w: %s", ctx.Err(), msg)
}

// serving reports whether a runner other than the one with session_id
// before serves the session: phase idle or busy, and its lock held (local
// filesystem) or its heartbeat written under the same session_id (network
// filesystem, where a lock proves nothing).
func serving(s *master.Session, before string) (master.Status, bool) {
	st, err := s.ReadState()
	if err != nil || st.SessionID == "" || st.SessionID == before || (st.Phase != protocol.PhaseIdle && st.Phase != protocol.PhaseBusy) {
		return master.Status{}, false
	}
	if s.Core().OnNetworkFS() {
		hb, err := s.Core().ReadHeartbeat()
		if err != nil || hb.SessionID != st.SessionID {
			return master.Status{}, false
		}
	} else if !s.Core().LockHeld() {
		return master.Status{}, false
	}
	return master.Status{ProtocolVersion: protocol.Version, Alive: true, AliveReason: "a new runner serves the session",
		Phase: st.Phase, SessionID: st.SessionID, RunnerHost: st.Hostname, RunnerPID: st.RunnerPID, ToolPID: st.ToolPID,
		CommandsDone: st.CommandsDone, Filesystem: st.Filesystem}, true
}

// outputTail returns the last lines of the job's output, for messages.
func outputTail(s *master.Session) string {
	f, err := openOutput(s)
	if err != nil {
		return ""
	}
	defer f.Close()
	const max = 16 << 10 // A runner that failed to start wrote little; a long log is cut to its end.
	if fi, err := f.Stat(); err == nil && fi.Size() > max {
		_, _ = f.Seek(-max, io.SeekEnd)
	}
	b, _ := io.ReadAll(io.LimitReader(f, max))
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 10 { // Programs say what went wrong first, then print their usage or a trace.
		lines = append(append(lines[:4:4], "..."), lines[len(lines)-5:]...)
	}
	t := strings.TrimSpace(strings.Join(lines, "\n  "))
	if t == "" {
		return ""
	}
	return "; last lines of " + FileLaunchOutput + ":\n  " + t
}

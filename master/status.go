package master

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
)

// Status is what a master can tell about a session.
type Status struct {
	ProtocolVersion int            `json:"protocol_version"`
	Alive           bool           `json:"alive"`
	AliveReason     string         `json:"alive_reason"`
	Phase           protocol.Phase `json:"phase"`
	Reason          string         `json:"reason,omitempty"`
	SessionID       string         `json:"session_id"`
	RunnerHost      string         `json:"runner_host"`
	RunnerPID       int            `json:"runner_pid"`
	ToolPID         int            `json:"tool_pid,omitempty"`
	CurrentCmdID    string         `json:"current_cmd_id,omitempty"`
	CurrentElapsed  time.Duration  `json:"current_elapsed_ns,omitempty"`
	CurrentOutBytes int64          `json:"current_output_bytes,omitempty"`
	QueueDepth      int            `json:"queue_depth"`
	HeartbeatAge    time.Duration  `json:"heartbeat_age_ns"`
	HeartbeatCount  int64          `json:"heartbeat_counter"`
	CommandsDone    int64          `json:"commands_done"`
	Filesystem      string         `json:"filesystem,omitempty"`

	// Added for the status view; all optional.
	Dir             string         `json:"dir"`
	Kind            protocol.Kind  `json:"kind,omitempty"`
	ToolStarts      int64          `json:"tool_starts,omitempty"`
	CurrentLastLine string         `json:"current_last_line,omitempty"` // last output line of the running command (≤ 256 bytes)
	CurrentQuiet    *time.Duration `json:"current_quiet_ns,omitempty"`  // since the running command last printed (runner clock)
	// CurrentTraceID and CurrentLabels are the running command's
	// trace_id and labels (PROTOCOL.md section 4).
	CurrentTraceID string            `json:"current_trace_id,omitempty"`
	CurrentLabels  map[string]string `json:"current_labels,omitempty"`
	SkippedCount   int64             `json:"skipped_count,omitempty"`
	RejectedCount  int64             `json:"rejected_count,omitempty"`
	Lease          *LeaseStatus      `json:"lease,omitempty"`
	LastResults    []ResultBrief     `json:"last_results,omitempty"` // newest first, at most five
	// Retention is the runner's retention policy and its counts
	// (state.json retention, PROTOCOL.md section 23); nil when it is off.
	Retention *protocol.Retention `json:"retention,omitempty"`
	// DiskFull: the session's disk is full; the runner writes results,
	// state and heartbeat but not the spool and output files meanwhile.
	DiskFull bool `json:"disk_full,omitempty"`
	// CanServe is false when the session cannot run commands: no live
	// runner, or phase error (tool start or init failing).
	CanServe bool `json:"can_serve"`
	// ResumeCursor is the spool size when the status was read: a WaitFor
	// from it sees only output printed from then on (PROTOCOL.md section
	// 19, "Cursors").
	ResumeCursor int64 `json:"resume_cursor"`
}

// Status reads state.json and heartbeat.json and judges whether the runner
// is alive without comparing clocks of different hosts: the runner is dead
// if its lock can be taken; otherwise it is alive if its heartbeat counter
// moves within two heartbeat periods of our own clock (Status waits that
// long at most, and not at all if this Session saw it move recently).
// When queue/ cannot be listed it returns the rest of the status with the
// error (QueueDepth 0 is then not a count).
func (s *Session) Status(ctx context.Context) (Status, error) {
	st := Status{ProtocolVersion: protocol.Version, Dir: s.io.Dir()}
	state, serr := s.ReadState()
	hb, herr := s.io.ReadHeartbeat()
	if serr != nil && herr != nil {
		if !s.io.HasQueue() {
			return st, ErrSessionMissing
		}
		st.AliveReason = "no runner has written state yet"
		st.ResumeCursor, _ = s.SpoolSize() // 0 when there is none (or it is not a regular file).
		var err error
		st.QueueDepth, err = s.QueueDepth()
		return st, err
	}
	st.ResumeCursor, _ = s.SpoolSize() // Before the liveness watch: output printed meanwhile comes after it.
	st.Phase, st.Reason, st.SessionID, st.RunnerPID, st.ToolPID = state.Phase, state.Reason, state.SessionID, state.RunnerPID, state.ToolPID
	st.RunnerHost, st.CommandsDone, st.Filesystem = state.Hostname, state.CommandsDone, state.Filesystem
	st.HeartbeatCount = hb.Counter
	if fi, err := s.io.RegularInfo(protocol.FileHeartbeat); err == nil {
		st.HeartbeatAge = time.Since(fi.ModTime()).Round(time.Millisecond)
	}
	if state.CurrentCmdID != nil {
		st.CurrentCmdID = *state.CurrentCmdID
		// All three times are the runner's clock: no skew. The latest of
		// them is the runner's "now" as far as we can tell; a heartbeat
		// older than the command's start must not give a negative time.
		now := hb.Timestamp.Time
		if state.UpdatedAt.After(now) {
			now = state.UpdatedAt.Time
		}
		st.CurrentElapsed = max(now.Sub(state.CurrentStart.Time), 0).Round(time.Millisecond)
		if hb.CurrentCmdID == st.CurrentCmdID {
			st.CurrentOutBytes = hb.CurrentOutBytes
		}
	}
	var qerr error
	st.QueueDepth, qerr = s.QueueDepth()
	st.Alive, st.AliveReason = s.alive(ctx)
	st.Kind, st.ToolStarts = state.Kind, state.ToolStarts
	stateCmd := st.CurrentCmdID
	finished := s.reconcile(&st, state, hb)
	s.details(&st, hb, stateCmd)
	if st.Phase == protocol.PhaseIdle || st.Phase == protocol.PhaseBusy {
		// Results the runner wrote after its last state.json: they are
		// done, whatever the coalesced commands_done says.
		for _, r := range st.LastResults {
			if r.ran && r.EndTS.After(state.UpdatedAt.Time) && r.CmdID != finished {
				st.CommandsDone++
			}
		}
	}
	if st.CurrentQuiet != nil && *st.CurrentQuiet > st.CurrentElapsed {
		q := st.CurrentElapsed // Quiet since the command started, at most.
		st.CurrentQuiet = &q
	}
	st.CanServe = st.Alive && st.Phase != protocol.PhaseError && st.Phase != protocol.PhaseStopping
	return st, qerr
}

// reconcile corrects the running command and the phase that state.json
// says with what the files say: state.json's busy/idle flips are
// coalesced (PROTOCOL.md section 8), so right after a claim it can still
// say idle while the command sits in inflight/, and right after a result
// it can still name the finished command. A command in inflight/ without a
// result is running; a command with a result is not. It returns the id of
// state.json's command when that has finished since (counted as done).
func (s *Session) reconcile(st *Status, state protocol.State, hb protocol.Heartbeat) (finished string) {
	if st.Phase != protocol.PhaseIdle && st.Phase != protocol.PhaseBusy {
		return ""
	}
	hasResult := func(name string) bool {
		return s.io.Exists(protocol.DirResult + "/" + name)
	}
	if st.CurrentCmdID != "" && hasResult(protocol.CommandName(state.CurrentSeq, st.CurrentCmdID)) {
		finished = st.CurrentCmdID
		st.CommandsDone++
		st.CurrentCmdID, st.CurrentElapsed, st.CurrentOutBytes = "", 0, 0
	}
	if st.CurrentCmdID == "" {
		names, _ := s.io.ReadNames(protocol.DirInflight)
		best, bestSeq := "", int64(-1)
		for _, name := range names {
			seq, id, err := protocol.ParseCommandName(name)
			if err != nil || strings.HasPrefix(name, ".") || hasResult(name) || (bestSeq >= 0 && seq >= bestSeq) {
				continue
			}
			best, bestSeq = id, seq
		}
		if best != "" {
			// Claimed since state.json was written: its elapsed time is
			// not known yet (next to nothing).
			st.CurrentCmdID = best
			if hb.CurrentCmdID == best {
				st.CurrentOutBytes = hb.CurrentOutBytes
			}
		}
	}
	switch {
	case st.CurrentCmdID != "":
		st.Phase = protocol.PhaseBusy
	case finished != "":
		st.Phase = protocol.PhaseIdle
	}
	return finished
}

// QueueDepth counts the commands waiting in queue/, or says why queue/
// cannot be listed.
func (s *Session) QueueDepth() (int, error) {
	names, err := s.io.ReadNames(protocol.DirQueue)
	if err != nil {
		return 0, wrapf(err, "list queue/")
	}
	n := 0
	for _, name := range names {
		if isCommand(name) {
			n++
		}
	}
	return n, nil
}

// alive judges liveness (observe) for a status, watching the heartbeat
// counter for one window when a single look cannot decide. A status is a
// snapshot: a late counter is reported as not alive (with its reason),
// while a request or a wait would go on watching for the grace.
func (s *Session) alive(ctx context.Context) (bool, string) {
	l := s.observe()
	if l.alive || l.definite || l.late {
		return l.alive, l.reason
	}
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	end := time.NewTimer(10 * time.Second) // Bounds a heartbeat that claims a huge interval.
	defer end.Stop()
	for {
		select {
		case <-ctx.Done():
			return false, "status interrupted"
		case <-end.C:
			return false, "heartbeat counter did not move"
		case <-t.C:
			if l = s.observe(); l.alive || l.definite || l.late {
				return l.alive, l.reason
			}
		}
	}
}

// Alive says whether a runner serves the session, and why not, by the
// rule Status uses for its Alive and AliveReason, without the rest of
// Status (the queue, the results, the lease, the spool): what a caller
// that acts on many sessions at once (master pool stop) needs.
func (s *Session) Alive(ctx context.Context) (bool, string) { return s.alive(ctx) }

// WaitReady waits until a runner serves the session in dir: the directory
// exists, the runner is alive and its phase is idle or busy. The directory
// may not exist yet when WaitReady is called (the runner creates it). It
// fails with ErrRunnerNotAlive once no live runner has been seen for
// opts.WaitForRunner (0: DefaultWaitForRunner), and with ctx's end
// (ErrWaitTimeout) otherwise; when the runner was alive but in phase
// error, that error wraps ErrCannotServe and says why. A runner that
// stopped does not end the wait before that grace: it may be being
// started again.
func WaitReady(ctx context.Context, dir string, opts WaitOptions) (Status, error) {
	waitForRunner := opts.waitForRunner(0)
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	grace := graceFor(waitForRunner, 0) // Until a heartbeat says its interval.
	started := time.Now()
	var s *Session
	var w *runnerWatch
	for {
		if s == nil {
			if o, err := Open(dir); err == nil {
				s = o
				w = &runnerWatch{s: s, base: waitForRunner, lastAlive: started, forReady: true}
			}
		}
		if s != nil {
			if err := w.check(); err != nil {
				return Status{}, err
			}
			if w.last.alive && (w.last.state.Phase == protocol.PhaseIdle || w.last.state.Phase == protocol.PhaseBusy) {
				return s.Status(ctx)
			}
		} else if time.Since(started) > grace {
			return Status{}, withContext(fmt.Errorf("%w: %s is not a session yet; no runner seen for %v", ErrRunnerNotAlive, dir, grace),
				map[string]any{"dir": dir, "reason": "not a session yet", "grace_ms": grace.Milliseconds()})
		}
		if opts.Progress != nil {
			opts.Progress()
		}
		select {
		case <-ctx.Done():
			err := ctxErr(ctx)
			if s != nil && errors.Is(err, ErrWaitTimeout) {
				if cerr := cannotServe(w.last.state); cerr != nil {
					return Status{}, &withCause{err: err, cause: cerr}
				}
			}
			return Status{}, err
		case <-t.C:
		}
	}
}

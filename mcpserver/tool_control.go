package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
)

// defaultCancelWait is how long cancel waits for the result by default.
const defaultCancelWait = 10 * time.Second

// CancelInput is the input of cancel.
type CancelInput struct {
	CmdID        string  `json:"cmd_id,omitempty" jsonschema:"the command to cancel (absent: the running command)"`
	WaitTimeoutS float64 `json:"wait_timeout_s,omitempty" jsonschema:"how long to wait for the command's result, in seconds (absent: 10)"`
	Session      string  `json:"session,omitempty" jsonschema:"the command's session (pool servers; required without cmd_id)"`
}

// CancelOutput is the output of cancel.
type CancelOutput struct {
	Session string         `json:"session" jsonschema:"the session of the command"`
	CmdID   string         `json:"cmd_id,omitempty" jsonschema:"the command the cancel was for (absent when idle)"`
	Outcome string         `json:"outcome" jsonschema:"cancelled_running, cancelled_queued, already_finished (nothing was done), finished (it ended another way before the cancel took effect), pending (requested; no result yet), idle (nothing was running)"`
	Message string         `json:"message" jsonschema:"what happened, in a sentence"`
	Result  *CommandResult `json:"result,omitempty" jsonschema:"the command's result when it has one"`
}

func (h *handler) cancel(ctx context.Context, _ *mcp.CallToolRequest, in CancelInput) (CancelOutput, error) {
	if in.CmdID == "" {
		s, name, err := h.sessions.get(in.Session)
		if err != nil {
			return CancelOutput{}, err
		}
		st, err := s.Status(ctx)
		if err != nil {
			return CancelOutput{}, err
		}
		if st.CurrentCmdID == "" {
			return CancelOutput{Session: name, Outcome: "idle", Message: "nothing is running; nothing was done"}, nil
		}
		// Cancel that command by its id: if it ends meanwhile, the next one
		// is not hit by mistake.
		in.CmdID = st.CurrentCmdID
	}
	ref, err := h.command(in.Session, in.CmdID)
	if err != nil {
		return CancelOutput{}, err
	}
	out := CancelOutput{Session: ref.session, CmdID: ref.cmd.ID}
	if res, err := ref.cmd.Result(); err == nil && res != nil {
		r, err := h.describe(ref, res, CommandResult{Session: ref.session, CmdID: ref.cmd.ID, Seq: ref.cmd.Seq})
		out.Outcome, out.Message, out.Result = "already_finished", "the command had finished ("+r.Status+"); nothing was done", &r
		return out, err
	}
	if err := requestCancel(ctx, ref.s, ref.cmd.ID); err != nil {
		return out, err
	}
	d := min(defaultCancelWait, h.cfg.MaxWait)
	if in.WaitTimeoutS > 0 {
		d = h.callWait(in.WaitTimeoutS)
	}
	r, err := h.result(ctx, ref, d)
	if err != nil {
		return out, err
	}
	out.Result = &r
	switch {
	case !r.Done:
		out.Outcome, out.Message = "pending", fmt.Sprintf("cancel requested; no result within %v (state %s): call wait", d, r.State)
	case r.Status == string(protocol.StatusCancelled) && r.ExitReason == string(protocol.ReasonCancelledQueued):
		out.Outcome, out.Message = "cancelled_queued", "the command was cancelled before it started"
	case r.Status == string(protocol.StatusCancelled):
		out.Outcome, out.Message = "cancelled_running", "the running command was cancelled ("+r.ExitReason+")"
	default:
		out.Outcome, out.Message = "finished", "the command ended ("+r.Status+") before the cancel took effect"
	}
	return out, nil
}

// requestCancel asks the session's runner to cancel cmdID. It is the one
// place that writes a cancel request. A command that already finished is
// not an error here: its result says how it ended.
func requestCancel(ctx context.Context, s *master.Session, cmdID string) error {
	_, err := s.Cancel(ctx, cmdID)
	if errors.Is(err, master.ErrAlreadyFinished) {
		return nil
	}
	return err
}

// StatusInput is the input of status.
type StatusInput struct {
	Session string `json:"session,omitempty" jsonschema:"which session (pool servers; absent: all of them)"`
}

// SessionStatus is one session's state.
type SessionStatus struct {
	Session            string `json:"session" jsonschema:"the session's name (its directory's name)"`
	Dir                string `json:"dir" jsonschema:"the session directory on the server's host"`
	Alive              bool   `json:"alive" jsonschema:"a runner serves the session"`
	AliveReason        string `json:"alive_reason" jsonschema:"why the runner is judged alive or not"`
	Phase              string `json:"phase,omitempty" jsonschema:"starting, idle, busy, error, stopping, stopped"`
	Reason             string `json:"reason,omitempty" jsonschema:"why the phase is error or stopping"`
	SessionID          string `json:"session_id,omitempty" jsonschema:"the runner's session id (changes when a new runner starts)"`
	RunnerHost         string `json:"runner_host,omitempty" jsonschema:"where the runner runs"`
	RunnerPID          int    `json:"runner_pid,omitempty" jsonschema:"its process id there"`
	CurrentCmdID       string `json:"current_cmd_id,omitempty" jsonschema:"the running command"`
	CurrentElapsedMS   int64  `json:"current_elapsed_ms,omitempty" jsonschema:"how long the running command has run"`
	CurrentOutputBytes int64  `json:"current_output_bytes,omitempty" jsonschema:"how much it has printed"`
	QueueDepth         int    `json:"queue_depth" jsonschema:"commands waiting in queue/"`
	CommandsDone       int64  `json:"commands_done" jsonschema:"commands this runner has finished"`
	ResumeCursor       int64  `json:"resume_cursor" jsonschema:"the spool size now: wait_for from here sees only output printed from now on"`
	Error              string `json:"error,omitempty" jsonschema:"why this session's state could not be read"`
}

// StatusOutput is the output of status.
type StatusOutput struct {
	Sessions []SessionStatus `json:"sessions" jsonschema:"one entry per session (one for a single-session server)"`
}

func (h *handler) status(ctx context.Context, _ *mcp.CallToolRequest, in StatusInput) (StatusOutput, error) {
	names := []string{in.Session}
	if in.Session == "" {
		var err error
		if names, err = h.sessions.names(); err != nil {
			return StatusOutput{}, err
		}
	}
	out := StatusOutput{Sessions: make([]SessionStatus, len(names))}
	var wg sync.WaitGroup
	for i, n := range names {
		s, name, err := h.sessions.get(n)
		if err != nil {
			if len(names) == 1 {
				return StatusOutput{}, err
			}
			out.Sessions[i] = SessionStatus{Session: n, Error: err.Error()}
			continue
		}
		wg.Add(1)
		go func(p *SessionStatus) {
			defer wg.Done()
			*p = sessionStatus(ctx, s, name)
		}(&out.Sessions[i])
	}
	wg.Wait()
	return out, nil
}

func sessionStatus(ctx context.Context, s *master.Session, name string) SessionStatus {
	p := SessionStatus{Session: name, Dir: s.Dir()}
	// The cursor first: output printed while the status is read comes after it.
	p.ResumeCursor, _ = s.SpoolSize()
	st, err := s.Status(ctx)
	if err != nil && !errors.Is(err, context.Canceled) {
		p.Error = err.Error()
		return p
	}
	p.Alive, p.AliveReason, p.Phase, p.Reason = st.Alive, st.AliveReason, string(st.Phase), st.Reason
	p.SessionID, p.RunnerHost, p.RunnerPID = st.SessionID, st.RunnerHost, st.RunnerPID
	p.CurrentCmdID, p.CurrentElapsedMS, p.CurrentOutputBytes = st.CurrentCmdID, st.CurrentElapsed.Milliseconds(), st.CurrentOutBytes
	p.QueueDepth, p.CommandsDone = st.QueueDepth, st.CommandsDone
	return p
}

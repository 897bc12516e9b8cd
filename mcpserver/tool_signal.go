package mcpserver

import (
	"context"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
)

// SignalInput is the input of signal.
type SignalInput struct {
	CmdID   string `json:"cmd_id" jsonschema:"the running command whose tool gets the signal (a command that is not running gets nothing)"`
	Signal  string `json:"signal" jsonschema:"INT, QUIT, TSTP, CONT, HUP, USR1, USR2, TERM or KILL (a SIG prefix and lower case are accepted; others are a tool error)"`
	Session string `json:"session,omitempty" jsonschema:"the command's session (pool servers)"`
}

// ResizeInput is the input of resize.
type ResizeInput struct {
	Cols    int    `json:"cols" jsonschema:"columns, 1 to 10000"`
	Rows    int    `json:"rows" jsonschema:"rows, 1 to 10000"`
	Session string `json:"session,omitempty" jsonschema:"which session (pool servers; required there)"`
}

// ControlOutput is the output of signal and resize: the runner's reply.
type ControlOutput struct {
	Session      string `json:"session" jsonschema:"the session"`
	CmdID        string `json:"cmd_id,omitempty" jsonschema:"the command the signal was for"`
	Outcome      string `json:"outcome" jsonschema:"delivered; not_running (the command is queued, finished or unknown: nothing sent); stale"`
	Message      string `json:"message" jsonschema:"what happened, in a sentence"`
	CmdState     string `json:"cmd_state,omitempty" jsonschema:"where a refused command is: queued, finished or unknown"`
	ResumeCursor int64  `json:"resume_cursor" jsonschema:"the spool size when it took effect: wait_for from here sees only what followed"`
}

// signal sends a signal to the tool while cmd_id runs (PROTOCOL.md 9.8),
// as master signal does; it has no cancel semantics.
func (h *handler) signal(ctx context.Context, _ *mcp.CallToolRequest, in SignalInput) (ControlOutput, error) {
	var s *master.Session
	var name string
	if ref, err := h.command(in.Session, in.CmdID); err == nil {
		s, name = ref.s, ref.session
	} else if s, name, err = h.sessions.get(in.Session); err != nil {
		return ControlOutput{}, err // The runner answers an unknown cmd_id of a known session.
	}
	ctx, cancel := context.WithTimeout(ctx, h.cfg.MaxWait)
	defer cancel()
	rep, err := s.Signal(ctx, in.CmdID, in.Signal)
	return controlOutput(name, in.CmdID, rep, err)
}

// resize sets the size of the tool's terminal (PROTOCOL.md 9.8), as master
// resize does.
func (h *handler) resize(ctx context.Context, _ *mcp.CallToolRequest, in ResizeInput) (ControlOutput, error) {
	s, name, err := h.sessions.get(in.Session)
	if err != nil {
		return ControlOutput{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, h.cfg.MaxWait)
	defer cancel()
	rep, err := s.Resize(ctx, in.Cols, in.Rows)
	return controlOutput(name, "", rep, err)
}

// controlOutput turns the runner's reply (or a refused request's) into the
// tool's output; any other error is a tool error.
func controlOutput(session, cmdID string, rep *protocol.ControlReply, err error) (ControlOutput, error) {
	var re *master.RequestError
	if err != nil && !errors.As(err, &re) {
		return ControlOutput{}, err
	}
	if rep == nil {
		rep = re.Reply
	}
	out := ControlOutput{Session: session, CmdID: cmdID, Outcome: string(rep.Outcome), Message: rep.Message,
		CmdState: rep.CmdState, ResumeCursor: rep.SpoolOffset}
	if rep.Outcome == protocol.OutcomeNotFound {
		out.Outcome = string(protocol.OutcomeNotRunning)
	}
	return out, nil
}

package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
)

// RunInput is the input of run.
type RunInput struct {
	Payload        string            `json:"payload" jsonschema:"the command: a Tcl script (kind tcl), or a shell command line (kind sh)"`
	Kind           string            `json:"kind,omitempty" jsonschema:"tcl (default) or sh; must be the kind of the session's tool"`
	TimeoutS       float64           `json:"timeout_s,omitempty" jsonschema:"the command's own timeout in seconds: the runner interrupts it then (0 or absent: the runner's default)"`
	CancelPolicy   string            `json:"cancel_policy,omitempty" jsonschema:"how the runner interrupts the command: ctrl_c (default), terminate_tool or terminate_session"`
	WaitTimeoutS   float64           `json:"wait_timeout_s,omitempty" jsonschema:"how long this call waits for the result, in seconds (absent: the server's default; never more than the server's ceiling); the command keeps running after"`
	Session        string            `json:"session,omitempty" jsonschema:"which session (pool servers; absent: the least-loaded one)"`
	TraceID        string            `json:"trace_id,omitempty" jsonschema:"optional id carried into the result, events, status and report so a flow can find its steps (1-128 printable ASCII, no spaces)"`
	Labels         map[string]string `json:"labels,omitempty" jsonschema:"optional key=value pairs carried with trace_id (at most 16; keys of [a-z0-9_])"`
	MaxOutputBytes int64             `json:"max_output_bytes,omitempty" jsonschema:"the command's output budget in bytes: past it the runner stops the command by its cancel policy and the result's error is output_limit, its output the first bytes (0 or absent: the runner's --max-output-bytes)"`
}

// SubmitInput is the input of submit.
type SubmitInput struct {
	Payload        string            `json:"payload" jsonschema:"the command: a Tcl script (kind tcl), or a shell command line (kind sh)"`
	Kind           string            `json:"kind,omitempty" jsonschema:"tcl (default) or sh; must be the kind of the session's tool"`
	TimeoutS       float64           `json:"timeout_s,omitempty" jsonschema:"the command's own timeout in seconds (0 or absent: the runner's default)"`
	CancelPolicy   string            `json:"cancel_policy,omitempty" jsonschema:"ctrl_c (default), terminate_tool or terminate_session"`
	Session        string            `json:"session,omitempty" jsonschema:"which session (pool servers; absent: the least-loaded one)"`
	TraceID        string            `json:"trace_id,omitempty" jsonschema:"optional id carried into the result, events, status and report so a flow can find its steps (1-128 printable ASCII, no spaces)"`
	Labels         map[string]string `json:"labels,omitempty" jsonschema:"optional key=value pairs carried with trace_id (at most 16; keys of [a-z0-9_])"`
	MaxOutputBytes int64             `json:"max_output_bytes,omitempty" jsonschema:"the command's output budget in bytes: past it the runner stops the command by its cancel policy and the result's error is output_limit, its output the first bytes (0 or absent: the runner's --max-output-bytes)"`
}

// WaitInput is the input of wait.
type WaitInput struct {
	CmdID        string  `json:"cmd_id" jsonschema:"the command, as returned by run or submit"`
	WaitTimeoutS float64 `json:"wait_timeout_s,omitempty" jsonschema:"how long to wait, in seconds (absent: the server's default; never more than the server's ceiling)"`
	Session      string  `json:"session,omitempty" jsonschema:"the command's session (pool servers; absent: searched)"`
}

// SubmitOutput is the output of submit.
type SubmitOutput struct {
	Session      string `json:"session" jsonschema:"the session the command was queued in"`
	CmdID        string `json:"cmd_id" jsonschema:"the command's id: use it with wait, read_output, cancel"`
	Seq          int64  `json:"seq" jsonschema:"its place in the session's total order"`
	File         string `json:"file" jsonschema:"the command file, relative to the session directory"`
	ResumeCursor int64  `json:"resume_cursor" jsonschema:"the spool size when the command was queued: its output comes after it (for wait_for)"`
}

// ErrorInfo is a command's error.
type ErrorInfo struct {
	Code    string `json:"code" jsonschema:"stable code: tool_error, timeout, cancelled, tool_died, runner_restarted, invalid_request, ..."`
	Message string `json:"message" jsonschema:"what happened"`
}

// CommandResult is the output of run and wait (and part of cancel's).
type CommandResult struct {
	Session        string            `json:"session" jsonschema:"the command's session"`
	CmdID          string            `json:"cmd_id" jsonschema:"the command's id"`
	Seq            int64             `json:"seq" jsonschema:"its place in the session's total order"`
	Done           bool              `json:"done" jsonschema:"true when the command has its result; false when this call's wait ended first"`
	State          string            `json:"state" jsonschema:"finished, running, queued, or unknown (between two of those)"`
	Status         string            `json:"status,omitempty" jsonschema:"when done: ok, error, timeout or cancelled"`
	Value          string            `json:"value,omitempty" jsonschema:"the Tcl result of the payload (bounded by the byte budget)"`
	ValueTruncated bool              `json:"value_truncated,omitempty" jsonschema:"the value was cut (by the runner or by the budget)"`
	Error          *ErrorInfo        `json:"error,omitempty" jsonschema:"when status is not ok"`
	ExitReason     string            `json:"exit_reason,omitempty" jsonschema:"why the command ended: marker_seen, ctrl_c, tool_died, runner_restarted, ..."`
	DurationMS     int64             `json:"duration_ms,omitempty" jsonschema:"how long it ran (runner clock)"`
	SpoolStart     int64             `json:"spool_start,omitempty" jsonschema:"the command's range in the session spool (see tail, wait_for)"`
	SpoolEnd       int64             `json:"spool_end,omitempty" jsonschema:"end of that range (exclusive)"`
	Output         Preview           `json:"output" jsonschema:"the output: a bounded preview of it"`
	CommandPath    string            `json:"command_path,omitempty" jsonschema:"the executed command file kept for the audit trail, relative to the session directory"`
	TraceID        string            `json:"trace_id,omitempty" jsonschema:"the command's trace_id, when it was given one"`
	Labels         map[string]string `json:"labels,omitempty" jsonschema:"the command's labels, when it was given some"`
	Note           string            `json:"note,omitempty" jsonschema:"a sentence for a human when not done (why the wait ended)"`
}

func (h *handler) run(ctx context.Context, req *mcp.CallToolRequest, in RunInput) (CommandResult, error) {
	ref, _, err := h.queue(ctx, req, in.Session, in.Payload, in.Kind, in.TimeoutS, in.CancelPolicy, in.TraceID, in.Labels, in.MaxOutputBytes)
	if err != nil {
		return CommandResult{}, err
	}
	return h.result(ctx, ref, h.callWait(in.WaitTimeoutS))
}

func (h *handler) submit(ctx context.Context, req *mcp.CallToolRequest, in SubmitInput) (SubmitOutput, error) {
	ref, spool, err := h.queue(ctx, req, in.Session, in.Payload, in.Kind, in.TimeoutS, in.CancelPolicy, in.TraceID, in.Labels, in.MaxOutputBytes)
	if err != nil {
		return SubmitOutput{}, err
	}
	return SubmitOutput{Session: ref.session, CmdID: ref.cmd.ID, Seq: ref.cmd.Seq,
		File: protocol.DirQueue + "/" + ref.cmd.Name, ResumeCursor: spool}, nil
}

func (h *handler) wait(ctx context.Context, _ *mcp.CallToolRequest, in WaitInput) (CommandResult, error) {
	ref, err := h.command(in.Session, in.CmdID)
	if err != nil {
		return CommandResult{}, err
	}
	return h.result(ctx, ref, h.callWait(in.WaitTimeoutS))
}

// queue checks the payload against the server's rules, picks the session
// and submits the payload there. It returns the spool size seen just before
// submitting: the command's output comes after it.
func (h *handler) queue(ctx context.Context, req *mcp.CallToolRequest, session, payload, kind string, timeoutS float64, policy string,
	traceID string, labels map[string]string, maxOutput int64) (cmdRef, int64, error) {
	if err := h.checkPayload(payload); err != nil {
		return cmdRef{}, 0, err
	}
	if timeoutS < 0 {
		return cmdRef{}, 0, errors.New("timeout_s must not be negative")
	}
	s, name, err := h.sessions.pick(ctx, session)
	if err != nil {
		return cmdRef{}, 0, err
	}
	spool, err := s.SpoolSize()
	if err != nil {
		return cmdRef{}, 0, err
	}
	c, err := s.Submit(ctx, payload, master.SubmitOptions{Kind: protocol.Kind(kind),
		Timeout: time.Duration(timeoutS * float64(time.Second)), CancelPolicy: protocol.CancelPolicy(policy),
		Submitter: h.submitter(req), TraceID: traceID, Labels: labels, MaxOutputBytes: maxOutput})
	if err != nil {
		return cmdRef{}, 0, fmt.Errorf("submit to session %s: %w", name, err)
	}
	ref := cmdRef{s: s, session: name, cmd: c}
	h.remember(ref)
	return ref, spool, nil
}

// result waits up to d for the command's result and describes it.
func (h *handler) result(ctx context.Context, ref cmdRef, d time.Duration) (CommandResult, error) {
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	res, err := ref.cmd.Wait(wctx, master.WaitOptions{})
	out := CommandResult{Session: ref.session, CmdID: ref.cmd.ID, Seq: ref.cmd.Seq}
	var re *master.ResultError
	switch {
	case res != nil && (err == nil || errors.As(err, &re)):
		return h.describe(ref, res, out)
	case ctx.Err() != nil:
		return out, fmt.Errorf("call ended: %w (command %s continues)", ctx.Err(), ref.cmd.ID)
	case errors.Is(err, master.ErrWaitTimeout):
		out.Note = fmt.Sprintf("no result within %v; the command continues: call wait with its cmd_id", d)
	case err != nil:
		out.Note = fmt.Sprintf("waiting stopped: %v; the command stays in the session: call wait or status", err)
	}
	out.State = h.state(ref)
	if out.State == "finished" { // The result appeared just now.
		if res, err := ref.cmd.Result(); err == nil && res != nil {
			out.Note = ""
			return h.describe(ref, res, out)
		}
	}
	rel := protocol.DirOutput + "/" + protocol.OutputName(ref.cmd.Name)
	p, err := makePreview(filepath.Join(ref.s.Dir(), rel), rel, -1, "", h.cfg.PreviewBytes)
	if err != nil {
		return out, err
	}
	out.Output = p
	return out, nil
}

// state says where the command's file is now.
func (h *handler) state(ref cmdRef) string {
	for _, d := range []struct{ dir, state string }{
		{protocol.DirResult, "finished"}, {protocol.DirInflight, "running"}, {protocol.DirQueue, "queued"}} {
		if _, err := os.Lstat(filepath.Join(ref.s.Dir(), d.dir, ref.cmd.Name)); err == nil {
			return d.state
		}
	}
	return "unknown"
}

func (h *handler) describe(ref cmdRef, res *protocol.Result, out CommandResult) (CommandResult, error) {
	out.Done, out.State, out.Status = true, "finished", string(res.Status)
	if res.Value != nil {
		out.Value, out.ValueTruncated = cut(*res.Value, h.cfg.PreviewBytes)
	}
	out.ValueTruncated = out.ValueTruncated || res.ValueTruncated
	if res.Error != nil {
		out.Error = &ErrorInfo{Code: res.Error.Code, Message: res.Error.Message}
		out.Error.Message, _ = cut(out.Error.Message, h.cfg.PreviewBytes)
	}
	out.ExitReason, out.DurationMS = string(res.ExitReason), res.Stats.DurationMS
	out.SpoolStart, out.SpoolEnd, out.CommandPath = res.SpoolStart, res.SpoolEnd, res.CommandPath
	out.TraceID, out.Labels = res.TraceID, res.Labels
	rel := res.OutputPath
	if rel == "" || !filepath.IsLocal(rel) {
		rel = protocol.DirOutput + "/" + protocol.OutputName(ref.cmd.Name)
	}
	p, err := makePreview(filepath.Join(ref.s.Dir(), rel), rel, res.Stats.Bytes, res.OutputSHA256, h.cfg.PreviewBytes)
	if err != nil {
		return out, err
	}
	out.Output = p
	return out, nil
}

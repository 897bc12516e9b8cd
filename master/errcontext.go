package master

import (
	"maps"

	"github.com/skillpilot/skillpilot/internal/sessionio"
	"github.com/skillpilot/skillpilot/protocol"
)

// ContextError is an error that carries a context: the facts beside its
// code and message that say what it was about (the cmd_id, the file, the
// limit), for programs that branch on them (PROTOCOL.md section 19,
// "Errors carry context"). Keys are lower snake case, values JSON scalars.
type ContextError interface {
	error
	ErrorContext() map[string]any
}

// ErrorContext gathers the context of every ContextError in err's chain
// (the outermost wins for a key), and the field of a
// *protocol.ValidationError in it, or returns nil when there is none. The
// CLI prints it as "context" beside "code" and "message" in --json errors.
func ErrorContext(err error) map[string]any {
	var out map[string]any
	var walk func(error)
	walk = func(e error) {
		if e == nil {
			return
		}
		if ve, ok := e.(*protocol.ValidationError); ok && ve.Field != "" {
			if out == nil {
				out = map[string]any{}
			}
			if _, seen := out["field"]; !seen {
				out["field"] = ve.Field
			}
		}
		if ce, ok := e.(ContextError); ok {
			for k, v := range ce.ErrorContext() {
				if out == nil {
					out = map[string]any{}
				}
				if _, seen := out[k]; !seen {
					out[k] = v
				}
			}
		}
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		case interface{ Unwrap() []error }:
			for _, x := range u.Unwrap() {
				walk(x)
			}
		}
	}
	walk(err)
	return out
}

// withContext returns err with the context ctx (nil when err is nil).
func withContext(err error, ctx map[string]any) error { return sessionio.WithContext(err, ctx) }

// ErrorContext of a refused request: the reply's own context as the
// runner wrote it (the invalid field, the request file, a limit), then the
// request and the reply's outcome, with the named command and its state
// when the reply has them (these keys win over the reply's).
func (e *RequestError) ErrorContext() map[string]any {
	ctx := maps.Clone(e.Reply.Context)
	if ctx == nil {
		ctx = map[string]any{}
	}
	ctx["op"], ctx["req_id"], ctx["outcome"] = string(e.Reply.Op), e.Reply.ReqID, string(e.Reply.Outcome)
	if e.Reply.CmdID != "" {
		ctx["cmd_id"] = e.Reply.CmdID
	}
	if e.Reply.CmdState != "" {
		ctx["cmd_state"] = e.Reply.CmdState
	}
	return ctx
}

// ErrorContext of a result that is not ok: its error's context as the
// runner wrote it (the file, the field, the limit, the timeout: PROTOCOL.md
// section 7), then the command, its status and why it ended (these keys
// win over the result's).
func (e *ResultError) ErrorContext() map[string]any {
	var ctx map[string]any
	if e.Result.Error != nil {
		ctx = maps.Clone(e.Result.Error.Context)
	}
	if ctx == nil {
		ctx = map[string]any{}
	}
	ctx["cmd_id"], ctx["status"] = e.Result.CmdID, string(e.Result.Status)
	if e.Result.ExitReason != "" {
		ctx["exit_reason"] = string(e.Result.ExitReason)
	}
	return ctx
}

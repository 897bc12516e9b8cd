package master

import "maps"

// ContextError is an error that carries a context: the facts beside its
// code and message that say what it was about (the cmd_id, the file, the
// limit), for programs that branch on them (PROTOCOL.md section 19,
// "Errors carry context"). Keys are lower snake case, values JSON scalars.
type ContextError interface {
	error
	ErrorContext() map[string]any
}

// ErrorContext gathers the context of every ContextError in err's chain
// (the outermost wins for a key), or returns nil when there is none. The
// CLI prints it as "context" beside "code" and "message" in --json errors.
func ErrorContext(err error) map[string]any {
	var out map[string]any
	var walk func(error)
	walk = func(e error) {
		if e == nil {
			return
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

// contextError wraps err with a context; errors.Is and errors.As see err.
type contextError struct {
	err error
	ctx map[string]any
}

func (e *contextError) Error() string                { return e.err.Error() }
func (e *contextError) Unwrap() error                { return e.err }
func (e *contextError) ErrorContext() map[string]any { return maps.Clone(e.ctx) }

// withContext returns err with the context ctx (nil when err is nil).
func withContext(err error, ctx map[string]any) error {
	if err == nil {
		return nil
	}
	return &contextError{err: err, ctx: ctx}
}

// ErrorContext of a refused request: the request and the reply's outcome,
// with the named command and its state when the reply has them.
func (e *RequestError) ErrorContext() map[string]any {
	ctx := map[string]any{"op": string(e.Reply.Op), "req_id": e.Reply.ReqID, "outcome": string(e.Reply.Outcome)}
	if e.Reply.CmdID != "" {
		ctx["cmd_id"] = e.Reply.CmdID
	}
	if e.Reply.CmdState != "" {
		ctx["cmd_state"] = e.Reply.CmdState
	}
	return ctx
}

// ErrorContext of a result that is not ok: the command, its status and
// why it ended.
func (e *ResultError) ErrorContext() map[string]any {
	ctx := map[string]any{"cmd_id": e.Result.CmdID, "status": string(e.Result.Status)}
	if e.Result.ExitReason != "" {
		ctx["exit_reason"] = string(e.Result.ExitReason)
	}
	return ctx
}

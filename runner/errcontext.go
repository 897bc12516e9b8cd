package runner

import (
	"errors"
	"maps"

	"github.com/skillpilot/skillpilot/protocol"
)

// An error's context (PROTOCOL.md section 19, "Errors carry context") is
// what the runner knows beside the code and message of a result's error or
// a refused request's reply: the file, the field, the limit. Keys are lower
// snake case, values JSON scalars; never payload bytes.

// limitError is a file that broke a size limit; its context names the
// limit in bytes.
type limitError struct {
	msg   string
	limit int64
}

func (e *limitError) Error() string { return e.msg }

// errContext builds a context from key/value pairs, leaving out empty
// strings and nil values; nil when nothing is left.
func errContext(kv ...any) map[string]any {
	var ctx map[string]any
	for i := 0; i+1 < len(kv); i += 2 {
		k, _ := kv[i].(string)
		switch v := kv[i+1].(type) {
		case nil:
			continue
		case string:
			if v == "" {
				continue
			}
		case *int:
			if v == nil {
				continue
			}
			kv[i+1] = *v
		}
		if ctx == nil {
			ctx = map[string]any{}
		}
		ctx[k] = kv[i+1]
	}
	return ctx
}

// addContext adds the pairs of errContext(kv...) to ctx (a new map when ctx is
// nil); existing keys are kept.
func addContext(ctx map[string]any, kv ...any) map[string]any {
	for k, v := range errContext(kv...) {
		if ctx == nil {
			ctx = map[string]any{}
		}
		if _, ok := ctx[k]; !ok {
			ctx[k] = v
		}
	}
	return ctx
}

// contextOf is what err says about itself: the field of a
// *protocol.ValidationError, the limit of a size limit.
func contextOf(err error) map[string]any {
	var ctx map[string]any
	if ve, ok := errors.AsType[*protocol.ValidationError](err); ok {
		ctx = addContext(ctx, "field", ve.Field)
	}
	if le, ok := errors.AsType[*limitError](err); ok {
		ctx = addContext(ctx, "limit", le.limit)
	}
	return ctx
}

// endContext is the context of a running command's end: the effective
// timeout of a timeout, who cancelled it, how the tool ended (the budget
// of an output limit is added by describeLimit).
func (c *running) endContext(status protocol.Status, exit *toolExit) map[string]any {
	ctx := maps.Clone(c.endCtx) // A copy: the request's context stays as it was.
	if status == protocol.StatusTimeout && !c.deadline.IsZero() {
		ctx = addContext(ctx, "timeout_s", c.deadline.Sub(c.start).Seconds())
	}
	if exit != nil {
		ctx = addContext(ctx, "exit_code", exit.code, "signal", exit.signal)
	}
	return ctx
}

// replyContext is the context of a reply that refused or could not act
// (nil for cancelled_running, cancelled_queued, accepted and delivered):
// what decide found (the invalid field, the request file, a limit, the
// sessions of a stale request), the command named and where it is, and
// the expect timeout that ran out.
func replyContext(req *protocol.ControlRequest, a answer) map[string]any {
	switch a.outcome {
	case protocol.OutcomeCancelledRunning, protocol.OutcomeCancelledQueued, protocol.OutcomeAccepted, protocol.OutcomeDelivered:
		return nil
	case protocol.OutcomeExpectTimeout:
		ms := int64(protocol.DefaultExpectTimeoutMS)
		if req.ExpectTimeoutMS != nil {
			ms = *req.ExpectTimeoutMS
		}
		return addContext(a.ctx, "cmd_id", a.cmdID, "expect_timeout_ms", ms)
	}
	return addContext(a.ctx, "cmd_id", a.cmdID, "cmd_state", a.cmdState)
}

package sessionio

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
)

// Sentinels package master exports under the same names (master.ErrUsage,
// master.ErrSessionMissing, master.ErrWaitTimeout): they are defined here so
// that the plumbing below returns them without importing master.
var (
	// ErrSessionMissing: the directory is not a session (no queue/).
	ErrSessionMissing = errors.New("master: session directory missing or not a session")
	// ErrWaitTimeout: the caller's wait ended (context deadline) before
	// what it waited for.
	ErrWaitTimeout = errors.New("master: timed out waiting")
	// ErrUsage marks an invalid argument or option. The message follows
	// it: "master: usage: ...", the package's one prefix.
	ErrUsage = errors.New("master: usage")
)

// UsageError is an error wrapping ErrUsage with the message format and
// args give: "master: usage: <message>".
func UsageError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUsage, fmt.Sprintf(format, args...))
}

// ContextEnd is what a wait returns when ctx ends: a deadline is
// ErrWaitTimeout; a cancellation gives its cause (an
// *master.InterruptedError when the CLI got a signal).
func ContextEnd(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return ErrWaitTimeout
	}
	if c := context.Cause(ctx); c != nil {
		return c
	}
	return ctx.Err()
}

// CodedError is an error that carries its own stable code and CLI exit
// code. master.Classify answers with them before its own table, so the
// packages built on master (launch, pool, the CLI) define errors it
// classifies without being imported by it. Code may be empty for an
// outcome already reported.
type CodedError interface {
	error
	ErrorCode() (code string, exit int)
}

// Wrapf wraps err under "master: " and what format says, dropping err's
// own "master: " prefix so that the prefix appears once in the message
// ("master: waiting for X: runner not alive", not "...: master: runner
// not alive"). errors.Is and errors.As see err.
func Wrapf(err error, format string, args ...any) error {
	return &prefixed{msg: "master: " + fmt.Sprintf(format, args...), err: err}
}

type prefixed struct {
	msg string
	err error
}

func (e *prefixed) Error() string {
	return e.msg + ": " + strings.TrimPrefix(e.err.Error(), "master: ")
}
func (e *prefixed) Unwrap() error { return e.err }

// WithContext returns err carrying ctx as its context (master.ContextError:
// master.ErrorContext gathers it); errors.Is and errors.As still see err.
// Nil stays nil.
func WithContext(err error, ctx map[string]any) error {
	if err == nil {
		return nil
	}
	return &contextError{err: err, ctx: ctx}
}

// contextError wraps err with a context; errors.Is and errors.As see err.
type contextError struct {
	err error
	ctx map[string]any
}

func (e *contextError) Error() string                { return e.err.Error() }
func (e *contextError) Unwrap() error                { return e.err }
func (e *contextError) ErrorContext() map[string]any { return maps.Clone(e.ctx) }

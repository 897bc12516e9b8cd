package master

import (
	"errors"
	"fmt"
	"strings"

	"github.com/skillpilot/skillpilot/internal/sessionio"
	"github.com/skillpilot/skillpilot/protocol"
)

// Errors a caller may branch on with errors.Is.
var (
	// ErrSessionMissing: the directory is not a session (no queue/).
	ErrSessionMissing = sessionio.ErrSessionMissing
	// ErrRunnerNotAlive: no runner serves the session (it stopped, its lock
	// is free, or its heartbeat counter did not move), and a wait saw none
	// for its grace (Session.WaitForRunner).
	ErrRunnerNotAlive = errors.New("master: runner not alive")
	// ErrCannotServe: a runner is alive but cannot serve commands (phase
	// error: its tool does not start or its init fails).
	ErrCannotServe = errors.New("master: runner cannot serve")
	// ErrWaitTimeout: the caller's wait ended (context deadline) before the
	// result appeared. The command may still run.
	ErrWaitTimeout = sessionio.ErrWaitTimeout
	// ErrCommandFailed: the command ran and failed (status error).
	ErrCommandFailed = errors.New("master: command failed")
	// ErrCommandTimeout: the runner ended the command at its timeout.
	ErrCommandTimeout = errors.New("master: command timed out")
	// ErrCancelled: the command was cancelled (cancel request, lease expiry,
	// force stop).
	ErrCancelled = errors.New("master: command cancelled")
	// ErrUnknownCmdID: no command with this cmd_id is queued, running or
	// finished in the session (a lookup, or a cancel's outcome not_found).
	ErrUnknownCmdID = errors.New("master: unknown cmd_id")
	// ErrNotRunning: the named command is not running (queued, finished or
	// unknown), so input or a signal cannot reach it (outcome not_running).
	ErrNotRunning = errors.New("master: command not running")
	// ErrAlreadyFinished: cancel of a command that has already finished.
	ErrAlreadyFinished = errors.New("master: command already finished")
	// ErrNotQueued: withdraw of a command a runner has already claimed
	// (it is running: cancel it instead).
	ErrNotQueued = errors.New("master: command not queued")
	// ErrAlreadyWithdrawn: withdraw of a command an earlier withdraw took
	// back (it is in withdrawn/; it never runs).
	ErrAlreadyWithdrawn = errors.New("master: command already withdrawn")
	// ErrIdle: cancel of the current command while nothing runs.
	ErrIdle = errors.New("master: runner idle, nothing to cancel")
	// ErrStaleRequest: the runner answered a request as meant for another
	// runner session (outcome stale); nothing was done.
	ErrStaleRequest = errors.New("master: request stale")
	// ErrRequestRejected: the runner rejected a request as invalid or not
	// supported (outcome rejected); nothing was done.
	ErrRequestRejected = errors.New("master: request rejected")
	// ErrExpectTimeout: a send request's expect did not match in time.
	ErrExpectTimeout = errors.New("master: expected output did not appear")
	// ErrRefusedEcho: a secret send was refused while the terminal echoes.
	ErrRefusedEcho = errors.New("master: secret input refused while the terminal echoes")
	// ErrInterrupted: the master itself was interrupted (SIGINT, SIGTERM):
	// the CLI's and the MCP server's context cause, classified with exit
	// 128 + the signal number.
	ErrInterrupted = sessionio.ErrInterrupted
)

// ResultError is returned with a result whose status is not ok. It wraps
// ErrCommandFailed, ErrCommandTimeout or ErrCancelled.
type ResultError struct {
	Result *protocol.Result
}

// Error says the command, its status and why it ended.
func (e *ResultError) Error() string {
	msg := string(e.Result.ExitReason)
	if e.Result.Error != nil {
		msg = e.Result.Error.Message
	}
	return fmt.Sprintf("command %s: %s: %s", e.Result.CmdID, e.Result.Status, msg)
}

// Unwrap returns the sentinel of the result's status.
func (e *ResultError) Unwrap() error {
	switch e.Result.Status {
	case protocol.StatusTimeout:
		return ErrCommandTimeout
	case protocol.StatusCancelled:
		return ErrCancelled
	}
	return ErrCommandFailed
}

// RequestError is returned with a control reply whose outcome is not a
// success (for cancel: anything but cancelled_running and cancelled_queued).
// It wraps the sentinel of the outcome: ErrUnknownCmdID (not_found),
// ErrAlreadyFinished, ErrIdle, ErrNotRunning, ErrStaleRequest,
// ErrRequestRejected, ErrExpectTimeout or ErrRefusedEcho.
type RequestError struct {
	Reply *protocol.ControlReply
}

// Error says the request, its outcome and the runner's message.
func (e *RequestError) Error() string {
	return fmt.Sprintf("%s request %s: %s: %s", e.Reply.Op, e.Reply.ReqID, e.Reply.Outcome, e.Reply.Message)
}

// Unwrap returns the sentinel of the reply's outcome.
func (e *RequestError) Unwrap() error { return outcomeErr(e.Reply.Outcome) }

// outcomeErr maps an outcome to its sentinel; nil for a success.
func outcomeErr(o protocol.Outcome) error {
	switch o {
	case protocol.OutcomeCancelledRunning, protocol.OutcomeCancelledQueued, protocol.OutcomeAccepted, protocol.OutcomeDelivered:
		return nil
	case protocol.OutcomeNotFound:
		return ErrUnknownCmdID
	case protocol.OutcomeAlreadyFinished:
		return ErrAlreadyFinished
	case protocol.OutcomeIdle:
		return ErrIdle
	case protocol.OutcomeNotRunning:
		return ErrNotRunning
	case protocol.OutcomeStale:
		return ErrStaleRequest
	case protocol.OutcomeExpectTimeout:
		return ErrExpectTimeout
	case protocol.OutcomeRefusedEcho:
		return ErrRefusedEcho
	}
	return ErrRequestRejected
}

// Stable error codes of the master CLI's JSON output and exit codes. The
// codes of control outcomes are the outcome strings themselves.
const (
	CodeSessionMissing   = "session_missing"
	CodeRunnerNotAlive   = "runner_not_alive"
	CodeCannotServe      = "cannot_serve"
	CodeWaitTimeout      = "wait_timeout"
	CodeCommandFailed    = "command_failed"
	CodeCommandTimeout   = "command_timeout"
	CodeCancelled        = "cancelled"
	CodeUsage            = "usage"
	CodeIO               = "io_error"
	CodeUnknownCmdID     = "unknown_cmd_id"
	CodeNotRunning       = "not_running"
	CodeAlreadyFinished  = "already_finished"
	CodeIdle             = "idle"
	CodeNotQueued        = "not_queued"
	CodeAlreadyWithdrawn = "already_withdrawn"
	CodeStale            = "stale"
	CodeRejected         = "rejected"
	CodeExpectTimeout    = "expect_timeout"
	CodeRefusedEcho      = "refused_echo"
	CodeInterrupted      = "interrupted"
	CodePruned           = "pruned"
)

// Exit codes of the master CLI (PROTOCOL.md, "Master outcomes").
const (
	ExitOK           = 0
	ExitFailed       = 1
	ExitUsage        = 2
	ExitTimeout      = 3
	ExitCancelled    = 4
	ExitNoRunner     = 5 // session missing, runner not alive, or cannot serve
	ExitUnknownCmdID = 6
	ExitNothingToDo  = 7 // not running, already finished, idle
	ExitPruned       = 8 // the command's result was removed by the session's retention
	ExitIO           = 10
	ExitSIGINT       = 130
	ExitSIGTERM      = 143
)

// Classify maps an error to its stable code and CLI exit code.
func Classify(err error) (code string, exit int) {
	var ce sessionio.CodedError
	var ie *sessionio.InterruptedError
	switch {
	case err == nil:
		return "", ExitOK
	case errors.As(err, &ce): // Packages built on this one (launch, pool, the CLI) give their own.
		return ce.ErrorCode()
	case errors.As(err, &ie):
		return CodeInterrupted, 128 + int(ie.Signal)
	case errors.Is(err, ErrInterrupted):
		return CodeInterrupted, ExitSIGINT
	case errors.Is(err, ErrSessionMissing):
		return CodeSessionMissing, ExitNoRunner
	case errors.Is(err, ErrRunnerNotAlive):
		return CodeRunnerNotAlive, ExitNoRunner
	case errors.Is(err, ErrCannotServe):
		return CodeCannotServe, ExitNoRunner
	case errors.Is(err, ErrStaleRequest):
		return CodeStale, ExitNoRunner
	case errors.Is(err, ErrWaitTimeout):
		return CodeWaitTimeout, ExitTimeout
	case errors.Is(err, ErrExpectTimeout):
		return CodeExpectTimeout, ExitTimeout
	case errors.Is(err, ErrCommandTimeout):
		return CodeCommandTimeout, ExitTimeout
	case errors.Is(err, ErrCancelled):
		return CodeCancelled, ExitCancelled
	case errors.Is(err, ErrCommandFailed):
		return CodeCommandFailed, ExitFailed
	case errors.Is(err, ErrPruned):
		return CodePruned, ExitPruned
	case errors.Is(err, ErrUnknownCmdID):
		return CodeUnknownCmdID, ExitUnknownCmdID
	case errors.Is(err, ErrNotRunning):
		return CodeNotRunning, ExitNothingToDo
	case errors.Is(err, ErrAlreadyFinished):
		return CodeAlreadyFinished, ExitNothingToDo
	case errors.Is(err, ErrIdle):
		return CodeIdle, ExitNothingToDo
	case errors.Is(err, ErrNotQueued):
		return CodeNotQueued, ExitNothingToDo
	case errors.Is(err, ErrAlreadyWithdrawn):
		return CodeAlreadyWithdrawn, ExitNothingToDo
	case errors.Is(err, ErrRefusedEcho):
		return CodeRefusedEcho, ExitIO
	case errors.Is(err, ErrRequestRejected):
		return CodeRejected, ExitIO
	case errors.Is(err, ErrUsage):
		return CodeUsage, ExitUsage
	}
	return CodeIO, ExitIO
}

// ErrUsage marks an invalid argument or option (code usage, CLI exit 2).
// The message follows it: "master: usage: ...", under the prefix every
// error of this package has.
var ErrUsage = sessionio.ErrUsage

func usageErr(format string, args ...any) error { return sessionio.UsageError(format, args...) }

// usageFrom is err (a *protocol.ValidationError, say) as a usage error,
// with err kept in the chain so that ErrorContext finds its field.
func usageFrom(err error) error { return fmt.Errorf("%w: %w", ErrUsage, err) }

// wrapf wraps err under "master: " and what format says, "master: "
// said once (sessionio.Wrapf).
func wrapf(err error, format string, args ...any) error { return sessionio.Wrapf(err, format, args...) }

// withCause is err with why in parentheses, "master: " said once: "master:
// timed out waiting (runner cannot serve: ...)". Both are wrapped.
type withCause struct{ err, cause error }

func (e *withCause) Error() string {
	return e.err.Error() + " (" + strings.TrimPrefix(e.cause.Error(), "master: ") + ")"
}
func (e *withCause) Unwrap() []error { return []error{e.err, e.cause} }

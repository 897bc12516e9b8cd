package master

import (
	"errors"
	"fmt"

	"github.com/skillpilot/skillpilot/protocol"
)

// Errors a caller may branch on with errors.Is.
var (
	// ErrSessionMissing: the directory is not a session (no queue/).
	ErrSessionMissing = errors.New("master: session directory missing or not a session")
	// ErrRunnerNotAlive: no runner serves the session (its lock is free, or
	// its heartbeat counter did not move).
	ErrRunnerNotAlive = errors.New("master: runner not alive")
	// ErrWaitTimeout: the caller's wait ended (context deadline) before the
	// result appeared. The command may still run.
	ErrWaitTimeout = errors.New("master: timed out waiting")
	// ErrCommandFailed: the command ran and failed (status error).
	ErrCommandFailed = errors.New("master: command failed")
	// ErrCommandTimeout: the runner ended the command at its timeout.
	ErrCommandTimeout = errors.New("master: command timed out")
	// ErrCancelled: the command was cancelled (cancel request, lease expiry,
	// force stop).
	ErrCancelled = errors.New("master: command cancelled")
)

// ResultError is returned with a result whose status is not ok. It wraps
// ErrCommandFailed, ErrCommandTimeout or ErrCancelled.
type ResultError struct {
	Result *protocol.Result
}

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

// Stable error codes of the master CLI's JSON output and exit codes.
const (
	CodeSessionMissing = "session_missing"
	CodeRunnerNotAlive = "runner_not_alive"
	CodeWaitTimeout    = "wait_timeout"
	CodeCommandFailed  = "command_failed"
	CodeCommandTimeout = "command_timeout"
	CodeCancelled      = "cancelled"
	CodeUsage          = "usage"
	CodeIO             = "io_error"
)

// Exit codes of the master CLI.
const (
	ExitOK        = 0
	ExitFailed    = 1
	ExitUsage     = 2
	ExitTimeout   = 3
	ExitCancelled = 4
	ExitNoRunner  = 5
	ExitIO        = 10
)

// Classify maps an error to its stable code and CLI exit code.
func Classify(err error) (code string, exit int) {
	if code, exit, ok := classifyFarm(err); ok { // launch and pool (launch_wait.go)
		return code, exit
	}
	var eo exitOnly
	switch {
	case err == nil:
		return "", ExitOK
	case errors.As(err, &eo):
		return "", int(eo)
	case errors.Is(err, ErrSessionMissing):
		return CodeSessionMissing, ExitNoRunner
	case errors.Is(err, ErrRunnerNotAlive):
		return CodeRunnerNotAlive, ExitNoRunner
	case errors.Is(err, ErrWaitTimeout):
		return CodeWaitTimeout, ExitTimeout
	case errors.Is(err, ErrCommandTimeout):
		return CodeCommandTimeout, ExitTimeout
	case errors.Is(err, ErrCancelled):
		return CodeCancelled, ExitCancelled
	case errors.Is(err, ErrCommandFailed):
		return CodeCommandFailed, ExitFailed
	case errors.Is(err, errUsage):
		return CodeUsage, ExitUsage
	}
	return CodeIO, ExitIO
}

var errUsage = errors.New("usage")

func usageErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, args...))
}

package sessionio

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrInterrupted: the master itself was interrupted (SIGINT, SIGTERM);
// see InterruptedError. Package master exports it as master.ErrInterrupted.
var ErrInterrupted = errors.New("master: interrupted")

// InterruptedError reports that the master was stopped by a signal: the
// cause of the context the master CLI and the MCP server cancel on SIGINT
// and SIGTERM. It wraps ErrInterrupted; master.Classify gives code
// interrupted and exit 128 + the signal number (130 for SIGINT, 143 for
// SIGTERM).
type InterruptedError struct {
	Signal syscall.Signal
}

// Error reads like os/signal's context causes ("terminated signal
// received"), followed by the signal's name.
func (e *InterruptedError) Error() string {
	return fmt.Sprintf("%s signal received (%s)", e.Signal, unix.SignalName(e.Signal))
}

// Unwrap returns ErrInterrupted.
func (e *InterruptedError) Unwrap() error { return ErrInterrupted }

// Is makes an interruption a context.Canceled too, as os/signal's causes are.
func (e *InterruptedError) Is(target error) bool { return target == context.Canceled }

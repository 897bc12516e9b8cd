package cli

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/internal/sessionio"
)

// Once armed returns, SIGINT is caught: it cancels the context with an
// *InterruptedError instead of killing the process. Submit relies on it
// before it queues a command (the handler is installed on a goroutine of
// its own, interruptContext). The signal goes to a process of its own
// (this test binary run again), so no other test's Main sees it.
func TestInterruptContextArmed(t *testing.T) {
	if os.Getenv("SP_TEST_INTERRUPT_CHILD") == "1" {
		ctx, armed, stop := interruptContext()
		defer stop()
		armed()
		if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Minute):
			t.Fatal("SIGINT did not end the context within a minute")
		}
		var ie *sessionio.InterruptedError
		if !errors.As(context.Cause(ctx), &ie) || ie.Signal != syscall.SIGINT {
			t.Fatalf("cause %v, want an InterruptedError for SIGINT", context.Cause(ctx))
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestInterruptContextArmed$", "-test.count=1")
	cmd.Env = append(os.Environ(), "SP_TEST_INTERRUPT_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v (a process killed by its SIGINT was not armed)\n%s", err, out)
	}
}

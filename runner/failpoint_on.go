//go:build sp_failpoints

package runner

import (
	"os"
	"syscall"
)

// failpoint kills the runner with SIGKILL when $SP_FAILPOINT names this
// point: only in binaries built with -tags sp_failpoints, for crash tests.
func failpoint(name string) {
	if os.Getenv("SP_FAILPOINT") == name {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // Never returns: the signal ends the process.
	}
}

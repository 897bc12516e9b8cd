package master

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// A wrapped error says "master:" once, and still is
// what it wraps.
func TestErrorPrefixOnce(t *testing.T) {
	inner := fmt.Errorf("%w: the runner stopped", ErrRunnerNotAlive)
	for _, tc := range []struct {
		err  error
		want string
		is   error
	}{
		{wrapf(inner, "waiting for %s", "c1"), "master: waiting for c1: runner not alive: the runner stopped", ErrRunnerNotAlive},
		{wrapf(ErrSessionMissing, "write command"), "master: write command: session directory missing or not a session", ErrSessionMissing},
		{&withCause{err: ErrWaitTimeout, cause: ErrCannotServe}, "master: timed out waiting (runner cannot serve)", ErrCannotServe},
	} {
		if got := tc.err.Error(); got != tc.want || strings.Count(got, "master:") != 1 {
			t.Errorf("%q, want %q", got, tc.want)
		}
		if !errors.Is(tc.err, tc.is) {
			t.Errorf("%q is not %v", tc.err, tc.is)
		}
	}
}

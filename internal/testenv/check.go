package testenv

import (
	"testing"

	"github.com/skillpilot/skillpilot/internal/sessioncheck"
)

// CheckSession registers a cleanup that runs the session-invariant check
// ([sessioncheck.Check]) on dir with opts and reports every violation as a
// test error. It does nothing when the test has already failed (the first
// failure says more than the mess it leaves).
//
// Cleanups run last-registered first: call CheckSession before starting
// whatever must stop before the check (a runner), as [StartRunner] and
// internal/testrunner do.
func CheckSession(t testing.TB, dir string, opts sessioncheck.Options) {
	t.Helper()
	t.Cleanup(func() {
		if !t.Failed() {
			VerifySession(t, dir, opts)
		}
	})
}

// VerifySession runs the session-invariant check on dir now and reports
// every violation as a test error; it reports whether there was none. Use
// it where a cleanup of the test's own must run it between steps (stop the
// runner, check, then dump the session if the test failed); otherwise
// prefer [CheckSession].
func VerifySession(t testing.TB, dir string, opts sessioncheck.Options) bool {
	t.Helper()
	if err := sessioncheck.Check(dir, opts); err != nil {
		t.Errorf("session invariants of %s:\n%v", dir, err)
		return false
	}
	return true
}

// SkipCheck records, in the test log, that the session at dir is
// deliberately not checked and why: the explicit opt-out for a test that
// leaves a session mid-state on purpose. reason must not be empty.
func SkipCheck(t testing.TB, dir, reason string) {
	t.Helper()
	if reason == "" {
		t.Fatal("testenv.SkipCheck: a reason is required")
	}
	t.Logf("session invariants of %s not checked: %s", dir, reason)
}

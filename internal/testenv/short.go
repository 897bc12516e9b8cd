package testenv

import "testing"

// Slow marks an end-to-end test that `make test-short` (go test -short,
// the developer's loop of under two minutes) leaves to `make test` and
// CI, which run everything: a real tool session or scheduler for seconds,
// a browser, a build of the whole tree. why says what makes it slow.
func Slow(t testing.TB, why string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("slow (%s): make test runs it", why)
	}
}

//go:build !sp_failpoints

package runner

// failpoint marks a point where a test build (tag sp_failpoints) can make
// the runner die, to test crash consistency at that exact point. In a normal
// build it does nothing and costs nothing.
func failpoint(string) {}

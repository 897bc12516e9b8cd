package runner

import "testing"

// A failure quoting the tool's last lines is logged whole once; the lines
// that follow from it (the error phase, the give-up, the stop, the end)
// say "(as above)" for it (a wrong --kind logged its reason
// eight times). Another reason is logged whole again; a short one always.
func TestLogReasonOnce(t *testing.T) {
	r := &Runner{}
	long := `the tool is at its prompt and did not run the start-up typed 4 times (is --kind yosys right for it?); the tool's last lines: "% invalid command name"`
	for i, tc := range []struct{ why, want string }{
		{long, long},
		{long, "(as above)"},
		{long + "; restart 1 of 5 in 250ms", "(as above); restart 1 of 5 in 250ms"},
		{"gave up after 2 failed starts: " + long, "gave up after 2 failed starts: (as above)"},
		{"signal terminated", "signal terminated"},
		{"gave up after 2 failed starts: " + long, "gave up after 2 failed starts: (as above)"},
		{"another failure of the tool, quoting other lines of it at length", "another failure of the tool, quoting other lines of it at length"},
		{long, long},
	} {
		if got := r.logReason(tc.why); got != tc.want {
			t.Errorf("%d: %q, want %q", i, got, tc.want)
		}
	}
}

package browser_test

import (
	"testing"

	"github.com/skillpilot/skillpilot/internal/testenv"
	"github.com/skillpilot/skillpilot/internal/testenv/browser"
)

// ParseTrace tells a trace whose slices nest from one whose slices overlap
// on a thread (the engine keeps the overlapping slice but does not place
// it, so the flame chart does not draw it), and names the processes.
func TestParseTrace(t *testing.T) {
	testenv.Slow(t, "chromium")
	chromium := testenv.NeedTool(t, "chromium", "chromium")
	b, err := browser.Start(chromium, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const meta = `{"name":"process_name","ph":"M","pid":7,"tid":1,"args":{"name":"s00"}}`
	nested := `{"traceEvents":[` + meta + `,
		{"name":"a","ph":"X","pid":7,"tid":1,"ts":1000,"dur":500},
		{"name":"b","ph":"X","pid":7,"tid":1,"ts":1100,"dur":100},
		{"name":"c","ph":"X","pid":7,"tid":1,"ts":1600,"dur":500}]}`
	overlapping := `[` + meta + `,
		{"name":"a","ph":"X","pid":7,"tid":1,"ts":1000,"dur":500},
		{"name":"b","ph":"X","pid":7,"tid":1,"ts":1200,"dur":500}]`
	for _, tc := range []struct {
		name, trace     string
		entries, placed int
	}{{"nested", nested, 3, 3}, {"overlapping", overlapping, 2, 1}} {
		threads, err := b.ParseTrace([]byte(tc.trace))
		if err != nil {
			t.Fatal(err)
		}
		if len(threads) != 1 {
			t.Fatalf("%s: threads %+v", tc.name, threads)
		}
		th := threads[0]
		if th.PID != 7 || th.TID != 1 || th.Entries != tc.entries || th.Placed != tc.placed {
			t.Errorf("%s: %+v, want %d entries and %d placed", tc.name, th, tc.entries, tc.placed)
		}
	}
	if p := b.Problems(); len(p) > 0 {
		t.Logf("console of the trace viewer: %v", p)
	}
}

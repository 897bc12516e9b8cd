package runner

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skillpilot/skillpilot/protocol"
)

func withBudget(n int64) func(*protocol.Command) {
	return func(c *protocol.Command) { c.MaxOutputBytes = n }
}

// A command printing without end is stopped by its cancel
// policy once past its max_output_bytes (or the runner's default); its
// result says output_limit, its output file holds exactly the first bytes
// up to the budget, and the next command runs normally. Real tclsh.
func TestOutputBudgetStopsEndlessPrinter(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.MaxOutputBytes = 50000 }).start()
	endless := `set i 0; while 1 {puts [format "line %08d %s" [incr i] [string repeat x 40]]}`
	want := func(n int) string {
		var b strings.Builder
		for i := 1; b.Len() < n; i++ {
			fmt.Fprintf(&b, "line %08d %s\n", i, strings.Repeat("x", 40))
		}
		return b.String()[:n]
	}
	cases := []struct {
		name   string
		mods   []func(*protocol.Command)
		budget int
		reason protocol.ExitReason
	}{
		{"ctrl_c", []func(*protocol.Command){withBudget(20000)}, 20000, protocol.ReasonCtrlC},
		{"terminate_tool", []func(*protocol.Command){withBudget(3), withPolicy(protocol.PolicyTerminateTool)}, 3, protocol.ReasonTerminateTool},
		{"runner default", nil, 50000, protocol.ReasonCtrlC},
	}
	for _, tc := range cases {
		name := h.submit(endless, tc.mods...)
		r := h.result(name)
		if r.Status != protocol.StatusError || r.Error == nil || r.Error.Code != protocol.CodeOutputLimit || r.ExitReason != tc.reason {
			t.Fatalf("%s: %+v %+v", tc.name, r, r.Error)
		}
		out := h.output(name)
		if out != want(tc.budget) || r.Stats.Bytes != int64(tc.budget) {
			t.Errorf("%s: output %d bytes (stats %d), want the first %d printed: %.80q", tc.name, len(out), r.Stats.Bytes, tc.budget, out)
		}
		if r.OutputSHA256 != sha256Hex(want(tc.budget)) {
			t.Errorf("%s: output_sha256 does not describe the kept bytes", tc.name)
		}
		// The session goes on: the next command runs normally.
		next := h.result(h.submit("expr 6*7"))
		if next.Status != protocol.StatusOK || *next.Value != "42" {
			t.Fatalf("%s: next command %+v", tc.name, next)
		}
	}
	// A command within its budget, one that raises it above the default,
	// and one whose output ends exactly at the budget are not touched.
	for _, c := range []struct {
		payload string
		mods    []func(*protocol.Command)
	}{
		{`puts [string repeat y 100]`, nil},
		{`puts -nonewline [string repeat z 60000]`, []func(*protocol.Command){withBudget(60000)}},
	} {
		name := h.submit(c.payload, c.mods...)
		if r := h.result(name); r.Status != protocol.StatusOK {
			t.Errorf("within budget: %+v %+v", r, r.Error)
		}
	}
	h.stop(protocol.StopGraceful)
	b, _ := os.ReadFile(filepath.Join(h.dir, protocol.FileMeta))
	if n := strings.Count(string(b), `"error_code":"output_limit"`); n != 3 {
		t.Errorf("%d cmd_end events with error_code output_limit", n)
	}
}

// When the budget ends a command and the tool dies of the
// Ctrl-C (plain tclsh), the output_limit error keeps how the tool ended in
// its context (signal, as PROTOCOL.md §7 requires and a timeout on the same
// tool keeps), beside the budget and the file. Real tclsh.
func TestOutputLimitKeepsToolExit(t *testing.T) {
	t.Parallel()
	h := newHarness(t).start()
	r := h.result(h.submit(`while 1 {puts [string repeat x 40]}`, withBudget(1000)))
	if r.Error == nil || r.Error.Code != protocol.CodeOutputLimit || !r.ToolRestarted || r.Signal == "" {
		t.Fatalf("output_limit on tclsh: %+v %+v", r, r.Error)
	}
	checkContext(t, "output_limit", r.Error.Context, map[string]any{"max_output_bytes": 1000, "file": r.OutputPath, "signal": r.Signal})
	// The same tool on a timeout keeps it too.
	rt := h.result(h.submit("after 60000", withTimeout(0.25)))
	if rt.Error == nil || rt.Error.Context["signal"] != rt.Signal {
		t.Errorf("timeout: %+v %+v", rt, rt.Error)
	}
}

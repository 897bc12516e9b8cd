package bench

import (
	"os/exec"
	"testing"

	"github.com/skillpilot/skillpilot/protocol"
)

// BenchmarkRealToolsRoundTrip: the round trip (queue → result visible) of
// a trivial command through a runner on each real shell, against the same
// on tclsh, in one run: every runner is alive and the round trips
// alternate across them, one at a time. What the runner adds inside each
// tool is BenchmarkToolShare (./runner/).
//
//	go test -run '^$' -bench RealToolsRoundTrip -benchtime 1x ./test/bench/
func BenchmarkRealToolsRoundTrip(b *testing.B) {
	type tool struct {
		name    string
		args    []string
		kind    protocol.Kind
		payload string
		c       *client
		s       sample
	}
	tools := []*tool{
		{name: "tclsh", args: []string{"--", "tclsh"}, payload: "puts hi"},
		{name: "opensta", args: []string{"--", "sta", "-no_splash"}, payload: "puts hi"},
		{name: "magic", args: []string{"--", "magic", "-dnull", "-noconsole"}, payload: "puts hi"},
		{name: "yosys", args: []string{"--kind", "yosys"}, kind: "yosys", payload: "log hi"},
		{name: "ngspice", args: []string{"--kind", "ngspice"}, kind: "ngspice", payload: "echo hi"},
	}
	for _, t := range tools {
		prog := string(t.kind)
		if t.kind == "" {
			prog = t.args[1] // After "--".
		}
		if _, err := exec.LookPath(prog); err != nil {
			b.Fatalf("%s is not installed (scripts/deps.sh installs it)", prog)
		}
		d := benchDir(b)
		startRunner(b, d, t.args...)
		t.c = newClient(b, d)
		t.c.kind = t.kind
		for range 5 {
			t.c.roundTrip(b, t.payload) // Warm up.
		}
	}
	per := pick(10, 200)
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		for range per {
			for _, t := range tools {
				t.s = append(t.s, t.c.roundTrip(b, t.payload))
			}
		}
	}
	b.StopTimer()
	base := us(tools[0].s.pct(0.5))
	report("round trip of a trivial command per tool (µs)   p50      p90      p99   × tclsh")
	for _, t := range tools {
		p50 := us(t.s.pct(0.5))
		report("%-12s %8.0f %8.0f %8.0f   %5.2f", t.name, p50, us(t.s.pct(0.9)), us(t.s.pct(0.99)), p50/base)
		b.ReportMetric(p50, t.name+"-p50-µs")
	}
}

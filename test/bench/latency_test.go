package bench

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkRoundTrip: enqueue → result visible, `puts hi` on tclsh, for the
// runner and its references, alternating single round trips while every
// side is alive. This is the SECONDARY, interleaved figure: one side's
// deferred work (the runner's syncer, spare refills) can land in the
// other's measurements. BenchmarkRoundTripAlone gives the primary ratios.
func BenchmarkRoundTrip(b *testing.B) {
	rounds, per := pick(3, 40), pick(5, 25)
	rd := benchDir(b)
	startRunner(b, rd)
	rc := newClient(b, rd)
	md := benchDir(b)
	ml, err := startMinimalLoop(md, true)
	if err != nil {
		b.Fatal(err)
	}
	defer ml.close()
	mc := newClient(b, md)
	floor, err := startPTYTool()
	if err != nil {
		b.Fatal(err)
	}
	defer floor.close()
	script := filepath.Join(b.TempDir(), "hi.tcl")
	os.WriteFile(script, []byte("puts hi\n"), 0o600)
	// Warm up both sides.
	for i := 0; i < 5; i++ {
		rc.roundTrip(b, "puts hi")
		mc.roundTrip(b, "puts hi")
	}
	var run, min, flo, one sample
	var ratios []float64
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		for r := 0; r < rounds; r++ {
			var rr, mm sample
			for i := 0; i < per; i++ {
				rr = append(rr, rc.roundTrip(b, "puts hi"))
				mm = append(mm, mc.roundTrip(b, "puts hi"))
				d, err := ptyFloor(floor, r*per+i)
				if err != nil {
					b.Fatal(err)
				}
				flo = append(flo, d)
				if i%5 == 0 {
					d, err := oneShot(script)
					if err != nil {
						b.Fatal(err)
					}
					one = append(one, d)
				}
			}
			run, min = append(run, rr...), append(min, mm...)
			ratios = append(ratios, us(rr.pct(0.5))/us(mm.pct(0.5)))
		}
	}
	b.StopTimer()
	lo, hi := spread(ratios)
	b.ReportMetric(us(run.pct(0.5)), "runner-p50-µs")
	b.ReportMetric(us(run.pct(0.9)), "runner-p90-µs")
	b.ReportMetric(us(run.pct(0.99)), "runner-p99-µs")
	b.ReportMetric(us(min.pct(0.5)), "minimal-p50-µs")
	b.ReportMetric(us(flo.pct(0.5)), "ptyfloor-p50-µs")
	b.ReportMetric(us(one.pct(0.5)), "oneshot-p50-µs")
	b.ReportMetric(medianF(ratios), "x-minimal")
	b.ReportMetric(us(one.pct(0.5))/us(run.pct(0.5)), "faster-than-oneshot")
	report("round trip, interleaved (secondary; both sides alive) (µs)   p50      p90      p99")
	report("runner       %8.0f %8.0f %8.0f", us(run.pct(.5)), us(run.pct(.9)), us(run.pct(.99)))
	report("minimal loop %8.0f %8.0f %8.0f", us(min.pct(.5)), us(min.pct(.9)), us(min.pct(.99)))
	report("PTY floor    %8.0f %8.0f %8.0f", us(flo.pct(.5)), us(flo.pct(.9)), us(flo.pct(.99)))
	report("one-shot     %8.0f %8.0f %8.0f", us(one.pct(.5)), us(one.pct(.9)), us(one.pct(.99)))
	report("interleaved runner / minimal loop: median of %d round ratios %.2f (p10 %.2f, p90 %.2f); one-shot / runner %.1f×",
		len(ratios), medianF(ratios), lo, hi, us(one.pct(0.5))/us(run.pct(0.5)))
}

// BenchmarkThroughput: a batch of commands queued at once, drained.
func BenchmarkThroughput(b *testing.B) {
	rounds, batch := pick(2, 12), pick(20, 300)
	rd := benchDir(b)
	startRunner(b, rd)
	rc := newClient(b, rd)
	md := benchDir(b)
	ml, _ := startMinimalLoop(md, true)
	defer ml.close()
	mc := newClient(b, md)
	nd := benchDir(b)
	nl, _ := startMinimalLoop(nd, false)
	defer nl.close()
	nc := newClient(b, nd)
	drain := func(c *client) float64 {
		names := make([]string, batch)
		t0 := time.Now()
		for i := range names {
			names[i] = c.submit(b, "puts hi")
		}
		c.wait(b, names...)
		return float64(batch) / time.Since(t0).Seconds()
	}
	drain(rc)
	drain(mc)
	var rr, mm, nn, ratios []float64
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		for r := 0; r < rounds; r++ {
			x, y, z := drain(rc), drain(mc), drain(nc)
			rr, mm, nn = append(rr, x), append(mm, y), append(nn, z)
			ratios = append(ratios, x/y)
		}
	}
	b.StopTimer()
	lo, hi := spread(ratios)
	b.ReportMetric(medianF(rr), "runner-cmd/s")
	b.ReportMetric(medianF(mm), "minimal-cmd/s")
	b.ReportMetric(medianF(nn), "minimal-nosync-cmd/s")
	b.ReportMetric(medianF(ratios), "x-minimal")
	report("throughput, %d queued at once: runner %.0f/s, minimal loop %.0f/s (no fsync: %.0f/s); ratio %.2f (p10 %.2f, p90 %.2f)",
		batch, medianF(rr), medianF(mm), medianF(nn), medianF(ratios), lo, hi)
}

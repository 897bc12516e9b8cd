package bench

import (
	"fmt"
	"testing"
	"time"
)

// outputPayload prints mib MiB in 1 KiB lines (1023 bytes + newline).
func outputPayload(mib int) string {
	return fmt.Sprintf("set l [string repeat x 1023]\nfor {set i 0} {$i < %d} {incr i} { puts $l }", mib*1024)
}

// BenchmarkOutput: a command printing a large output, runner vs a bare PTY
// read loop over tclsh printing the same.
func BenchmarkOutput(b *testing.B) {
	mib, rounds := pick(8, 200), pick(1, 3)
	rd := benchDir(b)
	startRunner(b, rd)
	rc := newClient(b, rd)
	var rr, ff, ratios []float64
	for n := 0; n < b.N; n++ {
		for r := 0; r < rounds; r++ {
			d := rc.roundTrip(b, outputPayload(mib))
			x := float64(mib) / d.Seconds()
			floor, err := startPTYTool()
			if err != nil {
				b.Fatal(err)
			}
			t0 := time.Now()
			got, err := floor.run(outputPayload(mib)+"\nputs OUTDONE\n", []byte("OUTDONE\r"))
			y := float64(mib) / time.Since(t0).Seconds()
			floor.close()
			if err != nil || got < mib<<20 {
				b.Fatalf("floor read %d bytes: %v", got, err)
			}
			rr, ff, ratios = append(rr, x), append(ff, y), append(ratios, x/y)
		}
	}
	b.ReportMetric(medianF(rr), "runner-MiB/s")
	b.ReportMetric(medianF(ff), "ptyloop-MiB/s")
	b.ReportMetric(medianF(ratios), "x-ptyloop")
	report("output, %d MiB in 1 KiB lines: runner %.1f MiB/s, bare PTY loop %.1f MiB/s, ratio %.2f", mib, medianF(rr), medianF(ff), medianF(ratios))
}

// BenchmarkOutputRSS: the runner's peak RSS after a small and a huge output.
func BenchmarkOutputRSS(b *testing.B) {
	sizes := []int{10, 1024}
	if smoke {
		sizes = []int{1, 16}
	}
	var peaks []int64
	for n := 0; n < b.N; n++ {
		peaks = peaks[:0]
		for _, mib := range sizes {
			rd := benchDir(b)
			p := startRunner(b, rd)
			rc := newClient(b, rd)
			rc.roundTrip(b, outputPayload(mib))
			peaks = append(peaks, procStatus(p.Pid(), "VmHWM"))
			p.End()
		}
	}
	b.ReportMetric(float64(peaks[0])/1024, "rss-small-MiB")
	b.ReportMetric(float64(peaks[1])/1024, "rss-huge-MiB")
	report("runner peak RSS: %.1f MiB after %d MiB of output, %.1f MiB after %d MiB", float64(peaks[0])/1024, sizes[0], float64(peaks[1])/1024, sizes[1])
}

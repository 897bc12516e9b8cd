package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
)

// The benchmarks in this file compare the runner with a reference where
// each side runs ALONE: its own process, started for the round and stopped
// (after it is idle: a graceful stop waits for pending commits and syncs)
// before the other side's round begins. Deferred work of one side (the
// runner's syncer, spare-file refills, the committer) can therefore never
// land inside the other side's measurements. Rounds alternate which side
// goes first.

// aloneSide is one side of an alone comparison: a process serving a queue
// directory.
type aloneSide struct {
	name string
	// start launches the side on dir; the returned stop ends it once it is
	// idle and returns only after the process has exited.
	start func(b testing.TB, dir string) (stop func())
	// outputFile: results come with output/<name>.out, read back too.
	outputFile bool
}

var runnerSide = aloneSide{name: "runner", outputFile: true, start: func(b testing.TB, dir string) func() {
	p := startRunner(b, dir)
	return func() {
		// Graceful: the runner finishes its commits and its last sync round.
		os.WriteFile(filepath.Join(dir, protocol.FileStop), []byte(`{"mode":"graceful"}`), 0o600)
		p.Wait()
	}
}}

var minimalSide = aloneSide{name: "minimal loop", start: func(b testing.TB, dir string) func() {
	os.MkdirAll(filepath.Join(dir, "queue"), 0o700)
	cmd := exec.Command(minloopBin, "--dir", dir)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dir, "ready")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			b.Fatal("minimal loop did not start")
		}
	}
	return func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}
}}

// roundTripRead is one round trip with the result (and the output file,
// where the side writes one) read back, as a master does.
func (c *client) roundTripRead(b testing.TB, payload string, output bool) time.Duration {
	t0 := time.Now()
	name := c.submit(b, payload)
	c.wait(b, name)
	if _, err := os.ReadFile(filepath.Join(c.dir, protocol.DirResult, name)); err != nil {
		b.Fatal(err)
	}
	if output {
		if _, err := os.ReadFile(filepath.Join(c.dir, protocol.DirOutput, protocol.OutputName(name))); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(t0)
}

// aloneRounds runs measure for each side alone, alternating the order
// every round, and returns each side's samples per round.
func aloneRounds[T any](b *testing.B, rounds int, sides []aloneSide, measure func(s aloneSide, c *client) T) [][]T {
	out := make([][]T, len(sides))
	for r := 0; r < rounds; r++ {
		for k := range sides {
			i := k
			if r%2 == 1 {
				i = len(sides) - 1 - k
			}
			s := sides[i]
			dir := benchDir(b)
			stop := s.start(b, dir)
			c := newClient(b, dir)
			out[i] = append(out[i], measure(s, c))
			stop()
		}
	}
	return out
}

// BenchmarkRoundTripAlone: enqueue → result (and output) read back, `puts
// hi`, the runner and the minimal loop each alone: rounds of 200 round
// trips after 50 warm-ups.
func BenchmarkRoundTripAlone(b *testing.B) {
	rounds, warm, per := pick(2, 7), pick(5, 50), pick(20, 200)
	sides := []aloneSide{runnerSide, minimalSide}
	var got [][]sample
	for n := 0; n < b.N; n++ {
		got = aloneRounds(b, rounds, sides, func(s aloneSide, c *client) sample {
			for i := 0; i < warm; i++ {
				c.roundTripRead(b, "puts hi", s.outputFile)
			}
			var x sample
			for i := 0; i < per; i++ {
				x = append(x, c.roundTripRead(b, "puts hi", s.outputFile))
			}
			return x
		})
	}
	var all [2]sample
	var ratios []float64
	for r := range got[0] {
		all[0], all[1] = append(all[0], got[0][r]...), append(all[1], got[1][r]...)
		ratios = append(ratios, us(got[0][r].pct(.5))/us(got[1][r].pct(.5)))
	}
	lo, hi := spread(ratios)
	run, min := all[0], all[1]
	for _, p := range []struct {
		name string
		q    float64
	}{{"p50", .5}, {"p90", .9}, {"p99", .99}} {
		b.ReportMetric(us(run.pct(p.q)), "runner-"+p.name+"-µs")
		b.ReportMetric(us(min.pct(p.q)), "minimal-"+p.name+"-µs")
		b.ReportMetric(us(run.pct(p.q))/us(min.pct(p.q)), "x-minimal-"+p.name)
	}
	report("round trip, each side alone (%d rounds × %d after %d warm-ups), µs:  p50      p90      p99", rounds, per, warm)
	report("runner        %8.0f %8.0f %8.0f", us(run.pct(.5)), us(run.pct(.9)), us(run.pct(.99)))
	report("minimal loop  %8.0f %8.0f %8.0f", us(min.pct(.5)), us(min.pct(.9)), us(min.pct(.99)))
	report("ratio         %8.2f %8.2f %8.2f   (per-round p50 ratios: median %.2f, p10 %.2f, p90 %.2f)",
		us(run.pct(.5))/us(min.pct(.5)), us(run.pct(.9))/us(min.pct(.9)), us(run.pct(.99))/us(min.pct(.99)), medianF(ratios), lo, hi)
}

// BenchmarkThroughputAlone: 300 commands queued at once and drained, each
// side alone.
func BenchmarkThroughputAlone(b *testing.B) {
	rounds, batch := pick(2, 7), pick(20, 300)
	sides := []aloneSide{runnerSide, minimalSide}
	var got [][]float64
	for n := 0; n < b.N; n++ {
		got = aloneRounds(b, rounds, sides, func(s aloneSide, c *client) float64 {
			for i := 0; i < 20; i++ {
				c.roundTripRead(b, "puts hi", s.outputFile)
			}
			names := make([]string, batch)
			t0 := time.Now()
			for i := range names {
				names[i] = c.submit(b, "puts hi")
			}
			c.wait(b, names...)
			return float64(batch) / time.Since(t0).Seconds()
		})
	}
	var ratios []float64
	for r := range got[0] {
		ratios = append(ratios, got[0][r]/got[1][r])
	}
	lo, hi := spread(ratios)
	b.ReportMetric(medianF(got[0]), "runner-cmd/s")
	b.ReportMetric(medianF(got[1]), "minimal-cmd/s")
	b.ReportMetric(medianF(ratios), "x-minimal")
	report("throughput, %d queued at once, each side alone: runner %.0f/s, minimal loop %.0f/s; ratio %.2f (p10 %.2f, p90 %.2f)",
		batch, medianF(got[0]), medianF(got[1]), medianF(ratios), lo, hi)
}

// BenchmarkOutputAlone: a command printing a large output; the runner
// alone, then tclsh printing the same on a bare PTY read loop alone.
func BenchmarkOutputAlone(b *testing.B) {
	mib, rounds := pick(8, 200), pick(1, 5)
	bare := aloneSide{name: "bare PTY loop", start: func(b testing.TB, dir string) func() { return func() {} }}
	sides := []aloneSide{runnerSide, bare}
	var got [][]float64
	for n := 0; n < b.N; n++ {
		got = aloneRounds(b, rounds, sides, func(s aloneSide, c *client) float64 {
			if s.name == "runner" {
				d := c.roundTripRead(b, outputPayload(mib), false)
				return float64(mib) / d.Seconds()
			}
			floor, err := startPTYTool()
			if err != nil {
				b.Fatal(err)
			}
			defer floor.close()
			t0 := time.Now()
			read, err := floor.run(outputPayload(mib)+"\nputs OUTDONE\n", []byte("OUTDONE\r"))
			if err != nil || read < mib<<20 {
				b.Fatalf("bare loop read %d bytes: %v", read, err)
			}
			return float64(mib) / time.Since(t0).Seconds()
		})
	}
	var ratios []float64
	for r := range got[0] {
		ratios = append(ratios, got[0][r]/got[1][r])
	}
	b.ReportMetric(medianF(got[0]), "runner-MiB/s")
	b.ReportMetric(medianF(got[1]), "ptyloop-MiB/s")
	b.ReportMetric(medianF(ratios), "x-ptyloop")
	report("output, %d MiB in 1 KiB lines, each side alone: runner %.1f MiB/s, bare PTY loop %.1f MiB/s, ratio %.2f",
		mib, medianF(got[0]), medianF(got[1]), medianF(ratios))
}

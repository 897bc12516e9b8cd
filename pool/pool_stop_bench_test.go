package pool

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/launch"
)

// benchPoolSize is SP_BENCH_POOL_SIZE, 128 by default.
func benchPoolSize() int {
	if v, err := strconv.Atoi(os.Getenv("SP_BENCH_POOL_SIZE")); err == nil && v > 0 {
		return v
	}
	return 128
}

// BenchmarkPoolStop times Pool.Stop (what `master pool stop` runs) on a
// pool of SP_BENCH_POOL_SIZE (default 128) local sessions that all serve:
// stop requests, the runners' exits, the launcher seeing every job gone.
// Each iteration starts a fresh pool (not timed).
//
//	go test -run '^$' -bench PoolStop -benchtime 3x ./pool/
func BenchmarkPoolStop(b *testing.B) {
	needTool(&testing.T{}, "tclsh")
	size := benchPoolSize()
	var total time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		dir := filepath.Join(b.TempDir(), "pool")
		c, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		p, launches, err := Start(c, dir, Options{Size: size, Via: "local", RunnerArgs: []string{"--heartbeat", "250ms"}})
		if err != nil {
			cancel()
			b.Fatal(err)
		}
		for _, l := range launches {
			if l.Err != nil {
				b.Fatalf("%s: %v", l.Session, l.Err)
			}
		}
		time.Sleep(time.Second) // Let the start's load settle.
		b.StartTimer()
		t0 := time.Now()
		stops, err := p.Stop(c, launch.StopOptions{})
		d := time.Since(t0)
		b.StopTimer()
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		for _, s := range stops {
			if s.Report.Step != launch.StepStopRequest {
				b.Fatalf("%s: step %s (%s)", s.Session, s.Report.Step, s.Report.Message)
			}
		}
		total += d
		b.Logf("pool stop N=%d: %v", size, d.Round(time.Millisecond))
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/stop")
}

package bench

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/launch"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/pool"
)

// needSlurm skips a benchmark when no Slurm answers here.
func needSlurm(b *testing.B) {
	if err := exec.Command("sinfo", "-h").Run(); err != nil {
		b.Skip("Slurm is not running here: start it with scripts/slurm-up.sh (root; packages slurm-wlm, munge)")
	}
}

// BenchmarkSlurmLaunch: submit to serving on the local single-node Slurm,
// for one session and for a pool of 4 launched at once. Each launch is
// stopped (stop request) before the next.
func BenchmarkSlurmLaunch(b *testing.B) {
	needSlurm(b)
	ctx := context.Background()
	n := pick(2, 10)
	var one, local, pool4 []time.Duration
	for i := 0; i < b.N; i++ {
		for j := 0; j < n; j++ {
			for _, via := range []string{"slurm", "local"} { // local: the runner's and tool's own start, for reference
				dir := filepath.Join(benchDir(b), "s")
				res, err := launch.Launch(ctx, dir, launch.Options{Via: via, Runner: runnerBin})
				if err != nil {
					b.Fatal(err)
				}
				if via == "slurm" {
					one = append(one, res.Elapsed)
				} else {
					local = append(local, res.Elapsed)
				}
				if _, err := launch.StopLaunched(ctx, dir, launch.StopOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		}
		for j := 0; j < pick(1, 3); j++ {
			dir := filepath.Join(benchDir(b), "pool")
			t0 := time.Now()
			p, _, err := pool.Start(ctx, dir, pool.Options{Size: 4, Via: "slurm", Runner: runnerBin})
			if err != nil {
				b.Fatal(err)
			}
			pool4 = append(pool4, time.Since(t0))
			if _, err := p.Stop(ctx, launch.StopOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	}
	sort.Slice(one, func(i, j int) bool { return one[i] < one[j] })
	sort.Slice(local, func(i, j int) bool { return local[i] < local[j] })
	sort.Slice(pool4, func(i, j int) bool { return pool4[i] < pool4[j] })
	b.ReportMetric(ms(one[len(one)/2]), "launch-p50-ms")
	b.ReportMetric(ms(one[len(one)-1]), "launch-max-ms")
	b.ReportMetric(ms(pool4[len(pool4)/2]), "pool4-p50-ms")
	b.ReportMetric(ms(local[len(local)/2]), "local-p50-ms")
	report("Slurm launch, submit to serving: p50 %.0f ms, min %.0f, max %.0f (%d launches); pool of 4: p50 %.0f ms, max %.0f",
		ms(one[len(one)/2]), ms(one[0]), ms(one[len(one)-1]), len(one), ms(pool4[len(pool4)/2]), ms(pool4[len(pool4)-1]))
	report("local launch (runner and tclsh start, no scheduler): p50 %.0f ms, max %.0f", ms(local[len(local)/2]), ms(local[len(local)-1]))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// burn is a CPU-bound Tcl payload: about 0.1 s of one core for tclsh 8.6
// on this machine (the figure is measured and printed with the results).
const burn = `proc burn {n} {set s 0; for {set i 0} {$i < $n} {incr i} {incr s $i}; return $s}; burn 1000000`

// BenchmarkPoolThroughput: commands per second of a pool of 1, 2 and 4
// sessions (runners launched locally: the scheduler plays no part once the
// runners serve) for the CPU-bound payload, in alternating rounds, and the
// scaling efficiency tput(k) / (k x tput(1)).
func BenchmarkPoolThroughput(b *testing.B) {
	ctx := context.Background()
	sizes := []int{1, 2, 4}
	pools := map[int]*pool.Pool{}
	for _, k := range sizes {
		p, _, err := pool.Start(ctx, filepath.Join(benchDir(b), "pool"), pool.Options{Size: k, Via: "local", Runner: runnerBin,
			RunnerArgs: []string{"--log-level", "warn"}})
		if err != nil {
			b.Fatal(err)
		}
		defer p.Stop(ctx, launch.StopOptions{})
		pools[k] = p
	}
	n := pick(8, 80)
	tput := map[int][]float64{}
	var cmdMS []float64
	for i := 0; i < b.N; i++ {
		for round := 0; round < pick(1, 3); round++ {
			for _, k := range sizes {
				p := pools[k]
				t0 := time.Now()
				var pcs []*pool.Command
				for j := 0; j < n; j++ {
					pc, err := p.Submit(ctx, burn, pool.SubmitOptions{})
					if err != nil {
						b.Fatal(err)
					}
					pcs = append(pcs, pc)
				}
				for _, pc := range pcs {
					r, err := pc.Wait(ctx)
					if err != nil {
						b.Fatal(err)
					}
					if k == 1 {
						cmdMS = append(cmdMS, float64(r.Stats.DurationMS))
					}
				}
				tput[k] = append(tput[k], float64(n)/time.Since(t0).Seconds())
			}
		}
	}
	base := medianF(tput[1])
	for _, k := range sizes {
		t := medianF(tput[k])
		b.ReportMetric(t, fmt.Sprintf("pool%d-cmd/s", k))
		b.ReportMetric(t/(float64(k)*base), fmt.Sprintf("pool%d-efficiency", k))
		report("pool of %d: %.1f cmd/s, efficiency %.2f (speed-up %.2f)", k, t, t/(float64(k)*base), t/base)
	}
	report("one command alone: %.0f ms of tclsh (median duration in the pool of 1)", medianF(cmdMS))
}

// BenchmarkPoolSubmitOverhead: Pool.Submit (read every session's state,
// heartbeat, queue and inflight, touch the clock file, pick, then submit)
// against Session.Submit on one session, in alternating rounds, with a
// pool of 4 live sessions running the commands.
func BenchmarkPoolSubmitOverhead(b *testing.B) {
	ctx := context.Background()
	p, _, err := pool.Start(ctx, filepath.Join(benchDir(b), "pool"), pool.Options{Size: 4, Via: "local", Runner: runnerBin,
		RunnerArgs: []string{"--log-level", "warn"}})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Stop(ctx, launch.StopOptions{})
	s, err := master.Open(filepath.Join(p.Dir(), "s00"))
	if err != nil {
		b.Fatal(err)
	}
	n := pick(50, 500)
	var direct, pooled []float64
	for i := 0; i < b.N; i++ {
		for round := 0; round < pick(2, 6); round++ {
			t0 := time.Now()
			for j := 0; j < n; j++ {
				if _, err := s.Submit(ctx, "expr 1", master.SubmitOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			direct = append(direct, us(time.Since(t0)/time.Duration(n)))
			t0 = time.Now()
			for j := 0; j < n; j++ {
				if _, err := p.Submit(ctx, "expr 1", pool.SubmitOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			pooled = append(pooled, us(time.Since(t0)/time.Duration(n)))
		}
	}
	d, q := medianF(direct), medianF(pooled)
	b.ReportMetric(d, "direct-µs/submit")
	b.ReportMetric(q, "pool-µs/submit")
	b.ReportMetric(q/d, "x-direct")
	report("submit: direct %.0f µs, pool of 4 %.0f µs (x%.1f, +%.0f µs to choose the session)", d, q, q/d, q-d)
}

package bench

// Where users wait on the master's side. Whole
// processes timed pair by pair (the two sides of a ratio alternate, so a
// burst of load on this shared machine hits both), medians reported.

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gofrs/flock"
	"github.com/skillpilot/skillpilot/launch"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/pool"
	"github.com/skillpilot/skillpilot/protocol"
	"golang.org/x/sys/unix"
)

// timeExec runs argv and returns its wall time; it fails b unless the
// exit status is 0 and stdout is want (when want is not "").
func timeExec(b testing.TB, want string, argv ...string) time.Duration {
	d, _ := timeExecFaults(b, want, argv...)
	return d
}

// timeExecFaults is timeExec that also returns the process's minor page
// faults (getrusage): a count that hardly moves with the machine's load,
// where its time does, and that a start which pages in or allocates
// less shows at once.
func timeExecFaults(b testing.TB, want string, argv ...string) (time.Duration, int64) {
	b.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	t0 := time.Now()
	out, err := cmd.Output()
	d := time.Since(t0)
	if err != nil || want != "" && string(out) != want {
		b.Fatalf("%s: %q %v", strings.Join(argv, " "), out, err)
	}
	var faults int64
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		faults = ru.Minflt
	}
	return d, faults
}

// pairs runs a and b alternately n times after warm rounds and returns
// both samples in ms.
func pairs(n, warm int, a, b func() time.Duration) (xs, ys []float64) {
	for i := 0; i < warm+n; i++ {
		da, db := a(), b()
		if i >= warm {
			xs, ys = append(xs, ms(da)), append(ys, ms(db))
		}
	}
	return xs, ys
}

// BenchmarkCLIStart (issue 24 goal 3, issue 44 goal 3): whole processes,
// every side once per round in an order shuffled anew each round (so a
// burst of load hits each side alike, and no side always follows the
// same one), medians of n rounds after 3 warm ones, each figure beside
// the one it is held to. After each submit the runner is left alone for
// settleAfterSubmit: it finishes a command's files (the lagging outputs'
// fsync, the event log's) about 20 ms after the result, and that work
// fell on whichever side came next. With the order turning by one, the
// same side always came two or three after a submit, and a build
// measured against itself (SP_BENCH_BEFORE_DIR holding the same master)
// came out 0.3-1.2 ms slower on its "before" side (docs/benchmarks-log.md,
// "Issue 44, third pass").
//
//   - `master --version` (the lean master, as make build ships it) against a
//     Go hello-world (goal: within 1 ms);
//   - `master submit --wait 'puts hi'` against a one-shot `tclsh hi.tcl`
//     (goal: at most 1.3×, 1.0× wished for);
//   - `runner --version` against the hello-world (goal: within 3 ms);
//   - the minimal submitter (test/bench/minsub: the protocol and nothing
//     else) against the same runner, the floor under `submit --wait`;
//   - the full master (go install ./cmd/master) for comparison, and, with
//     SP_BENCH_BEFORE_DIR=DIR holding another build's master and runner
//     (the previous release's), the same figures of that build.
func BenchmarkCLIStart(b *testing.B) {
	dir := filepath.Join(benchDir(b), "s")
	startRunner(b, dir)
	script := filepath.Join(benchDir(b), "hi.tcl")
	os.WriteFile(script, []byte("puts hi\n"), 0o600)
	type side struct {
		name string
		argv []string
		want string
	}
	submits := func(s side) bool { return slices.Contains(s.argv, "submit") || s.argv[0] == minsubBin }
	sides := []side{
		{"hello-world", []string{helloBin}, "hello, world\n"},
		{"master --version", []string{leanMasterBin, "--version"}, ""},
		{"master --version (full)", []string{masterBin, "--version"}, ""},
		{"runner --version", []string{runnerBin, "--version"}, ""},
		{"tclsh hi.tcl", []string{"tclsh", script}, "hi\n"},
		{"master submit --wait", []string{leanMasterBin, "submit", "--session", dir, "--wait", "puts hi"}, "hi\n"},
		{"minimal submitter", []string{minsubBin, dir, "puts hi"}, "hi\n"},
	}
	if d := os.Getenv("SP_BENCH_BEFORE_DIR"); d != "" {
		sides = append(sides,
			side{"before: master --version", []string{filepath.Join(d, "master"), "--version"}, ""},
			side{"before: runner --version", []string{filepath.Join(d, "runner"), "--version"}, ""},
			side{"before: master submit --wait", []string{filepath.Join(d, "master"), "submit", "--session", dir, "--wait", "puts hi"}, "hi\n"})
	}
	for _, s := range sides {
		evict(b, s.argv[0])
	}
	n := pick(5, 40)
	got, faults := make([][]float64, len(sides)), make([][]float64, len(sides))
	rng := rand.New(rand.NewPCG(44, 3)) // The same orders every run.
	for i := 0; i < b.N; i++ {
		for r := 0; r < n+3; r++ {
			for _, j := range rng.Perm(len(sides)) {
				d, pf := timeExecFaults(b, sides[j].want, sides[j].argv...)
				if r >= 3 {
					got[j] = append(got[j], ms(d))
					faults[j] = append(faults[j], float64(pf))
				}
				if submits(sides[j]) {
					time.Sleep(settleAfterSubmit)
				}
			}
		}
	}
	med := func(name string) float64 {
		for j, s := range sides {
			if s.name == name {
				return medianF(got[j])
			}
		}
		return 0
	}
	report("process start, median of %d rounds (every side once a round, in a shuffled order), ms and minor page faults:", n)
	for j, s := range sides {
		lo, hi := spread(got[j])
		report("  %-30s %7.2f   (p10 %.2f, p90 %.2f)   %4.0f page faults", s.name, medianF(got[j]), lo, hi, medianF(faults[j]))
	}
	hello, tcl := med("hello-world"), med("tclsh hi.tcl")
	report("master --version − hello-world: %+.2f ms (goal: ≤ 1); runner --version − hello-world: %+.2f ms (goal: ≤ 3); "+
		"master submit --wait / tclsh hi.tcl: %.2f× (goal: ≤ 1.3)",
		med("master --version")-hello, med("runner --version")-hello, med("master submit --wait")/tcl)
	b.ReportMetric(med("master --version")-hello, "master-version-minus-hello-ms")
	b.ReportMetric(med("runner --version")-hello, "runner-version-minus-hello-ms")
	b.ReportMetric(med("master submit --wait")/tcl, "x-tclsh")
	report("the floor: the minimal submitter (test/bench/minsub) / tclsh hi.tcl: %.2f×; master submit --wait / the minimal submitter: %.2f×",
		med("minimal submitter")/tcl, med("master submit --wait")/med("minimal submitter"))
	b.ReportMetric(med("minimal submitter")/tcl, "x-tclsh-minimal-submitter")
	if d := os.Getenv("SP_BENCH_BEFORE_DIR"); d != "" {
		report("before (%s): master --version − hello-world %+.2f ms, runner --version − hello-world %+.2f ms, master submit --wait / tclsh %.2f×",
			d, med("before: master --version")-hello, med("before: runner --version")-hello, med("before: master submit --wait")/tcl)
		// The pair in each round, after over before: steadier than two
		// medians taken apart when the machine's speed drifts.
		ratio := func(after, before string) float64 {
			var a, b []float64
			for j, s := range sides {
				switch s.name {
				case after:
					a = got[j]
				case before:
					b = got[j]
				}
			}
			rs := make([]float64, len(a))
			for i := range a {
				rs[i] = a[i] / b[i]
			}
			return medianF(rs)
		}
		r := ratio("master submit --wait", "before: master submit --wait")
		report("after / before, median of the rounds' ratios: master --version %.3f, runner --version %.3f, master submit --wait %.3f",
			ratio("master --version", "before: master --version"), ratio("runner --version", "before: runner --version"), r)
		b.ReportMetric(r, "x-before-submit-wait")
	}
}

// evict drops the page cache's copy of the program file (after writing
// it back, if the linker's pages are still dirty), so that every side
// starts from a binary read back from the disk alike. A binary just
// written by the linker started 0.4-0.5 ms slower than the same bytes
// read from the disk (fewer pages mapped per fault, it seems): a build
// measured against itself came out slower on the side built last
// (docs/benchmarks-log.md, "Issue 44, third pass").
func evict(b *testing.B, prog string) {
	b.Helper()
	path, err := exec.LookPath(prog)
	if err != nil {
		b.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		b.Fatal(err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		b.Fatal(err)
	}
}

// settleAfterSubmit is how long BenchmarkCLIStart leaves the runner alone
// after a submit: the ~20 ms it takes to finish the command's files, and
// as much again.
const settleAfterSubmit = 50 * time.Millisecond

// BenchmarkStatus (goal 2): `master status` on a local session, whole
// process.
func BenchmarkStatus(b *testing.B) {
	dir := filepath.Join(benchDir(b), "s")
	startRunner(b, dir)
	n := pick(5, 20)
	for i := 0; i < b.N; i++ {
		var xs []float64
		for j := 0; j < n; j++ {
			xs = append(xs, ms(timeExec(b, "", masterBin, "status", "--session", dir)))
		}
		sort.Float64s(xs)
		b.ReportMetric(medianF(xs), "ms/status")
		report("master status, local session: median %.1f ms of %d (min %.1f, max %.1f)", medianF(xs), n, xs[0], xs[len(xs)-1])
	}
}

// BenchmarkPoolCLI (goal 1): in a pool of SP_BENCH_POOL_SIZE (64) local
// sessions, `master pool submit [--wait]` against `master submit [--wait]`
// straight to one of its sessions, pair by pair.
func BenchmarkPoolCLI(b *testing.B) {
	ctx := context.Background()
	size := pick(4, 64)
	if s := os.Getenv("SP_BENCH_POOL_SIZE"); s != "" {
		fmt.Sscan(s, &size)
	}
	p, _, err := pool.Start(ctx, filepath.Join(benchDir(b), "pool"), pool.Options{Size: size, Via: "local", Runner: runnerBin,
		RunnerArgs: []string{"--log-level", "warn"}, ReadyTimeout: 5 * time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Stop(ctx, launch.StopOptions{})
	one := filepath.Join(p.Dir(), pool.SessionName(min(5, size-1), size))
	n := pick(5, 30)
	for i := 0; i < b.N; i++ {
		direct, pooled := pairs(n, 3,
			func() time.Duration {
				return timeExec(b, "hi\n", masterBin, "submit", "--session", one, "--wait", "puts hi")
			},
			func() time.Duration {
				return timeExec(b, "hi\n", masterBin, "pool", "submit", "--pool", p.Dir(), "--wait", "puts hi")
			})
		d, q := medianF(direct), medianF(pooled)
		b.ReportMetric(q/d, "x-direct-wait")
		report("pool of %d, --wait: direct %.2f ms, pool %.2f ms (%.2f×)", size, d, q, q/d)
		direct, pooled = pairs(n, 3,
			func() time.Duration { return timeExec(b, "", masterBin, "submit", "--session", one, "expr 1") },
			func() time.Duration { return timeExec(b, "", masterBin, "pool", "submit", "--pool", p.Dir(), "expr 1") })
		d, q = medianF(direct), medianF(pooled)
		b.ReportMetric(q/d, "x-direct-submit")
		report("pool of %d, no wait: direct %.2f ms, pool %.2f ms (%.2f×)", size, d, q, q/d)
	}
}

// fakePool makes a pool of n sessions without runners that every master
// takes for idle and alive: state and heartbeat files (interval_ms 1 h, so
// they stay fresh) and runner.lock held by this process. It returns the
// pool's directory.
func fakePool(b testing.TB, n int) string {
	b.Helper()
	dir := filepath.Join(benchDir(b), "pool")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		b.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, pool.FilePool), []byte(`{"protocol_version":1,"size":1,"via":"local"}`), 0o600)
	for i := 0; i < n; i++ {
		name := pool.SessionName(i, n)
		sd := filepath.Join(dir, name)
		for _, d := range protocol.Dirs {
			if err := os.MkdirAll(filepath.Join(sd, d), 0o700); err != nil {
				b.Fatal(err)
			}
		}
		st, _ := json.Marshal(protocol.State{ProtocolVersion: 1, Phase: protocol.PhaseIdle, SessionID: "session_" + name, Hostname: "h", Kind: protocol.KindTcl})
		hb, _ := json.Marshal(protocol.Heartbeat{ProtocolVersion: 1, Counter: 1, IntervalMS: 3600000, Phase: protocol.PhaseIdle, SessionID: "session_" + name})
		os.WriteFile(filepath.Join(sd, protocol.FileState), st, 0o600)
		os.WriteFile(filepath.Join(sd, protocol.FileHeartbeat), hb, 0o600)
		l := flock.New(filepath.Join(sd, protocol.FileLock))
		if ok, err := l.TryLock(); !ok || err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { l.Unlock() })
	}
	return dir
}

// BenchmarkPoolChoose (goal 1): the cost of choosing a session, as
// Pool.Submit minus Session.Submit in alternating rounds, in pools of 4, 64
// and 256 sessions without runners (every session idle and alive; nothing
// drains the queues), and the balance reached: after k commands per
// session, the fullest queue against the mean (1.00 is perfect).
func BenchmarkPoolChoose(b *testing.B) {
	ctx := context.Background()
	for _, size := range []int{4, 64, 256} {
		b.Run(fmt.Sprintf("sessions=%d", size), func(b *testing.B) {
			dir := fakePool(b, size)
			p, err := pool.Open(dir)
			if err != nil {
				b.Fatal(err)
			}
			s, err := master.Open(filepath.Join(fakePool(b, 1), "s00")) // A session of its own: its queue is not the pool's.
			if err != nil {
				b.Fatal(err)
			}
			per := pick(2, 16)
			n := per * size
			var direct, pooled []float64
			for i := 0; i < b.N; i++ {
				for round := 0; round < 4; round++ {
					m := n / 4
					t0 := time.Now()
					for j := 0; j < m; j++ {
						if _, err := s.Submit(ctx, "expr 1", master.SubmitOptions{}); err != nil {
							b.Fatal(err)
						}
					}
					direct = append(direct, us(time.Since(t0)/time.Duration(m)))
					t0 = time.Now()
					for j := 0; j < m; j++ {
						if _, err := p.Submit(ctx, "expr 1", pool.SubmitOptions{}); err != nil {
							b.Fatal(err)
						}
					}
					pooled = append(pooled, us(time.Since(t0)/time.Duration(m)))
				}
			}
			loads := make([]float64, 0, size)
			for _, name := range p.SessionNames() {
				ss, _ := master.Open(filepath.Join(dir, name))
				q, err := ss.QueueDepth()
				if err != nil {
					b.Fatal(err)
				}
				loads = append(loads, float64(q))
			}
			sort.Float64s(loads)
			mean := 0.0
			for _, l := range loads {
				mean += l / float64(len(loads))
			}
			d, q := medianF(direct), medianF(pooled)
			b.ReportMetric(q-d, "µs-to-choose")
			b.ReportMetric(loads[len(loads)-1]/mean, "max/mean-load")
			report("pool of %3d: Session.Submit %.0f µs, Pool.Submit %.0f µs: %.0f µs to choose; %.0f commands per session: fullest %.0f, emptiest %.0f, mean %.1f (max/mean %.2f)",
				size, d, q, q-d, mean, loads[len(loads)-1], loads[0], mean, loads[len(loads)-1]/mean)
		})
	}
}

// BenchmarkPoolBalance (goal 1): a CPU-bound run in a pool of 4 live
// sessions: n commands of the burn payload submitted at once, then the
// busy time of each session (the sum of its commands' durations) against
// the mean; 1.00 is perfect balance.
func BenchmarkPoolBalance(b *testing.B) {
	ctx := context.Background()
	size := 4
	p, _, err := pool.Start(ctx, filepath.Join(benchDir(b), "pool"), pool.Options{Size: size, Via: "local", Runner: runnerBin,
		RunnerArgs: []string{"--log-level", "warn"}})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Stop(ctx, launch.StopOptions{})
	n := pick(16, 80)
	for i := 0; i < b.N; i++ {
		busy := map[string]float64{}
		count := map[string]int{}
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
			busy[pc.Session] += float64(r.Stats.DurationMS)
			count[pc.Session]++
		}
		wall := time.Since(t0)
		mean, most := 0.0, 0.0
		for _, v := range busy {
			mean += v / float64(size)
			most = max(most, v)
		}
		b.ReportMetric(most/mean, "max/mean-busy")
		counts := make([]float64, 0, len(count))
		for _, k := range count {
			counts = append(counts, float64(k))
		}
		sort.Float64s(counts)
		b.ReportMetric(counts[len(counts)-1]*float64(size)/float64(n), "max/mean-commands")
		busyMS := map[string]int{}
		for k, v := range busy {
			busyMS[k] = int(v)
		}
		report("pool of %d, %d CPU-bound commands: commands per session %v (max/mean %.2f); busy ms per session %v (max/mean %.2f); wall %v",
			size, n, count, counts[len(counts)-1]*float64(size)/float64(n), busyMS, most/mean, wall.Round(time.Millisecond))
	}
}

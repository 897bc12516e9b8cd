package pool

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/launch"
	"github.com/skillpilot/skillpilot/sched"
)

// fakeSlurm plays sbatch --array, squeue, scontrol and scancel by their
// command-line contract (sched.Slurm's command lines, the outputs
// ParseSbatch, ParseSqueue and ParseScontrol read), running each element
// as a local process with SLURM_ARRAY_TASK_ID set. Every command holds
// the fake controller for delay, one command at a time (a model of a busy
// slurmctld answering RPCs from forked clients), and is counted: what a
// pool operation asks of the scheduler is counted, not guessed.
type fakeSlurm struct {
	dir   string
	delay time.Duration
	mu    sync.Mutex
	elems map[string]string // "77_3" -> local job id
	calls map[string]int    // command name -> runs
}

func newFakeSlurm(t testing.TB, delay time.Duration) *fakeSlurm {
	f := &fakeSlurm{dir: t.TempDir(), delay: delay, elems: map[string]string{}, calls: map[string]int{}}
	t.Cleanup(func() {
		for _, lid := range f.elems {
			_ = sched.Local{}.Cancel(context.Background(), nil, lid, true)
		}
	})
	return f
}

func (f *fakeSlurm) exec(ctx context.Context, argv []string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	time.Sleep(f.delay)
	f.calls[argv[0]]++
	arg := func(prefix string) string {
		for _, a := range argv {
			if v, ok := strings.CutPrefix(a, prefix); ok {
				return v
			}
		}
		return ""
	}
	switch argv[0] {
	case "sbatch":
		var first, last int
		if _, err := fmt.Sscanf(arg("--array="), "%d-%d", &first, &last); err != nil {
			return "", fmt.Errorf("fake Slurm: only arrays: %q", argv)
		}
		for i := first; i <= last; i++ {
			wrap := filepath.Join(f.dir, fmt.Sprintf("77_%d.sh", i))
			if err := os.WriteFile(wrap, fmt.Appendf(nil, "SLURM_ARRAY_TASK_ID=%d; export SLURM_ARRAY_TASK_ID\nexec /bin/sh %s\n", i, argv[len(argv)-1]), 0o700); err != nil {
				return "", err
			}
			lid, err := sched.Local{}.Submit(ctx, nil, sched.Submission{Script: wrap, Output: filepath.Join(f.dir, "out"), WorkDir: f.dir})
			if err != nil {
				return "", err
			}
			f.elems[fmt.Sprintf("77_%d", i)] = lid
		}
		return "77\n", nil
	case "squeue": // --array --jobs=77: one line per element, ended ones kept (MinJobAge).
		var b strings.Builder
		for id, lid := range f.elems {
			j, _ := sched.Local{}.Query(ctx, nil, lid)
			fmt.Fprintf(&b, "%s|%s|None|0:01\n", id, map[bool]string{true: "RUNNING", false: "COMPLETED"}[j.State.Active()])
		}
		return b.String(), nil
	case "scontrol":
		return fmt.Sprintf("JobId=%s JobState=COMPLETED ExitCode=0:0\n", argv[len(argv)-1]), nil
	case "scancel":
		id := argv[len(argv)-1]
		for key, lid := range f.elems {
			if key == id || strings.HasPrefix(key, id+"_") {
				_ = sched.Local{}.Cancel(ctx, nil, lid, arg("--signal=") == "KILL")
			}
		}
		return "", nil
	}
	return "", fmt.Errorf("fake Slurm: no %s", argv[0])
}

func (f *fakeSlurm) count(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[name]
}

// slurmPoolStop starts a pool of size as one (fake) Slurm array and stops
// it, returning the stop's duration and the scheduler commands it ran.
func slurmPoolStop(t testing.TB, size int, delay time.Duration) (time.Duration, map[string]int) {
	f := newFakeSlurm(t, delay)
	dir := filepath.Join(t.TempDir(), "pool")
	p, res, err := Start(ctx(t), dir, Options{Size: size, Via: "slurm", Exec: f.exec, RunnerArgs: []string{"--heartbeat", "250ms"}})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Result.Info.ArrayJobID != "77" {
		t.Fatalf("not one array: %+v", res[0].Result.Info)
	}
	f.mu.Lock()
	f.calls = map[string]int{}
	f.mu.Unlock()
	t0 := time.Now()
	stops, err := p.Stop(ctx(t), launch.StopOptions{})
	d := time.Since(t0)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stops {
		if s.Report.Step != launch.StepStopRequest {
			t.Errorf("%s: %+v", s.Session, s.Report)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return d, f.calls
}

// pool stop of a Slurm array waits for its elements to end with squeue
// alone: no scontrol per element (it ran one per ended element: 128 at
// once at N = 128, each an RPC to slurmctld), no scancel when every
// runner stopped on its request.
func TestPoolStopSlurmQueries(t *testing.T) {
	needTool(t, "tclsh")
	_, calls := slurmPoolStop(t, 3, 0)
	if calls["scontrol"] != 0 || calls["scancel"] != 0 || calls["sacct"] != 0 || calls["squeue"] == 0 {
		t.Errorf("pool stop ran %v, want squeue only", calls)
	}
}

// BenchmarkPoolStopSlurm is BenchmarkPoolStop against the fake Slurm,
// every scheduler command costing SP_BENCH_SCHED_DELAY (default 20ms):
// the stop's time and the scheduler commands it ran.
//
//	go test -run '^$' -bench PoolStopSlurm -benchtime 1x ./pool/
func BenchmarkPoolStopSlurm(b *testing.B) {
	needTool(&testing.T{}, "tclsh")
	size := benchPoolSize()
	delay := 20 * time.Millisecond
	if d, err := time.ParseDuration(os.Getenv("SP_BENCH_SCHED_DELAY")); err == nil {
		delay = d
	}
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		d, calls := slurmPoolStop(b, size, delay)
		b.Logf("pool stop N=%d (fake Slurm, %v per command): %v, commands %v", size, delay, d.Round(time.Millisecond), calls)
		b.ReportMetric(float64(d.Milliseconds()), "ms/stop")
		b.ReportMetric(float64(calls["squeue"]+calls["scontrol"]+calls["sacct"]+calls["scancel"]), "cmds/stop")
	}
}

package pool

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/launch"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
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
	// completing: an element whose process ended stays COMPLETING in
	// squeue until it is cancelled (a slow epilog, Slurm's job report).
	completing bool
	cancelled  map[string]bool // element -> cancelled
	cancels    []string        // scancel's job ids, in order
	// lateSqueue: squeue answers only once every element's process has
	// ended (up to a minute), as a loaded slurmctld can answer after
	// runners that stopped at once.
	lateSqueue bool
}

func newFakeSlurm(t testing.TB, delay time.Duration) *fakeSlurm {
	f := &fakeSlurm{dir: t.TempDir(), delay: delay, elems: map[string]string{}, calls: map[string]int{}, cancelled: map[string]bool{}}
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
		for deadline := time.Now().Add(time.Minute); f.lateSqueue && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			ended := true
			for _, lid := range f.elems {
				if j, _ := (sched.Local{}).Query(ctx, nil, lid); j.State.Active() {
					ended = false
				}
			}
			if ended {
				break
			}
		}
		var b strings.Builder
		for id, lid := range f.elems {
			j, _ := sched.Local{}.Query(ctx, nil, lid)
			state := map[bool]string{true: "RUNNING", false: "COMPLETED"}[j.State.Active()]
			if state == "COMPLETED" && f.completing && !f.cancelled[id] {
				state = "COMPLETING"
			}
			fmt.Fprintf(&b, "%s|%s|None|0:01\n", id, state)
		}
		return b.String(), nil
	case "scontrol":
		return fmt.Sprintf("JobId=%s JobState=COMPLETED ExitCode=0:0\n", argv[len(argv)-1]), nil
	case "scancel":
		id := argv[len(argv)-1]
		f.cancels = append(f.cancels, id)
		for key, lid := range f.elems {
			if key == id || strings.HasPrefix(key, id+"_") {
				_ = sched.Local{}.Cancel(ctx, nil, lid, arg("--signal=") == "KILL")
				f.cancelled[key] = true
			}
		}
		return "", nil
	}
	return "", fmt.Errorf("fake Slurm: no %s", argv[0])
}

// slurmPoolStop starts a pool of size as one (fake) Slurm array and stops
// it, returning the stop's duration and the scheduler commands it ran.
// mods change the fake before the stop.
func slurmPoolStop(t testing.TB, size int, delay time.Duration, mods ...func(*fakeSlurm)) (time.Duration, map[string]int) {
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
	for _, m := range mods { // What the stop meets.
		m(f)
	}
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
// runner stopped on its request. Also when squeue first answers after
// the runners have stopped and their elements ended (late): the stop's
// first look at the job ran scontrol for each then (a CI run under load).
func TestPoolStopSlurmQueries(t *testing.T) {
	needTool(t, "tclsh")
	for _, late := range []bool{false, true} {
		t.Run(fmt.Sprintf("late=%v", late), func(t *testing.T) {
			_, calls := slurmPoolStop(t, 3, 0, func(f *fakeSlurm) { f.lateSqueue = late })
			if calls["scontrol"] != 0 || calls["scancel"] != 0 || calls["sacct"] != 0 || calls["squeue"] == 0 {
				t.Errorf("pool stop ran %v, want squeue only", calls)
			}
		})
	}
}

// pool stop with NoJobWait (master pool stop without --wait-jobs) is done
// when every runner has stopped on its request: the elements, which the
// fake Slurm keeps COMPLETING until they are cancelled, are cancelled by
// one scancel of the array and not waited for; each reports
// stop_request. Waiting for the jobs (the default of launch.StopOptions)
// would take the grace and end them by the cancel instead. The pool has
// more sessions than launch.StopMany writes at once (8): each still gets
// exactly one stop request, answered accepted, after its launch.json
// mark.
func TestPoolStopNoJobWait(t *testing.T) {
	needTool(t, "tclsh")
	f := newFakeSlurm(t, 0)
	f.completing = true
	p, _, err := Start(ctx(t), filepath.Join(t.TempDir(), "pool"), Options{Size: 10, Via: "slurm", Exec: f.exec, RunnerArgs: []string{"--heartbeat", "250ms"}})
	if err != nil {
		t.Fatal(err)
	}
	var notes []string
	var mu sync.Mutex
	stops, err := p.Stop(ctx(t), launch.StopOptions{NoJobWait: true, Grace: time.Minute, Progress: func(m string) {
		mu.Lock()
		defer mu.Unlock()
		notes = append(notes, m)
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stops {
		if s.Report.Step != launch.StepStopRequest || !strings.Contains(s.Report.Message, "not waited for") {
			t.Errorf("%s: %+v", s.Session, s.Report)
		}
		ms, err := master.Open(p.dirOf(s.Session))
		if err != nil {
			t.Fatal(err)
		}
		if st, err := ms.ReadState(); err != nil || st.Phase != protocol.PhaseStopped || ms.Core().LockHeld() {
			t.Errorf("%s: phase %s (%v), lock held %v after pool stop", s.Session, st.Phase, err, ms.Core().LockHeld())
		}
		if li, err := launch.Read(ms); err != nil || li.StoppedAt == nil {
			t.Errorf("%s: launch.json without stopped_at (%v)", s.Session, err)
		}
		acks, _ := os.ReadDir(filepath.Join(p.dirOf(s.Session), protocol.DirAck))
		left, _ := os.ReadDir(filepath.Join(p.dirOf(s.Session), protocol.DirCtl))
		var reqs []string
		for _, e := range left {
			if strings.HasPrefix(e.Name(), "req_") {
				reqs = append(reqs, e.Name())
			}
		}
		if len(acks) != 1 || len(reqs) != 0 {
			t.Errorf("%s: replies %v, requests left %v; want one stop request, answered", s.Session, acks, reqs)
			continue
		}
		var rep protocol.ControlReply
		if b, err := os.ReadFile(filepath.Join(p.dirOf(s.Session), protocol.DirAck, acks[0].Name())); err != nil || json.Unmarshal(b, &rep) != nil || rep.Op != protocol.OpStop || rep.Outcome != protocol.OutcomeAccepted {
			t.Errorf("%s: reply %+v (%v)", s.Session, rep, err)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !slices.Equal(f.cancels, []string{"77"}) {
		t.Errorf("scancel ran for %v, want the array once (77)\n%s", f.cancels, strings.Join(notes, "\n"))
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

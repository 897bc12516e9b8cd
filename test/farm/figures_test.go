package farm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/launch"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/pool"
)

// The farm's figures for BENCHMARKS.md ("farm"): pool start time and
// dispatch cost for N = 1 and 16 (128: TestSlurmPool128, TestSGEPool128),
// and the memory and CPU
// of an idle session (runner + tclsh) measured over 10 s on the pool of 16.
// Logged, never asserted.
func TestSlurmFarmFigures(t *testing.T) { needSlurm(t); farmFigures(t, "slurm") }

func TestSGEFarmFigures(t *testing.T) { needSGE(t); farmFigures(t, "sge") }

func farmFigures(t *testing.T, via string) {
	for _, n := range []int{1, 16} {
		dir := filepath.Join(workDir(t), "pool")
		t0 := time.Now()
		p := startPool(t, dir, via, n, false)
		t.Logf("BENCH %s pool start N=%d: %v", via, n, time.Since(t0).Round(time.Millisecond))
		dispatchCost(t, via, p, 200)
		if n == 16 {
			idleCost(t, via, p, 10*time.Second)
		}
		t0 = time.Now()
		if _, err := p.Stop(ctx(t), launch.StopOptions{NoJobWait: true}); err != nil { // As master pool stop.
			t.Error(err)
		}
		t.Logf("BENCH %s pool stop N=%d: %v", via, n, time.Since(t0).Round(time.Millisecond))
	}
}

// idleCost logs the mean RSS of the runner and of its tool, and their CPU
// use over window, across the pool's sessions.
func idleCost(t *testing.T, via string, p *pool.Pool, window time.Duration) {
	type procs struct{ runner, tool int }
	var ps []procs
	for _, d := range sessionDirs(p) {
		s, _ := master.Open(d)
		st, err := s.Status(context.Background())
		if err != nil || !st.Alive {
			t.Fatalf("%s: %v %+v", d, err, st)
		}
		ps = append(ps, procs{st.RunnerPID, st.ToolPID})
	}
	cpu := func() (r, tl float64) {
		for _, p := range ps {
			r += cpuSeconds(p.runner)
			tl += cpuSeconds(p.tool)
		}
		return r, tl
	}
	r0, t0 := cpu()
	time.Sleep(window)
	r1, t1 := cpu()
	var rssR, rssT float64
	for _, p := range ps {
		rssR += rssMiB(p.runner)
		rssT += rssMiB(p.tool)
	}
	n := float64(len(ps))
	t.Logf("BENCH %s idle session (mean of %d, heartbeat 250ms): RSS runner %.1f MiB + tclsh %.1f MiB; CPU runner %.2f%% + tclsh %.2f%% of a core",
		via, len(ps), rssR/n, rssT/n, 100*(r1-r0)/n/window.Seconds(), 100*(t1-t0)/n/window.Seconds())
}

// cpuSeconds is utime+stime of pid (/proc/pid/stat, 100 ticks a second).
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	k, _ := strconv.ParseFloat(f[12], 64)
	return (u + k) / 100
}

// rssMiB is VmRSS of pid.
func rssMiB(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// dispatchPrefix starts the cmd_ids of dispatchCost's commands.
const dispatchPrefix = "dispatch-"

// dispatchCost submits n short commands to the pool, one after the other
// from one submitter, and logs the mean time of a pool submit (choosing a
// session and queueing the command durably), then waits for every
// result: the dispatch cost at the pool's size.
func dispatchCost(t *testing.T, via string, p *pool.Pool, n int) {
	t.Helper()
	q, err := pool.Open(p.Dir())
	if err != nil {
		t.Fatal(err)
	}
	cmds := make([]*pool.Command, n)
	t0 := time.Now()
	for i := range cmds {
		id := fmt.Sprintf("%s%04d-%s", dispatchPrefix, i, master.NewCmdID())
		if cmds[i], err = q.Submit(ctx(t), "expr 1", pool.SubmitOptions{SubmitOptions: master.SubmitOptions{CmdID: id}}); err != nil {
			t.Fatal(err)
		}
	}
	d := time.Since(t0)
	for _, pc := range cmds {
		if _, err := pc.Wait(ctx(t)); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("BENCH %s dispatch N=%d: %v per pool submit (%d from one submitter); all results %v after the first",
		via, len(p.SessionNames()), (d / time.Duration(n)).Round(10*time.Microsecond), n, time.Since(t0).Round(time.Millisecond))
}

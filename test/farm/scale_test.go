package farm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/launch"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/pool"
	"github.com/skillpilot/skillpilot/protocol"
	"github.com/skillpilot/skillpilot/sched"
)

// scaleSize and scaleCommands size the farm-scale tests: a pool of 128
// sessions (one job array) serving 10,000 commands, about
// 1.5 minutes a test on a 2-core CI runner (SP_SCALE_SIZE and
// SP_SCALE_COMMANDS change them).
var scaleSize, scaleCommands = envInt("SP_SCALE_SIZE", 128), envInt("SP_SCALE_COMMANDS", 10000)

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// A pool of 128 on Slurm, started as one job array: all serve; 10,000
// commands from 4 submitters pass through it; once a third have results,
// 10% of the elements are cancelled with scancel, heal (every second, with
// respawn) moves their queued commands and relaunches them. Every command
// ends with exactly one result and none ran twice. pool start, status,
// heal and stop are timed (reported, not asserted).
func TestSlurmPool128(t *testing.T) {
	needSlurm(t)
	farmScale(t, "slurm", scaleCommands, cancelWith("scancel"))
}

// The same on Grid Engine, the elements deleted with qdel.
func TestSGEPool128(t *testing.T) {
	needSGE(t)
	farmScale(t, "sge", scaleCommands, cancelWith("qdel"))
}

// The same with the local launcher and 10,000 commands (SP_LOCAL=1;
// SP_SCALE_COMMANDS changes the number), 10% of the runners killed with
// SIGKILL midway: 0 lost, 0 run twice, one result each.
//
//	SP_LOCAL=1 go test -run TestLocalPool128 -timeout 30m -v ./test/farm/
func TestLocalPool128(t *testing.T) {
	needLocal(t)
	farmScale(t, "local", scaleCommands, func(ids []string) error {
		var errs []error
		for _, id := range ids {
			errs = append(errs, sched.Local{}.Cancel(context.Background(), nil, id, true))
		}
		return errors.Join(errs...)
	})
}

// cancelWith cancels jobs with a scheduler's command (scancel, qdel).
func cancelWith(cmd string) func([]string) error {
	return func(ids []string) error {
		if out, err := exec.Command(cmd, ids...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w %s", cmd, err, out)
		}
		return nil
	}
}

// farmScale runs n commands through a pool of scaleSize via a launcher,
// cancelling 10% of its jobs with cancel once a third have results.
func farmScale(t *testing.T, via string, n int, cancel func(ids []string) error) {
	size := scaleSize
	c, cancelCtx := context.WithTimeout(context.Background(), 10*time.Minute+time.Duration(n)*50*time.Millisecond)
	defer cancelCtx()
	work := workDir(t)
	dir := filepath.Join(work, "pool")
	t0 := time.Now()
	p, res, err := pool.Start(c, dir, pool.Options{Size: size, Via: via, Runner: runnerPath(), Respawn: true, MaxRespawns: 2,
		RunnerArgs: []string{"--heartbeat", "1s"}})
	start := time.Since(t0)
	t.Cleanup(func() {
		for _, name := range p.SessionNames() {
			if li, err := launch.ReadLaunch(filepath.Join(dir, name)); err == nil {
				cancelNow(via, li.JobID)
				if li.ArrayJobID != "" {
					cancelNow(via, li.ArrayJobID)
				}
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("BENCH %s pool start N=%d: %v (one job array %s)", via, size, start.Round(time.Millisecond), res[0].Result.Info.ArrayJobID)
	dispatchCost(t, via, p, 200)
	side := filepath.Join(work, "side")
	hctx, stopHeal := context.WithCancel(c)
	var healWG sync.WaitGroup
	healWG.Add(1)
	var healMax time.Duration
	respawned, moved := 0, 0
	go func() { // master pool heal --every 1s
		defer healWG.Done()
		q, _ := pool.Open(p.Dir())
		for hctx.Err() == nil {
			h0 := time.Now()
			rep, err := q.Heal(hctx)
			healMax = max(healMax, time.Since(h0))
			respawned += len(rep.Respawned)
			moved += len(rep.Moved)
			if err != nil && hctx.Err() == nil {
				t.Log(err)
			}
			select {
			case <-hctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
	cmds := make([]*pool.Command, n)
	var subWG sync.WaitGroup
	t1 := time.Now()
	for w := 0; w < 4; w++ { // 4 submitters
		subWG.Add(1)
		go func() {
			defer subWG.Done()
			q, _ := pool.Open(p.Dir())
			for i := w; i < n; i += 4 {
				id := fmt.Sprintf("c%05d-%s", i, master.NewCmdID())
				pc, err := q.Submit(c, sidePayload(side, id, ""), pool.SubmitOptions{SubmitOptions: master.SubmitOptions{CmdID: id}})
				if err != nil {
					t.Error(err)
					return
				}
				cmds[i] = pc
			}
		}()
	}
	killed := make(chan []string, 1)
	go func() { // Once a third have results: cancel 10% of the elements.
		for c.Err() == nil {
			total := 0
			for _, k := range flowResults(p) {
				total += k
			}
			if total >= n/3 {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		var ids []string
		for i := 0; i < size; i += 10 {
			if li, err := launch.ReadLaunch(filepath.Join(dir, pool.SessionName(i, size))); err == nil {
				ids = append(ids, li.JobID)
			}
		}
		if err := cancel(ids); err != nil {
			t.Error(err)
		}
		t.Logf("cancelled %d jobs %v after the first submission: %s", len(ids), time.Since(t1).Round(time.Millisecond), strings.Join(ids, " "))
		killed <- ids
	}()
	subWG.Wait()
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("BENCH %s %d commands submitted by 4 submitters in %v (pool submit at N=%d: %v each)", via, n, time.Since(t1).Round(time.Millisecond), size,
		(4 * time.Since(t1) / time.Duration(n)).Round(100*time.Microsecond))
	<-killed
	notOK := 0
	for _, pc := range cmds {
		r, err := pc.Wait(c)
		if r == nil {
			t.Fatalf("%s: %v", pc.ID, err)
		}
		if r.Status != protocol.StatusOK {
			notOK++
		}
	}
	t.Logf("BENCH %s all %d results after %v (%d not ok: running when their element was cancelled)", via, n, time.Since(t1).Round(time.Millisecond), notOK)
	stopHeal()
	healWG.Wait()
	results, ran := flowResults(p), sideEffects(t, side)
	for _, pc := range cmds {
		r, _ := pc.Result()
		if results[pc.ID] != 1 {
			t.Errorf("%s: %d results", pc.ID, results[pc.ID])
		}
		if ran[pc.ID] > 1 || r.Status == protocol.StatusOK && ran[pc.ID] != 1 {
			t.Errorf("%s: ran %d times, status %s", pc.ID, ran[pc.ID], r.Status)
		}
	}
	if len(results) != n {
		t.Errorf("%d commands have results, want %d", len(results), n)
	}
	relaunched := 0
	for i := 0; i < size; i += 10 { // The cancelled elements' sessions.
		if li, err := launch.ReadLaunch(filepath.Join(dir, pool.SessionName(i, size))); err == nil && li.Launches > 1 {
			relaunched++
		}
	}
	t.Logf("BENCH %s heal loop: %d respawned, %d moved, slowest pass %v; %d of the cancelled sessions relaunched (by the loop or the waits' heal passes)",
		via, respawned, moved, healMax.Round(time.Millisecond), relaunched)
	t2 := time.Now()
	out, _, code := cli(t, "pool", "status", "--pool", p.Dir())
	t.Logf("BENCH %s pool status N=%d: %v (exit %d, %s)", via, size, time.Since(t2).Round(time.Millisecond), code, firstLineOf(out))
	t2 = time.Now()
	_, _, code = cli(t, "pool", "heal", "--pool", p.Dir())
	t.Logf("BENCH %s pool heal N=%d: %v (exit %d)", via, size, time.Since(t2).Round(time.Millisecond), code)
	t2 = time.Now()
	out, errOut, code := cli(t, "pool", "stop", "--pool", p.Dir(), "--grace", "20s")
	stopped := time.Since(t2)
	t.Logf("BENCH %s pool stop N=%d: %v (exit %d)", via, size, stopped.Round(time.Millisecond), code)
	if code != 0 {
		t.Errorf("pool stop exit %d:\n%s%s", code, out, errOut)
	}
	if gone, err := jobsGone(c, via, sessionDirs(p)); err != nil {
		t.Error(err)
	} else {
		t.Logf("BENCH %s pool stop N=%d: the scheduler listed no job active %v after the stop began (what pool stop --wait-jobs waits for)", via, size, (stopped + gone).Round(time.Millisecond))
	}
}

// jobsGone waits until the scheduler lists none of the sessions' jobs as
// active and says how long that took.
func jobsGone(ctx context.Context, via string, dirs []string) (time.Duration, error) {
	t0 := time.Now()
	d, err := sched.For(via)
	if err != nil {
		return 0, err
	}
	x := sched.SharedExec(sched.RunCommand, 200*time.Millisecond)
	errs := make([]error, len(dirs))
	var wg sync.WaitGroup
	for i, dir := range dirs {
		li, err := launch.ReadLaunch(dir)
		if err != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = launch.WaitJobGone(ctx, d, x, li.JobID)
		}()
	}
	wg.Wait()
	return time.Since(t0), errors.Join(errs...)
}

// flowResults counts result files per cmd_id in the pool's sessions,
// leaving out dispatchCost's commands.
func flowResults(p *pool.Pool) map[string]int {
	n := resultsByID(sessionDirs(p)...)
	for id := range n {
		if strings.HasPrefix(id, dispatchPrefix) {
			delete(n, id)
		}
	}
	return n
}

func firstLineOf(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

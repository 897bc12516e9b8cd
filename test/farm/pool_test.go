package farm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/launch"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/pool"
	"github.com/skillpilot/skillpilot/protocol"
)

func startPool(t *testing.T, dir, via string, size int, respawn bool) *pool.Pool {
	t.Helper()
	p, res, err := pool.Start(ctx(t), dir, pool.Options{Size: size, Via: via, Runner: runnerPath(), Respawn: respawn,
		RunnerArgs: []string{"--heartbeat", "250ms"}})
	for _, r := range res {
		if r.Result != nil {
			cancelAtEnd(t, via, r.Result.Info.JobID)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, name := range p.SessionNames() { // Respawned jobs too.
			if li, err := launch.ReadLaunch(filepath.Join(dir, name)); err == nil {
				cancelNow(via, li.JobID)
			}
		}
	})
	return p
}

func sessionDirs(p *pool.Pool) []string {
	var dirs []string
	for _, n := range p.SessionNames() {
		dirs = append(dirs, filepath.Join(p.Dir(), n))
	}
	return dirs
}

// A pool of 4 on Slurm serves 1,000 commands; halfway one session's job is
// cancelled with scancel. Its queued commands are moved to the others
// (pool heal running beside the flow, as a user would run it), its running
// command ends with its own result. Every command ends with exactly one
// result, and none ran twice (each appends its cmd_id to a file).
func TestSlurmPool1000WithACancelledJob(t *testing.T) {
	needSlurm(t)
	poolCancelHalfway(t, "slurm", 4, 1000, false, func(job string) error { return exec.Command("scancel", job).Run() })
}

// poolCancelHalfway: a pool of size sessions launched via the scheduler
// serves n commands (each appends its cmd_id to a file); once half have
// results, the job of the session with the longest queue is cancelled.
func poolCancelHalfway(t *testing.T, via string, size, n int, respawn bool, cancel func(job string) error) {
	work := workDir(t)
	t0 := time.Now()
	p := startPool(t, filepath.Join(work, "pool"), via, size, respawn)
	t.Logf("pool of %d serving after %v", size, time.Since(t0).Round(time.Millisecond))
	side := filepath.Join(work, "side")
	hctx, stopHeal := context.WithCancel(ctx(t))
	var healWG sync.WaitGroup
	healWG.Add(1)
	moved := 0
	go func() { // master pool heal --every 500ms
		defer healWG.Done()
		q, _ := pool.Open(p.Dir())
		for hctx.Err() == nil {
			rep, err := q.Heal(hctx)
			if err != nil && hctx.Err() == nil {
				t.Error(err)
			}
			moved += len(rep.Moved)
			select {
			case <-hctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	var cmds []*pool.Command
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("c%04d-%s", i, master.NewCmdID())
		pc, err := p.Submit(ctx(t), sidePayload(side, id, "after 20; "), pool.SubmitOptions{SubmitOptions: master.SubmitOptions{CmdID: id}})
		if err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, pc)
	}
	t.Logf("%d submitted after %v", n, time.Since(t0).Round(time.Millisecond))
	waitFor(t, "half of the results", func() bool {
		total := 0
		for _, c := range resultsByID(sessionDirs(p)...) {
			total += c
		}
		return total >= n/2
	})
	t.Logf("half of the results after %v", time.Since(t0).Round(time.Millisecond))
	views, _ := p.Views()
	victim := views[0]
	for _, v := range views {
		if v.Queue > victim.Queue {
			victim = v
		}
	}
	li, _ := launch.ReadLaunch(filepath.Join(p.Dir(), victim.Name))
	if err := cancel(li.JobID); err != nil {
		t.Fatalf("cancel job %s: %v", li.JobID, err)
	}
	t.Logf("cancelled job %s of %s with %d queued", li.JobID, victim.Name, victim.Queue)
	cancelled := time.Now()
	notOK := 0
	for _, pc := range cmds {
		r, err := pc.Wait(ctx(t))
		if r == nil {
			t.Fatalf("%s: %v", pc.ID, err)
		}
		if r.Status != protocol.StatusOK {
			notOK++
			t.Logf("%s: %s %s", pc.ID, r.Status, r.ExitReason)
		}
	}
	t.Logf("all results %v after the cancel", time.Since(cancelled).Round(time.Millisecond))
	if ev, err := os.ReadFile(filepath.Join(p.Dir(), pool.FilePoolEvents)); err == nil {
		for _, l := range strings.Split(string(ev), "\n") {
			if !strings.Contains(l, `"event":"moved"`) && l != "" {
				t.Logf("event %s", l)
			}
		}
	}
	stopHeal()
	healWG.Wait()
	results, ran := resultsByID(sessionDirs(p)...), sideEffects(t, side)
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
	sts, _ := p.Status(ctx(t))
	for _, s := range sts {
		t.Logf("%s runner alive=%v dead=%v queue=%d done=%d moved=%d job=%s | %s", s.Name, s.Alive, s.Dead, s.Queue, s.Done, s.MovedOut, s.Launch, s.Note)
		if s.Name != victim.Name {
			continue
		}
		// Every command first queued in the victim either ran there (before
		// the cancel) or was moved out, once.
		origin, home := 0, 0
		for _, pc := range cmds {
			if pc.Session == victim.Name {
				origin++
				if results := resultsByID(filepath.Join(p.Dir(), victim.Name)); results[pc.ID] == 1 {
					home++
				}
			}
		}
		if (!respawn && !s.Dead) || s.Queue != 0 || home+s.MovedOut != origin {
			t.Errorf("victim %s: dead %v, %d queued, %d ran there + %d moved out != %d queued there", s.Name, s.Dead, s.Queue, home, s.MovedOut, origin)
		}
	}
	t.Logf("%d moved by the heal loop (the rest by the waits' heal passes), %d not ok (the command running when the job was cancelled)", moved, notOK)
	out, _, code := cli(t, "pool", "status", "--pool", p.Dir())
	if serving := fmt.Sprintf("%d serving", size-1); code != 0 || (!respawn && !strings.Contains(out, serving)) {
		t.Errorf("pool status %d:\n%s", code, out)
	}
	t.Logf("\n%s", out)
	out, _, code = cli(t, "pool", "stop", "--pool", p.Dir())
	if code != 0 || strings.Count(out, "stop_request") < size-1 { // The victim: already_stopped, or a cancel while its job still ends.
		t.Errorf("pool stop %d:\n%s", code, out)
	}
}

// With --respawn, a session whose runner is killed (SIGKILL: no chance to
// answer its running command) is relaunched by heal; the new runner gives
// the claimed command its result (runner_restarted) and serves the queue.
func TestSlurmPoolRespawn(t *testing.T) {
	needSlurm(t)
	work := workDir(t)
	p := startPool(t, filepath.Join(work, "pool"), "slurm", 2, true)
	gate := filepath.Join(work, "gate")
	var gates []*master.Command
	for _, dir := range sessionDirs(p) {
		s, _ := master.Open(dir)
		c, err := s.Submit(ctx(t), fmt.Sprintf("while {![file exists {%s}]} {after 10}", gate), master.SubmitOptions{})
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the gate command to run", func() bool { st, _ := s.Status(ctx(t)); return st.CurrentCmdID == c.ID })
		gates = append(gates, c)
	}
	var cmds []*pool.Command
	for i := 0; i < 20; i++ {
		pc, err := p.Submit(ctx(t), "expr 1", pool.SubmitOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, pc)
	}
	victim := sessionDirs(p)[1]
	s, _ := master.Open(victim)
	st, _ := s.Status(ctx(t))
	if err := killPID(st.RunnerPID); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(gate, nil, 0o600)
	for _, pc := range cmds {
		if _, err := pc.Wait(ctx(t)); err != nil {
			t.Fatalf("%s: %v", pc.ID, err)
		}
	}
	_, err := p.WaitCommand(ctx(t), gates[1])
	var re *master.ResultError
	if !errors.As(err, &re) || re.Result.ExitReason != protocol.ReasonRunnerRestarted {
		t.Fatalf("the killed runner's command: %v", err)
	}
	li, _ := launch.ReadLaunch(victim)
	if li.Launches != 2 {
		t.Errorf("launches %d", li.Launches)
	}
	for id, k := range resultsByID(sessionDirs(p)...) {
		if k != 1 {
			t.Errorf("%s: %d results", id, k)
		}
	}
	b, _ := os.ReadFile(filepath.Join(p.Dir(), pool.FilePoolEvents))
	if !strings.Contains(string(b), `"event":"respawned"`) {
		t.Errorf("events: %s", b)
	}
}

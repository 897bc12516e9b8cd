package pool

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/internal/testenv"
	"github.com/skillpilot/skillpilot/launch"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
)

// A balancing move races the runner's claim of the same command, 300
// times: each command is queued in s00, whose runner claims it at once,
// while balanceMove claims it for s01. Exactly one of the two renames wins
// every time: each command runs once and has one result.
func TestPoolBalanceRace(t *testing.T) {
	testenv.Slow(t, "real runners racing for seconds")
	needTool(t, "tclsh")
	p, pool := newPoolDir(t, "s00", "s01")
	runnerIn(t, filepath.Join(pool, "s00"))
	runnerIn(t, filepath.Join(pool, "s01"))
	side := filepath.Join(t.TempDir(), "side")
	s0, _ := p.session("s00")
	now, err := p.fsNow()
	if err != nil {
		t.Fatal(err)
	}
	from, to := p.view("s00", now), p.view("s01", now)
	if !from.Serving() || !to.Serving() {
		t.Fatalf("not serving: %+v %+v", from, to)
	}
	views := []SessionView{from, to}
	var cmds []*master.Command
	moved := 0
	for i := 0; i < 300; i++ {
		id := master.NewCmdID()
		c, err := s0.Submit(ctx(t), fmt.Sprintf("set f [open {%s} a]; puts $f %s; close $f", side, id), master.SubmitOptions{CmdID: id})
		if err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, c)
		m, err := p.balanceMove(views, from, c.Name, to)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if m != nil {
			moved++
		}
	}
	t.Logf("the move won %d of %d races, the runner %d", moved, len(cmds), len(cmds)-moved)
	byID := checkExactlyOnce(t, pool, side, cmds)
	for id, r := range byID {
		if r.Status != protocol.StatusOK {
			t.Errorf("%s: %s", id, r.Status)
		}
	}
}

// With a backlog queued at once, adapt grows the pool and moves queued
// commands to the grown sessions, which run them; every command runs
// exactly once.
func TestPoolAdaptBalances(t *testing.T) {
	needTool(t, "tclsh")
	dir := filepath.Join(t.TempDir(), "pool")
	p, _, err := Start(ctx(t), dir, Options{Size: 2, Via: "local", RunnerArgs: []string{"--heartbeat", "200ms", "--kill-grace", "1s"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, name := range p.SessionNames() {
			killLaunched(t, filepath.Join(dir, name))
		}
	})
	gate := filepath.Join(t.TempDir(), "gate")
	for _, name := range []string{"s00", "s01"} { // Each runner busy until the gate opens.
		s, _ := p.session(name)
		if _, err := s.Submit(ctx(t), fmt.Sprintf("while {![file exists {%s}]} {after 10}", gate), master.SubmitOptions{}); err != nil {
			t.Fatal(err)
		}
		for claimedCount(s) == 0 {
			time.Sleep(10 * time.Millisecond)
		}
	}
	side := filepath.Join(t.TempDir(), "side")
	var cmds []*master.Command
	for i := 0; i < 12; i++ {
		id := master.NewCmdID()
		pc, err := p.Submit(ctx(t), fmt.Sprintf("set f [open {%s} a]; puts $f %s; close $f", side, id), SubmitOptions{SubmitOptions: master.SubmitOptions{CmdID: id}})
		if err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, pc.Command)
	}
	old := time.Now().Add(-time.Minute) // Older than a non-atomic writer's grace (minMoveAge).
	for _, name := range []string{"s00", "s01"} {
		for _, n := range commandsIn(filepath.Join(dir, name, protocol.DirQueue)) {
			os.Chtimes(filepath.Join(dir, name, protocol.DirQueue, n), old, old)
		}
	}
	a := NewAdapter(p, AdaptOptions{Min: 2, Max: 4, Idle: time.Hour, Stop: launch.StopOptions{Grace: 10 * time.Second}})
	rep, err := a.Step(ctx(t))
	if err != nil || rep.Waiting != 12 || len(rep.Grown) != 2 {
		t.Fatalf("12 waiting: %+v %v", rep, err)
	}
	to := map[string]int{}
	for _, m := range rep.Balanced {
		to[m.To]++
	}
	// 12 queued + 2 claimed over 4 sessions: loads 4 4 3 3 or so.
	if to["s02"] < 2 || to["s03"] < 2 {
		t.Fatalf("balanced %v (%+v)", to, rep.Balanced)
	}
	_ = writeFile(gate)
	checkExactlyOnce(t, dir, side, cmds)
	for _, name := range []string{"s02", "s03"} {
		if n := len(commandsIn(filepath.Join(dir, name, protocol.DirResult))); n != to[name] {
			t.Errorf("%s ran %d commands, %d were moved there", name, n, to[name])
		}
	}
}

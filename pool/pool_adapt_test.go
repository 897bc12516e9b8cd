package pool

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/launch"
	"github.com/skillpilot/skillpilot/master"
)

// adapt grows a local pool of 1 while commands wait (up to max 3) and
// retires the sessions once they sat idle, down to min 1.
func TestPoolAdapt(t *testing.T) {
	needTool(t, "tclsh")
	dir := filepath.Join(t.TempDir(), "pool")
	p, _, err := Start(ctx(t), dir, Options{Size: 1, Via: "local", RunnerArgs: []string{"--heartbeat", "200ms", "--kill-grace", "1s"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, name := range p.SessionNames() {
			killLaunched(t, filepath.Join(dir, name))
		}
	})
	a := NewAdapter(p, AdaptOptions{Min: 1, Max: 3, Idle: 300 * time.Millisecond, Stop: launch.StopOptions{Grace: 10 * time.Second}})
	if rep, err := a.Step(ctx(t)); err != nil || len(rep.Grown)+len(rep.Retired) != 0 {
		t.Fatalf("idle pool of min size: %+v %v", rep, err)
	}
	gate := filepath.Join(t.TempDir(), "gate")
	s0, _ := p.session("s00")
	if _, err := s0.Submit(ctx(t), fmt.Sprintf("while {![file exists {%s}]} {after 10}", gate), master.SubmitOptions{}); err != nil {
		t.Fatal(err)
	}
	for claimedCount(s0) == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	var pcs []*Command
	for i := 0; i < 5; i++ {
		pc, err := p.Submit(ctx(t), "expr 1", SubmitOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pcs = append(pcs, pc)
	}
	rep, err := a.Step(ctx(t))
	if err != nil || rep.Waiting != 5 || len(rep.Grown) != 2 {
		t.Fatalf("5 waiting: %+v %v", rep, err)
	}
	// The new sessions take no queued command by themselves: a heal would
	// only move those of dead sessions. New submissions go to them.
	for i := 0; i < 4; i++ {
		pc, err := p.Submit(ctx(t), "expr 2", SubmitOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pcs = append(pcs, pc)
	}
	_ = writeFile(gate)
	for _, pc := range pcs {
		if _, err := pc.Wait(ctx(t)); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(longWait)
	for {
		rep, err := a.Step(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if m, _ := p.Members(); len(m) == 1 {
			t.Logf("last step %+v", rep)
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("idle sessions not retired")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

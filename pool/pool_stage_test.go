package pool

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/internal/sessionio"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
)

// A heal pass deletes what killed movers left in a queue/ once older than
// StaleStageAge: a temporary file, and a stage whose move was recorded
// with another stage. It keeps a stage a forward record names (a mover is
// publishing it, or died before), a stage not yet recorded (a live mover,
// however long suspended, between staging and recording), anything
// younger, commands and other dot-files; and every command still ends
// with exactly one result.
func TestPoolHealRemovesStaleStages(t *testing.T) {
	p, pool := newPoolDir(t, "s00", "s01")
	side := filepath.Join(t.TempDir(), "side")
	runnerIn(t, filepath.Join(pool, "s01"))
	dead := filepath.Join(pool, "s00")
	q := filepath.Join(pool, "s01", protocol.DirQueue)
	cmds := queueSideEffects(t, dead, side, 3)
	views, _ := p.Views()
	var v SessionView
	for _, x := range views {
		if x.Name == "s00" {
			v = x
		}
	}
	old := time.Now().Add(-StaleStageAge - time.Minute)
	age := func(path string) {
		t.Helper()
		if err := os.Chtimes(path, old, old); err != nil {
			t.Fatal(err)
		}
	}
	// stage runs steps 1-3 for c and returns its stage path and forward.
	stage := func(c *master.Command) (string, string) {
		t.Helper()
		if ok, err := claimTo(dead, c.Name); !ok || err != nil {
			t.Fatal(ok, err)
		}
		f, err := p.stageMove(views, v, c.Name, nil, "")
		if err != nil || f == nil {
			t.Fatal(f, err)
		}
		return filepath.Join(q, f.Stage), filepath.Join(dead, sessionio.DirForward, c.Name)
	}
	// 0: its mover was killed between staging and recording; the command
	// waits in moved/ and this pass stages it again, so the first stage
	// can never be published: removed.
	orphan, fwd0 := stage(cmds[0])
	os.Remove(fwd0)
	age(orphan)
	// 1: recorded, not yet published (its mover died or is about to
	// rename it): kept by the sweep below, published by the heal pass.
	named, _ := stage(cmds[1])
	age(named)
	// 2: a live mover suspended between staging and recording: no
	// forward record yet. Kept, whatever its age.
	pending, fwd2 := stage(cmds[2])
	record2, _ := os.ReadFile(fwd2)
	os.Remove(fwd2)
	age(pending)
	oldTemp := filepath.Join(q, "..mv_cmd_00000000000000000007_t.json.123.tmp")
	submitTemp := filepath.Join(q, ".cmd_00000000000000000009_s.json.456.tmp")
	youngTemp := filepath.Join(q, ".cmd_00000000000000000008_y.json.789.tmp")
	other := filepath.Join(q, ".notes")
	for _, f := range []string{oldTemp, submitTemp, youngTemp, other} {
		os.WriteFile(f, []byte("{"), 0o600)
	}
	age(oldTemp)
	age(submitTemp)
	age(other)

	now, _ := p.fsNow()
	if got := p.sweepStages(views, now); len(got) != 2 {
		t.Errorf("before any restage, removed %v; want the two temporary files", got)
	}
	for _, kept := range []string{orphan, named, pending, youngTemp, other} {
		if _, err := os.Lstat(kept); err != nil {
			t.Errorf("%s: removed: %v", filepath.Base(kept), err)
		}
	}
	// 2's mover is alive: hide its claim from this pass, as if it held it.
	held := filepath.Join(t.TempDir(), cmds[2].Name)
	if err := os.Rename(filepath.Join(dead, DirMoved, cmds[2].Name), held); err != nil {
		t.Fatal(err)
	}
	rep, err := p.Heal(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	rel, _ := filepath.Rel(pool, orphan)
	if !slices.Equal(rep.Removed, []string{rel}) {
		t.Errorf("heal removed %v, want [%s]", rep.Removed, rel)
	}
	if _, err := os.Lstat(orphan); !os.IsNotExist(err) {
		t.Errorf("orphan stage kept: %v", err)
	}
	if _, err := os.Lstat(pending); err != nil {
		t.Errorf("pending stage removed: %v", err)
	}
	ev, _ := os.ReadFile(filepath.Join(pool, FilePoolEvents))
	if n := strings.Count(string(ev), `"event":"stage_removed"`); n != 3 {
		t.Errorf("%d stage_removed events in %s", n, ev)
	}
	// The suspended mover wakes and records its stage (step 3); the next
	// pass publishes it (step 4).
	os.Rename(held, filepath.Join(dead, DirMoved, cmds[2].Name))
	if err := os.WriteFile(fwd2, record2, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Heal(ctx(t)); err != nil {
		t.Fatal(err)
	}
	checkExactlyOnce(t, pool, side, cmds)
}

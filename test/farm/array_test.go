package farm

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/launch"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/pool"
)

// pool start via slurm submits one job array: every session's launch.json
// names the same array job and its own element; one element cancelled
// (scancel 123_2) is respawned by heal as a job of its own; pool stop
// cancels the array as one (scancel 123) once a session that does not stop
// within the grace has had it.
func TestSlurmPoolArray(t *testing.T) {
	needSlurm(t)
	poolArray(t, "slurm", "_", func(id string) error { return exec.Command("scancel", id).Run() })
}

// The same on Grid Engine: qsub -t, qdel 123.2, qdel 123.
func TestSGEPoolArray(t *testing.T) {
	needSGE(t)
	poolArray(t, "sge", ".", func(id string) error { return exec.Command("qdel", id).Run() })
}

func poolArray(t *testing.T, via, sep string, cancel func(id string) error) {
	work := workDir(t)
	t0 := time.Now()
	p := startPool(t, filepath.Join(work, "pool"), via, 4, true)
	t.Logf("pool of 4 serving %v after pool start", time.Since(t0).Round(time.Millisecond))
	var array string
	for i, dir := range sessionDirs(p) {
		li, err := launch.ReadLaunch(dir)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			array = li.ArrayJobID
		}
		if want := fmt.Sprintf("%s%s%d", array, sep, i+1); array == "" || li.ArrayJobID != array || li.ArrayIndex != i+1 || li.JobID != want {
			t.Fatalf("%s: launch.json job_id %q array_job_id %q array_index %d, want %s in array %s", dir, li.JobID, li.ArrayJobID, li.ArrayIndex, want, array)
		}
	}
	cancelAtEnd(t, via, array)
	victim := sessionDirs(p)[1]
	if err := cancel(array + sep + "2"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "heal to respawn the cancelled element", func() bool {
		if _, err := p.Heal(ctx(t)); err != nil {
			t.Log(err)
		}
		li, err := launch.ReadLaunch(victim)
		return err == nil && li.Launches == 2
	})
	li, _ := launch.ReadLaunch(victim)
	if li.ArrayJobID != "" || li.ArrayIndex != 0 {
		t.Errorf("respawned element: array_job_id %q array_index %d, want a job of its own", li.ArrayJobID, li.ArrayIndex)
	}
	cancelAtEnd(t, via, li.JobID)
	s, _ := master.Open(victim)
	waitFor(t, "the respawned session to serve", func() bool { st, _ := s.Status(ctx(t)); return st.Alive })
	var cmds []*pool.Command
	for i := 0; i < 40; i++ {
		pc, err := p.Submit(ctx(t), "expr 1", pool.SubmitOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, pc)
	}
	for _, pc := range cmds {
		if _, err := pc.Wait(ctx(t)); err != nil {
			t.Fatalf("%s: %v", pc.ID, err)
		}
	}
	// s00 runs a command that outlasts the grace: its element is ended by
	// the array's cancel.
	gate := filepath.Join(work, "gate")
	s0, _ := master.Open(sessionDirs(p)[0])
	c, err := s0.Submit(ctx(t), fmt.Sprintf("while {![file exists {%s}]} {after 10}", gate), master.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the gate command to run", func() bool { st, _ := s0.Status(ctx(t)); return st.CurrentCmdID == c.ID })
	t1 := time.Now()
	out, errOut, code := cli(t, "pool", "stop", "--pool", p.Dir(), "--grace", "5s") // Idle runners stop within it; s00 does not.
	t.Logf("pool stop took %v:\n%s%s", time.Since(t1).Round(time.Millisecond), out, errOut)
	os.WriteFile(gate, nil, 0o600)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 4 || !strings.Contains(lines[0], launch.StepCancel) || !strings.Contains(lines[0], fmt.Sprintf(" %s: ", array)) {
		t.Errorf("pool stop: exit %d, want s00 ended by the cancel of array %s", code, array)
	}
	for _, l := range lines[1:] {
		if !strings.Contains(l, launch.StepStopRequest) {
			t.Errorf("pool stop: %q, want %s", l, launch.StepStopRequest)
		}
	}
	if !strings.Contains(errOut, "the job array of 1 session") {
		t.Errorf("pool stop did not cancel the array as one:\n%s", errOut)
	}
}

// pool grow on Slurm submits one more array for the new sessions (their
// indices follow the session numbers); pool shrink retires the
// least-loaded, whose elements end, and every command still gets exactly
// one result.
func TestSlurmPoolGrowShrink(t *testing.T) {
	needSlurm(t)
	work := workDir(t)
	p := startPool(t, filepath.Join(work, "pool"), "slurm", 2, false)
	first, _ := launch.ReadLaunch(sessionDirs(p)[0])
	t0 := time.Now()
	out, errOut, code := cli(t, "pool", "grow", "--pool", p.Dir(), "--by", "2")
	t.Logf("pool grow --by 2 took %v:\n%s", time.Since(t0).Round(time.Millisecond), out)
	dirs := sessionDirs(p)
	for _, d := range dirs {
		if li, err := launch.ReadLaunch(d); err == nil {
			cancelAtEnd(t, "slurm", li.JobID)
		}
	}
	if code != 0 || len(dirs) != 4 {
		t.Fatalf("pool grow: exit %d, sessions %v\n%s", code, dirs, errOut)
	}
	var grown string
	for i, d := range dirs[2:] {
		li, err := launch.ReadLaunch(d)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			grown = li.ArrayJobID
		}
		if grown == "" || grown == first.ArrayJobID || li.ArrayJobID != grown || li.ArrayIndex != i+3 {
			t.Errorf("%s: %+v, want element %d of one new array", d, li, i+3)
		}
	}
	side := filepath.Join(work, "side")
	var cmds []*pool.Command
	for i := 0; i < 200; i++ {
		id := fmt.Sprintf("g%03d-%s", i, master.NewCmdID())
		pc, err := p.Submit(ctx(t), sidePayload(side, id, "after 5; "), pool.SubmitOptions{SubmitOptions: master.SubmitOptions{CmdID: id}})
		if err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, pc)
	}
	t0 = time.Now()
	out, errOut, code = cli(t, "pool", "shrink", "--pool", p.Dir(), "--to", "2")
	t.Logf("pool shrink --to 2 took %v: %d lines", time.Since(t0).Round(time.Millisecond), strings.Count(out, "\n"))
	if code != 0 || strings.Count(out, "retired ") != 2 {
		t.Fatalf("pool shrink: exit %d\n%s%s", code, out, errOut)
	}
	for _, pc := range cmds {
		if _, err := pc.Wait(ctx(t)); err != nil {
			t.Fatalf("%s: %v", pc.ID, err)
		}
	}
	results, ran := resultsByID(dirs...), sideEffects(t, side)
	for _, pc := range cmds {
		if results[pc.ID] != 1 || ran[pc.ID] != 1 {
			t.Errorf("%s: %d results, ran %d times", pc.ID, results[pc.ID], ran[pc.ID])
		}
	}
	m, r := p.Members()
	if len(m) != 2 || len(r) != 2 {
		t.Errorf("members %v retired %v", m, r)
	}
	for _, name := range r {
		li, _ := launch.ReadLaunch(filepath.Join(p.Dir(), name))
		if st := squeueState(t, li.JobID); st != "" && st != "COMPLETED" && st != "CANCELLED" {
			t.Errorf("retired %s: element %s is %s", name, li.JobID, st)
		}
	}
	if out, _, code := cli(t, "pool", "stop", "--pool", p.Dir()); code != 0 {
		t.Errorf("pool stop %d:\n%s", code, out)
	}
}

package pool

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/internal/testenv"
	"github.com/skillpilot/skillpilot/launch"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
)

// A local pool of 2 grows to 4, then shrinks to 2 while every session
// runs a gated command and has queued commands: the retired sessions'
// running commands finish there, their queued commands are moved exactly
// once, an affinity key pinned to a kept session keeps it, one pinned to a
// retired session is pinned anew. Growing by 1 relaunches a retired one.
func TestPoolGrowShrink(t *testing.T) {
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
	if _, err := p.Grow(ctx(t), 2, 0); err != nil {
		t.Fatal(err)
	}
	if m, _ := p.Members(); len(m) != 4 || m[3] != "s03" || p.Config().Size != 4 {
		t.Fatalf("members after grow: %v (size %d)", m, p.Config().Size)
	}
	gate := filepath.Join(t.TempDir(), "gate")
	var gates []*master.Command
	for _, name := range p.SessionNames() {
		s, _ := p.session(name)
		c, err := s.Submit(ctx(t), fmt.Sprintf("while {![file exists {%s}]} {after 10}", gate), master.SubmitOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for claimedCount(s) == 0 {
			time.Sleep(10 * time.Millisecond)
		}
		gates = append(gates, c)
	}
	// Keys pinned to s00 (kept: loaded most) and s03 (retired).
	writePin := func(key, session string) {
		if _, err := p.writePin(key, session, true); err != nil {
			t.Fatal(err)
		}
	}
	writePin("keep", "s00")
	writePin("moves", "s03")
	side := filepath.Join(t.TempDir(), "side")
	var pcs []*Command
	for i := 0; i < 12; i++ {
		o := SubmitOptions{}
		switch i {
		case 0, 1, 2:
			o.Affinity = "keep"
		case 3:
			o.Affinity = "moves"
		}
		pc, err := p.Submit(ctx(t), fmt.Sprintf("set f [open {%s} a]; puts $f %d; close $f", side, i), o)
		if err != nil {
			t.Fatal(err)
		}
		pcs = append(pcs, pc)
	}
	for i := 0; i < 3; i++ { // s00 loaded most: it stays.
		if _, err := p.Submit(ctx(t), "expr 1", SubmitOptions{Affinity: "keep"}); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan struct{})
	go func() { // The gates open once the retired sessions were asked to stop.
		time.Sleep(time.Second)
		_ = writeFile(gate)
		close(done)
	}()
	stops, rep, err := p.Shrink(ctx(t), 2, launch.StopOptions{Grace: 20 * time.Second})
	<-done
	if err != nil {
		t.Fatal(err)
	}
	// Loads: s00 7, the others 4 each (least-loaded submission; ties
	// retire the highest names). A different spreading of the submissions
	// may retire s01, never s00.
	if len(stops) != 2 || stops[0].Session == "s00" || stops[1].Session == "s00" {
		t.Fatalf("retired %+v", stops)
	}
	kept := map[string]bool{"s00": true, "s01": true, "s02": true, "s03": true}
	for _, s := range stops {
		delete(kept, s.Session)
	}
	for _, s := range stops {
		if s.Report.Step != launch.StepStopRequest {
			t.Errorf("%s: %+v", s.Session, s.Report)
		}
	}
	t.Logf("%d moved", len(rep.Moved))
	for _, m := range rep.Moved {
		if !kept[m.To] {
			t.Errorf("moved to %s", m.To)
		}
	}
	if m, r := p.Members(); len(m) != 2 || len(r) != 2 || p.Config().Size != 2 {
		t.Errorf("members %v retired %v size %d", m, r, p.Config().Size)
	}
	for i, c := range gates { // Each gated command finished where it ran.
		if r, err := p.WaitCommand(ctx(t), c); err != nil || r.Status != protocol.StatusOK {
			t.Errorf("gate %d: %v %v", i, r, err)
		}
	}
	for _, pc := range pcs {
		if r, err := pc.Wait(ctx(t)); err != nil || r.Status != protocol.StatusOK {
			t.Errorf("%s: %v %v", pc.ID, r, err)
		}
	}
	ran := countLines(t, side)
	for i := range pcs {
		if ran[fmt.Sprint(i)] != 1 {
			t.Errorf("command %d ran %d times", i, ran[fmt.Sprint(i)])
		}
	}
	if pin, err := p.readPin("keep"); err != nil || pin.Session != "s00" {
		t.Errorf("keep pinned to %+v %v, want s00", pin, err)
	}
	if pin, err := p.readPin("moves"); err != nil || !kept[pin.Session] {
		t.Errorf("moves pinned to %+v %v, want a kept session", pin, err)
	}
	res, err := p.Grow(ctx(t), 1, 0)
	if err != nil || len(res) != 1 || res[0].Session != stops[0].Session || res[0].Result.Info.Launches != 2 {
		t.Fatalf("grow by 1 after the shrink: %+v %v", res, err)
	}
}

func writeFile(path string) error { return os.WriteFile(path, nil, 0o600) }

// countLines counts the lines of a side-effect file.
func countLines(t *testing.T, path string) map[string]int {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, l := range strings.Fields(string(b)) {
		n[l]++
	}
	return n
}

// TestPoolConcurrentGrow: two grows by 1 at once, from two handles on the
// pool as two processes would: the pool gains exactly what
// they report as grown, and both grow (the second waits for the first and
// takes the next name); pool.json's size says so too.
func TestPoolConcurrentGrow(t *testing.T) {
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
	type grown struct {
		res []SessionLaunch
		err error
	}
	out := make(chan grown, 2)
	for i := 0; i < 2; i++ {
		go func() {
			q, err := Open(dir)
			if err != nil {
				out <- grown{err: err}
				return
			}
			res, err := q.Grow(ctx(t), 1, 0)
			out <- grown{res, err}
		}()
	}
	reported := map[string]bool{}
	for i := 0; i < 2; i++ {
		g := <-out
		for _, r := range g.res {
			if r.Err == nil {
				if reported[r.Session] {
					t.Errorf("%s reported grown twice", r.Session)
				}
				reported[r.Session] = true
			}
		}
		if g.err != nil {
			t.Logf("a grow said: %v", g.err)
		}
	}
	members, _ := p.Members()
	if len(members) != 1+len(reported) {
		t.Errorf("members %v, but the grows reported %v grown", members, reported)
	}
	if len(reported) != 2 {
		t.Errorf("grown %v, want two sessions", reported)
	}
	q, _ := Open(dir)
	if q.Config().Size != len(members) {
		t.Errorf("pool.json size %d, members %v", q.Config().Size, members)
	}
}

// TestPoolShrinkKeptSessionDies: pool shrink --to 1 whose kept session's
// runner is killed (kill -9, no respawn) while it retires the other ends
// with a clear outcome instead of retrying for ever: runner
// not alive, naming the commands that stay queued and where; nothing is
// lost (they are still queued in the retired session).
func TestPoolShrinkKeptSessionDies(t *testing.T) {
	testenv.Slow(t, "real runners racing for seconds")
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
	queue := func(name string, n int) {
		s, _ := p.session(name)
		if _, err := s.Submit(ctx(t), fmt.Sprintf("while {![file exists {%s}]} {after 10}", gate), master.SubmitOptions{}); err != nil {
			t.Fatal(err)
		}
		for claimedCount(s) == 0 {
			time.Sleep(10 * time.Millisecond)
		}
		for i := 0; i < n; i++ {
			c, err := s.Submit(ctx(t), "expr 1", master.SubmitOptions{})
			if err != nil {
				t.Fatal(err)
			}
			old := time.Now().Add(-time.Minute) // Old enough for a mover at once.
			os.Chtimes(filepath.Join(dir, name, protocol.DirQueue, c.Name), old, old)
		}
	}
	queue("s00", 5) // Loaded most: kept.
	queue("s01", 3) // Retired: its 3 queued commands must move to s00.
	p.Progress = func(line string) {
		if strings.HasPrefix(line, "shrinking") {
			killLaunched(t, filepath.Join(dir, "s00")) // The kept session dies, as kill -9 does.
		}
	}
	c, cancel := context.WithTimeout(ctx(t), 3*time.Minute)
	defer cancel()
	_, _, err = p.Shrink(c, 1, launch.StopOptions{Grace: time.Second})
	if c.Err() != nil || !errors.Is(err, master.ErrRunnerNotAlive) || !strings.Contains(err.Error(), "s01") {
		t.Fatalf("shrink: %v (context: %v), want runner not alive naming s01", err, c.Err())
	}
	t.Logf("shrink said: %v", err)
	if n := len(commandsIn(filepath.Join(dir, "s01", protocol.DirQueue))) + len(commandsIn(filepath.Join(dir, "s01", DirMoved))); n != 3 {
		t.Errorf("%d commands left in s01's queue/ and moved/, want the 3 it had", n)
	}
}

// TestPoolConcurrentShrinkBy: two shrinks by 1 at once (master pool shrink
// --by 1 twice) retire two sessions, the members being counted under the
// pool's resize lock, not before it.
func TestPoolConcurrentShrinkBy(t *testing.T) {
	needTool(t, "tclsh")
	dir := filepath.Join(t.TempDir(), "pool")
	p, _, err := Start(ctx(t), dir, Options{Size: 3, Via: "local", RunnerArgs: []string{"--heartbeat", "200ms", "--kill-grace", "1s"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, name := range p.SessionNames() {
			killLaunched(t, filepath.Join(dir, name))
		}
	})
	out := make(chan []SessionStop, 2)
	for i := 0; i < 2; i++ {
		go func() {
			q, err := Open(dir)
			if err != nil {
				t.Error(err)
				out <- nil
				return
			}
			stops, _, err := q.ShrinkBy(ctx(t), 1, launch.StopOptions{Grace: time.Second})
			if err != nil {
				t.Errorf("shrink: %v", err)
			}
			out <- stops
		}()
	}
	retired := 0
	for i := 0; i < 2; i++ {
		retired += len(<-out)
	}
	members, _ := p.Members()
	if retired != 2 || len(members) != 1 {
		t.Errorf("retired %d, members %v; want 2 retired, 1 member", retired, members)
	}
}

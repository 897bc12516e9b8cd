package pool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/internal/sessioncheck"
	"github.com/skillpilot/skillpilot/internal/sessionio"
	"github.com/skillpilot/skillpilot/internal/testenv"
	"github.com/skillpilot/skillpilot/internal/testrunner"
	"github.com/skillpilot/skillpilot/launch"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
	"github.com/skillpilot/skillpilot/sched"
)

// runnerIn runs an in-process runner on dir until the test ends.
func runnerIn(t *testing.T, dir string) {
	t.Helper()
	testrunner.StartChecked(t, dir, sessioncheck.Options{AllowQueued: true})
	if _, err := master.WaitReady(ctx(t), dir, master.WaitOptions{}); err != nil {
		t.Fatal(err)
	}
}

// newPoolDir writes pool.json and empty session directories.
func newPoolDir(t *testing.T, names ...string) (*Pool, string) {
	t.Helper()
	pool := t.TempDir()
	os.WriteFile(filepath.Join(pool, FilePool), []byte(`{"protocol_version":1,"size":3,"via":"local","max_respawns":3}`), 0o600)
	for _, n := range names {
		for _, d := range protocol.Dirs {
			os.MkdirAll(filepath.Join(pool, n, d), 0o700)
		}
	}
	p, err := Open(pool)
	if err != nil {
		t.Fatal(err)
	}
	return p, pool
}

// queueSideEffects queues n commands in dir whose payload appends its
// cmd_id to side, dated old enough for a mover.
func queueSideEffects(t *testing.T, dir, side string, n int) []*master.Command {
	t.Helper()
	s, err := master.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var cmds []*master.Command
	old := time.Now().Add(-time.Minute)
	for i := 0; i < n; i++ {
		id := master.NewCmdID()
		c, err := s.Submit(ctx(t), fmt.Sprintf("set f [open {%s} a]; puts $f %s; close $f", side, id), master.SubmitOptions{CmdID: id})
		if err != nil {
			t.Fatal(err)
		}
		os.Chtimes(filepath.Join(dir, protocol.DirQueue, c.Name), old, old)
		cmds = append(cmds, c)
	}
	return cmds
}

// checkExactlyOnce: every command has one result in the whole pool (found
// by following forwards), ran at most once, and ran once if its result is ok.
func checkExactlyOnce(t *testing.T, pool, side string, cmds []*master.Command) map[string]*protocol.Result {
	t.Helper()
	byID := map[string]*protocol.Result{}
	for _, c := range cmds {
		r, err := c.Wait(ctx(t), master.WaitOptions{})
		if r == nil {
			t.Fatalf("%s: no result: %v", c.ID, err)
		}
		byID[c.ID] = r
	}
	results := map[string]int{}
	for _, name := range mustSessions(t, pool) {
		for _, n := range commandsIn(filepath.Join(pool, name, protocol.DirResult)) {
			_, id, _ := protocol.ParseCommandName(n)
			results[id]++
		}
		if left := commandsIn(filepath.Join(pool, name, DirMoved)); len(left) > 0 {
			t.Errorf("%s: moves left unfinished: %v", name, left)
		}
		names, _ := os.ReadDir(filepath.Join(pool, name, protocol.DirQueue))
		for _, e := range names {
			if strings.HasPrefix(e.Name(), ".mv_") {
				t.Errorf("%s: staged file left: %s", name, e.Name())
			}
		}
	}
	b, _ := os.ReadFile(side)
	ran := map[string]int{}
	for _, l := range strings.Fields(string(b)) {
		ran[l]++
	}
	for _, c := range cmds {
		r := byID[c.ID]
		if results[c.ID] != 1 {
			t.Errorf("%s: %d results", c.ID, results[c.ID])
		}
		if ran[c.ID] > 1 || (r.Status == protocol.StatusOK && ran[c.ID] != 1) {
			t.Errorf("%s: ran %d times, result %s", c.ID, ran[c.ID], r.Status)
		}
	}
	return byID
}

func mustSessions(t *testing.T, pool string) []string {
	p, err := Open(pool)
	if err != nil {
		t.Fatal(err)
	}
	return p.SessionNames()
}

// Many movers at once, and the dead session's own runner coming back in
// the middle: every queued command runs exactly once, somewhere.
func TestPoolMoveExactlyOnce(t *testing.T) {
	testenv.Slow(t, "real runners racing for seconds")
	p, pool := newPoolDir(t, "s00", "s01", "s02")
	side := filepath.Join(t.TempDir(), "side")
	runnerIn(t, filepath.Join(pool, "s01"))
	runnerIn(t, filepath.Join(pool, "s02"))
	cmds := queueSideEffects(t, filepath.Join(pool, "s00"), side, 300)
	var wg sync.WaitGroup
	var mu sync.Mutex
	moved := 0
	allDone := make(chan struct{})
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q, _ := Open(pool) // A mover of its own, as another process would be.
			for k := 0; k < 20; k++ {
				rep, err := q.Heal(ctx(t))
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				moved += len(rep.Moved)
				mu.Unlock()
			}
		}()
	}
	go func() { wg.Wait(); close(allDone) }()
	// s00's runner starts once the movers are at work (the first forward
	// record is there: a start before any of them looked would leave
	// nothing to move), and its claims then race theirs.
	finished := func() bool {
		select {
		case <-allDone:
			return true
		default:
			return false
		}
	}
	for len(commandsIn(filepath.Join(pool, "s00", sessionio.DirForward))) == 0 && !finished() {
		time.Sleep(time.Millisecond)
	}
	runnerIn(t, filepath.Join(pool, "s00"))
	<-allDone
	byID := checkExactlyOnce(t, pool, side, cmds)
	fwds := commandsIn(filepath.Join(pool, "s00", sessionio.DirForward))
	if len(fwds) != moved || moved == 0 {
		t.Errorf("%d forwards, %d moves reported", len(fwds), moved)
	}
	ranHome := 0
	for _, c := range cmds {
		if byID[c.ID].Status != protocol.StatusOK {
			t.Errorf("%s: %s", c.ID, byID[c.ID].Status)
		}
		if _, err := os.Lstat(filepath.Join(pool, "s00", protocol.DirResult, c.Name)); err == nil {
			ranHome++
		}
	}
	t.Logf("%d moved, %d ran in the dead session's next runner", moved, ranHome)
	if len(fwds)+ranHome != len(cmds) {
		t.Errorf("moved %d + ran at home %d != %d", len(fwds), ranHome, len(cmds))
	}
	_ = p
}

// A mover that died at each step leaves work the next Heal finishes, once.
func TestPoolMoveCrashRecovery(t *testing.T) {
	p, pool := newPoolDir(t, "s00", "s01")
	side := filepath.Join(t.TempDir(), "side")
	runnerIn(t, filepath.Join(pool, "s01"))
	cmds := queueSideEffects(t, filepath.Join(pool, "s00"), side, 4)
	dead := filepath.Join(pool, "s00")
	claim := func(c *master.Command) {
		if ok, err := claimTo(dead, c.Name); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}
	views, _ := p.Views()
	var v SessionView
	for _, x := range views {
		if x.Name == "s00" {
			v = x
		}
	}
	// 0: died right after the claim.
	claim(cmds[0])
	// 1: died after the forward record, before the rename into queue/.
	claim(cmds[1])
	if f, err := p.stageMove(views, v, cmds[1].Name, nil, ""); err != nil || f == nil {
		t.Fatal(f, err)
	}
	// 2: died after the rename, before removing moved/<name>.
	claim(cmds[2])
	f, _ := p.stageMove(views, v, cmds[2].Name, nil, "")
	os.Rename(filepath.Join(pool, "s01", "queue", f.Stage), filepath.Join(pool, "s01", "queue", f.ToName))
	// 3: eight movers racing for one claimed command.
	claim(cmds[3])
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		own := append([]SessionView(nil), views...) // Each mover has its own view, as separate processes do.
		go func() { defer wg.Done(); p.stageMove(own, v, cmds[3].Name, nil, "") }()
	}
	wg.Wait()
	if _, err := p.Heal(ctx(t)); err != nil {
		t.Fatal(err)
	}
	byID := checkExactlyOnce(t, pool, side, cmds)
	for _, c := range cmds {
		if byID[c.ID].Status != protocol.StatusOK {
			t.Errorf("%s: %+v", c.ID, byID[c.ID])
		}
		var fw sessionio.Forward
		b, err := os.ReadFile(filepath.Join(dead, sessionio.DirForward, c.Name))
		if err != nil || json.Unmarshal(b, &fw) != nil || fw.ToSession != "../s01" || fw.CmdID != c.ID {
			t.Errorf("forward of %s: %s %v", c.Name, b, err)
		}
	}
	// The moved command keeps its cmd_id and records where it came from.
	r := byID[cmds[0].ID]
	var moved map[string]any
	// Its file reaches archive/ just after its result appears (PROTOCOL.md,
	// command_path), and it may be the last command s01 ran: wait for it.
	archived := filepath.Join(pool, "s01", protocol.DirArchive, protocol.CommandName(r.Seq, r.CmdID))
	var b []byte
	for deadline := time.Now().Add(longWait); ; time.Sleep(10 * time.Millisecond) {
		var err error
		if b, err = os.ReadFile(archived); err == nil || time.Now().After(deadline) {
			break
		}
	}
	json.Unmarshal(b, &moved)
	if mf, _ := moved["moved_from"].(map[string]any); mf["name"] != cmds[0].Name || mf["session"] != "../s00" {
		t.Errorf("moved command file: %s", b)
	}
}

func claimTo(dead, name string) (bool, error) {
	os.MkdirAll(filepath.Join(dead, DirMoved), 0o700)
	return true, os.Rename(filepath.Join(dead, protocol.DirQueue, name), filepath.Join(dead, DirMoved, name))
}

// Commands with an affinity key follow the key's new pin when they move.
func TestPoolMoveKeepsAffinity(t *testing.T) {
	p, pool := newPoolDir(t, "s00", "s01", "s02")
	runnerIn(t, filepath.Join(pool, "s01"))
	runnerIn(t, filepath.Join(pool, "s02"))
	dead, _ := master.Open(filepath.Join(pool, "s00"))
	var cmds []*master.Command
	for i := 0; i < 6; i++ {
		c, err := dead.Submit(ctx(t), "expr 1", master.SubmitOptions{Extra: map[string]any{"affinity": "corner_ss"}})
		if err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-time.Minute)
		os.Chtimes(filepath.Join(pool, "s00", protocol.DirQueue, c.Name), old, old)
		cmds = append(cmds, c)
	}
	writePinFile(t, pool, "corner_ss", "s00")
	rep, err := p.Heal(ctx(t))
	if err != nil || len(rep.Moved) != 6 {
		t.Fatalf("%+v %v", rep, err)
	}
	to := map[string]bool{}
	for _, m := range rep.Moved {
		to[m.To] = true
	}
	pin, _ := p.readPin("corner_ss")
	if len(to) != 1 || !to[pin.Session] {
		t.Errorf("moved to %v, pin %s", to, pin.Session)
	}
	for _, c := range cmds {
		if _, err := c.Wait(ctx(t), master.WaitOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// A pool of launched local runners: one runner is killed (SIGKILL) while
// every session holds a claimed command (blocked on a gate file) and has
// commands queued. With respawn the session is relaunched; without, its
// queued commands are moved and its claimed command is reported stuck
// until a runner is launched on it by hand. Either way every command ends
// with exactly one result.
func TestPoolLocalKill(t *testing.T) {
	testenv.Slow(t, "real runners racing for seconds")
	for _, respawn := range []bool{true, false} {
		t.Run(fmt.Sprintf("respawn=%v", respawn), func(t *testing.T) { poolLocalKill(t, respawn) })
	}
}

func poolLocalKill(t *testing.T, respawn bool) {
	dir := filepath.Join(t.TempDir(), "pool")
	runnerArgs := []string{"--heartbeat", "200ms", "--kill-grace", "1s"}
	p, res, err := Start(ctx(t), dir, Options{Size: 3, Via: "local", Respawn: respawn, RunnerArgs: runnerArgs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, name := range p.SessionNames() {
			killLaunched(t, filepath.Join(dir, name))
		}
	})
	if len(res) != 3 || res[0].Err != nil || p.Config().Runner == "" {
		t.Fatalf("%+v %+v", res, p.Config())
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
	side := filepath.Join(t.TempDir(), "side")
	var cmds []*master.Command
	var pcs []*Command
	for i := 0; i < 60; i++ {
		id := master.NewCmdID()
		pc, err := p.Submit(ctx(t), fmt.Sprintf("set f [open {%s} a]; puts $f %s; close $f", side, id), SubmitOptions{SubmitOptions: master.SubmitOptions{CmdID: id}})
		if err != nil {
			t.Fatal(err)
		}
		pcs, cmds = append(pcs, pc), append(cmds, pc.Command)
	}
	victim := filepath.Join(dir, "s01")
	queued := len(commandsIn(filepath.Join(victim, protocol.DirQueue)))
	li, _ := launch.ReadLaunch(victim)
	if err := killJob(li); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(gate, nil, 0o600)
	for _, pc := range pcs {
		if _, err := pc.Wait(ctx(t)); err != nil {
			t.Fatalf("%s: %v", pc.ID, err)
		}
	}
	_, err = p.WaitCommand(ctx(t), gates[1])
	if !respawn {
		// Claimed by a dead session that nobody relaunches: reported, then
		// settled by the next runner on it.
		if !errors.Is(err, master.ErrRunnerNotAlive) || !strings.Contains(err.Error(), "claimed by s01") {
			t.Fatalf("stuck command: %v", err)
		}
		launchLocal(t, victim, func(o *launch.Options) { o.RunnerArgs = runnerArgs })
		_, err = p.WaitCommand(ctx(t), gates[1])
	}
	if !errorsIsRestarted(err) {
		t.Fatalf("the killed session's claimed command: %v", err)
	}
	checkExactlyOnce(t, dir, side, cmds)
	sts, err := p.Status(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sts {
		t.Logf("%s alive=%v queue=%d done=%d moved=%d %s", s.Name, s.Alive, s.Queue, s.Done, s.MovedOut, s.Note)
		if s.Name != "s01" {
			continue
		}
		if respawn && (s.Launch == nil || s.Launch.Launches != 2) {
			t.Errorf("s01 not respawned: %+v", s.Launch)
		}
		if !respawn && s.MovedOut != queued {
			t.Errorf("s01 had %d queued, %d moved out", queued, s.MovedOut)
		}
	}
	stops, err := p.Stop(ctx(t), launch.StopOptions{})
	if err != nil || len(stops) != 3 {
		t.Fatalf("%+v %v", stops, err)
	}
}

func errorsIsRestarted(err error) bool {
	var re *master.ResultError
	return errors.As(err, &re) && re.Result.ExitReason == protocol.ReasonRunnerRestarted
}

func killJob(li *launch.Info) error {
	return (sched.Local{}).Cancel(context.Background(), nil, li.JobID, true)
}

// A moved command is found and read through the dead session it was
// queued in (master wait / output on D), and the Python and Tcl masters
// follow the forward too.
func TestPoolMovedCommandLookups(t *testing.T) {
	p, pool := newPoolDir(t, "s00", "s01")
	runnerIn(t, filepath.Join(pool, "s01"))
	dead, _ := master.Open(filepath.Join(pool, "s00"))
	c, err := dead.Submit(ctx(t), "puts moved-out; expr 6*7", master.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Minute)
	os.Chtimes(filepath.Join(pool, "s00", protocol.DirQueue, c.Name), old, old)
	if rep, err := p.Heal(ctx(t)); err != nil || len(rep.Moved) != 1 {
		t.Fatalf("%+v %v", rep, err)
	}
	found, err := dead.Command(c.ID)
	if err != nil || found.Name != c.Name {
		t.Fatalf("lookup in the dead session: %+v %v", found, err)
	}
	r, err := found.Wait(ctx(t), master.WaitOptions{})
	if err != nil || *r.Value != "42" {
		t.Fatalf("%+v %v", r, err)
	}
	if out, err := found.Output(0, 0); err != nil || string(out) != "moved-out\n" {
		t.Fatalf("output %q %v", out, err)
	}
	if w, final := p.Locate(c); w.Session != "s01" || w.State != "done" || final.Session().Dir() != filepath.Join(pool, "s01") {
		t.Errorf("locate: %+v", w)
	}
	for _, lang := range []string{"python3", "tclsh"} {
		needTool(t, lang)
		var cmd *exec.Cmd
		if lang == "python3" {
			cmd = exec.Command(testenv.Python3(), "-c", `import sys, json
sys.path.insert(0, "clients/python")
import skillpilot_pool as pool
r = pool.pool_wait(sys.argv[1], {"session": "s00", "name": sys.argv[2], "cmd_id": "x"}, timeout=60)
print(r["status"], r["value"])`, pool, c.Name)
		} else {
			f := filepath.Join(t.TempDir(), "w.tcl")
			os.WriteFile(f, []byte(`source clients/tcl/skillpilot_pool.tcl
set r [skillpilot::pool_wait [lindex $argv 0] [dict create session s00 name [lindex $argv 1] cmd_id x] 60000]
puts "[dict get $r status] [dict get $r value]"`), 0o600)
			cmd = exec.Command("tclsh", f, pool, c.Name)
		}
		cmd.Dir = ".."
		out, err := cmd.CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "ok 42" {
			t.Errorf("%s: %v %s", lang, err, out)
		}
	}
}

// Python and Tcl pool_submit against live runners: the affinity key keeps
// the commands together, the file carries it, the results come back.
func TestPoolSubmitInterop(t *testing.T) {
	testenv.Slow(t, "real runners racing for seconds")
	_, pool := newPoolDir(t, "s00", "s01", "s02")
	runnerIn(t, filepath.Join(pool, "s01"))
	runnerIn(t, filepath.Join(pool, "s02"))
	for _, lang := range []string{"python3", "tclsh"} {
		needTool(t, lang)
		var cmd *exec.Cmd
		if lang == "python3" {
			cmd = exec.Command(testenv.Python3(), "-c", `import sys
sys.path.insert(0, "clients/python")
import skillpilot_pool as pool
ws = [pool.pool_submit(sys.argv[1], "expr %d*2" % i, affinity="grp") for i in range(5)]
assert len({w["session"] for w in ws}) == 1, ws
assert all(isinstance(w["resume_cursor"], int) for w in ws), ws
rs = [pool.pool_wait(sys.argv[1], w, timeout=60) for w in ws]
assert [r["value"] for r in rs] == ["0", "2", "4", "6", "8"], rs
print(ws[0]["session"])`, pool)
		} else {
			f := filepath.Join(t.TempDir(), "s.tcl")
			os.WriteFile(f, []byte(`source clients/tcl/skillpilot_pool.tcl
set pool [lindex $argv 0]
set sessions {}
for {set i 0} {$i < 5} {incr i} {
    set w [skillpilot::pool_submit $pool "expr {$i*3}" -affinity grp2]
    if {![string is wideinteger -strict [dict get $w resume_cursor]]} { error "no resume_cursor: $w" }
    set r [skillpilot::pool_wait $pool $w 60000]
    if {[dict get $r value] != $i*3} { error "bad result $r" }
    lappend sessions [dict get $w session]
}
if {[llength [lsort -unique $sessions]] != 1} { error "split: $sessions" }
puts [lindex $sessions 0]`), 0o600)
			cmd = exec.Command("tclsh", f, pool)
		}
		cmd.Dir = ".."
		out, err := cmd.CombinedOutput()
		session := strings.TrimSpace(string(out))
		if err != nil || (session != "s01" && session != "s02") {
			t.Fatalf("%s: %v %s", lang, err, out)
		}
		names := commandsIn(filepath.Join(pool, session, protocol.DirArchive))
		b, _ := os.ReadFile(filepath.Join(pool, session, protocol.DirArchive, names[len(names)-1]))
		var m map[string]any
		if json.Unmarshal(b, &m) != nil || !strings.HasPrefix(fmt.Sprint(m["affinity"]), "grp") {
			t.Errorf("%s: command file %s", lang, b)
		}
	}
}

// A pool started with --respawn and then stopped with pool stop stays
// stopped: a heal pass (docs/farms.md: keep `pool heal --every` beside the flow)
// must not relaunch the sessions the user stopped. A session stopped that
// way is relaunched by a launch by hand, which clears the mark, and a
// session that dies without a stop is still respawned.
func TestPoolHealDoesNotRespawnStopped(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pool")
	runnerArgs := []string{"--heartbeat", "200ms", "--kill-grace", "1s"}
	p, _, err := Start(ctx(t), dir, Options{Size: 2, Via: "local", Respawn: true, RunnerArgs: runnerArgs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, name := range p.SessionNames() {
			killLaunched(t, filepath.Join(dir, name))
		}
	})
	if _, err := p.Stop(ctx(t), launch.StopOptions{}); err != nil {
		t.Fatal(err)
	}
	rep, err := p.Heal(ctx(t))
	if err != nil || len(rep.Respawned) != 0 {
		t.Fatalf("heal after pool stop respawned %v (err %v)", rep.Respawned, err)
	}
	for _, name := range p.SessionNames() {
		li, err := launch.ReadLaunch(filepath.Join(dir, name))
		if err != nil || li.Launches != 1 || li.StoppedAt == nil {
			t.Fatalf("%s: %+v %v", name, li, err)
		}
	}
	// A launch by hand clears the mark; a kill (no stop) is respawned.
	s00 := filepath.Join(dir, "s00")
	launchLocal(t, s00, func(o *launch.Options) { o.RunnerArgs = runnerArgs })
	li, _ := launch.ReadLaunch(s00)
	if li.StoppedAt != nil || li.Launches != 2 {
		t.Fatalf("relaunched by hand: %+v", li)
	}
	if err := killJob(li); err != nil {
		t.Fatal(err)
	}
	if _, err := launch.WaitJobGone(ctx(t), sched.Local{}, nil, li.JobID); err != nil {
		t.Fatal(err)
	}
	for {
		rep, err = p.Heal(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Respawned) > 0 {
			break
		}
		time.Sleep(100 * time.Millisecond) // Until heal judges s00 dead.
	}
	if fmt.Sprint(rep.Respawned) != "[s00]" {
		t.Fatalf("respawned %v, want [s00]", rep.Respawned)
	}
}

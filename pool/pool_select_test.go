package pool

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gofrs/flock"
	"github.com/skillpilot/skillpilot/internal/sessionio"
	"github.com/skillpilot/skillpilot/internal/testenv"
	"github.com/skillpilot/skillpilot/launch"
	"github.com/skillpilot/skillpilot/protocol"
	"github.com/skillpilot/skillpilot/sched"
)

func TestLeastLoaded(t *testing.T) {
	v := func(name string, phase protocol.Phase, alive bool, q, in int) SessionView {
		return SessionView{Name: name, Phase: phase, Alive: alive, Queue: q, Inflight: in}
	}
	views := []SessionView{
		v("s00", protocol.PhaseIdle, true, 3, 0),
		v("s01", protocol.PhaseBusy, true, 1, 1),
		v("s02", protocol.PhaseIdle, true, 2, 0),
		v("s03", protocol.PhaseIdle, false, 0, 0),
		v("s04", protocol.PhaseStarting, true, 0, 0),
	}
	if got, _ := leastLoaded(views, ""); got.Name != "s01" { // tie 2-2 with s02: smaller name
		t.Errorf("got %s", got.Name)
	}
	if got, _ := leastLoaded(views, "s01"); got.Name != "s02" {
		t.Errorf("except s01: got %s", got.Name)
	}
	// Only a starting session is alive: it is taken rather than nothing.
	if got, ok := leastLoaded([]SessionView{views[3], views[4]}, ""); !ok || got.Name != "s04" {
		t.Errorf("fallback: %s %v", got.Name, ok)
	}
	if _, ok := leastLoaded([]SessionView{views[3]}, ""); ok {
		t.Error("a dead session was picked")
	}
}

// selectionFixture builds a pool of sessions without runners whose state
// the test controls (see PROTOCOL.md, "Pools"): it is what the Go, Python
// and Tcl pickers are compared on. Sessions meant to look alive have their
// runner.lock held by the test (Go probes it on a local filesystem).
//
//	s00 idle, fresh heartbeat, 3 queued             load 3
//	s01 busy, fresh, 1 queued + 1 claimed           load 2  <- least loaded
//	s02 idle, heartbeat 5 s old (late: not chosen)  load 0
//	s03 stopped                                      load 0
//	s04 starting, fresh (alive, not serving)         load 0
//	s05 idle, fresh, 1 queued + 1 claimed with a result in place: load 1 + 0
//	    but its heartbeat is 20 s old: dead
func selectionFixture(t *testing.T) string {
	t.Helper()
	pool := t.TempDir()
	ages := map[string]time.Duration{}
	fixtureAges[pool] = ages
	os.WriteFile(filepath.Join(pool, FilePool), []byte(`{"protocol_version":1,"size":6,"via":"local"}`), 0o600)
	now := time.Now()
	mk := func(name string, phase protocol.Phase, age time.Duration, queued, claimed int, claimedDone bool) {
		dir := filepath.Join(pool, name)
		for _, d := range protocol.Dirs {
			if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
				t.Fatal(err)
			}
		}
		st := protocol.State{ProtocolVersion: 1, Phase: phase, SessionID: "session_" + name, Hostname: "h", Kind: protocol.KindTcl}
		hb := protocol.Heartbeat{ProtocolVersion: 1, Counter: 7, IntervalMS: 1000, Phase: phase, SessionID: "session_" + name}
		b, _ := json.Marshal(st)
		os.WriteFile(filepath.Join(dir, protocol.FileState), b, 0o600)
		b, _ = json.Marshal(hb)
		os.WriteFile(filepath.Join(dir, protocol.FileHeartbeat), b, 0o600)
		os.Chtimes(filepath.Join(dir, protocol.FileHeartbeat), now.Add(-age), now.Add(-age))
		ages[name] = age
		for i := 0; i < queued; i++ {
			os.WriteFile(filepath.Join(dir, protocol.DirQueue, protocol.CommandName(int64(10+i), "q"+name+string(rune('a'+i)))), []byte("{}"), 0o600)
		}
		for i := 0; i < claimed; i++ {
			n := protocol.CommandName(int64(1+i), "c"+name+string(rune('a'+i)))
			os.WriteFile(filepath.Join(dir, protocol.DirInflight, n), []byte("{}"), 0o600)
			if claimedDone {
				os.WriteFile(filepath.Join(dir, protocol.DirResult, n), []byte("{}"), 0o600)
			}
		}
		os.WriteFile(filepath.Join(dir, "queue", "notes.txt"), nil, 0o600) // Not a command.
		if phase != protocol.PhaseStopped {
			l := flock.New(filepath.Join(dir, protocol.FileLock))
			if ok, err := l.TryLock(); !ok || err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Unlock() })
		}
	}
	mk("s00", protocol.PhaseIdle, 0, 3, 0, false)
	mk("s01", protocol.PhaseBusy, 0, 1, 1, false)
	mk("s02", protocol.PhaseIdle, 5*time.Second, 0, 0, false)
	mk("s03", protocol.PhaseStopped, 0, 0, 0, false)
	mk("s04", protocol.PhaseStarting, 0, 0, 0, false)
	mk("s05", protocol.PhaseIdle, 20*time.Second, 1, 1, true)
	os.MkdirAll(filepath.Join(pool, "s99-not-a-session"), 0o700)
	return pool
}

// fixtureAges holds each fixture's heartbeat ages, by pool directory.
var fixtureAges = map[string]map[string]time.Duration{}

// refreshHeartbeats sets the fixture's heartbeat mtimes again to their
// ages before now: a slow machine must not age the live sessions past the
// liveness window between the fixture and a pick in another process.
func refreshHeartbeats(pool string) {
	now := time.Now()
	for name, age := range fixtureAges[pool] {
		os.Chtimes(filepath.Join(pool, name, protocol.FileHeartbeat), now.Add(-age), now.Add(-age))
	}
}

func writePinFile(t *testing.T, pool, key, session string) {
	b, _ := json.Marshal(Pin{ProtocolVersion: 1, Key: key, Session: session, TS: protocol.Now()})
	os.MkdirAll(filepath.Join(pool, DirAffinity), 0o700)
	if err := os.WriteFile(filepath.Join(pool, DirAffinity, key+".json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// pickCase: an affinity key (or none), the pin to plant first (or none),
// and the session every master must choose.
type pickCase struct{ key, pin, want string }

var pickCases = []pickCase{
	{"", "", "s01"},      // least loaded serving session
	{"k-new", "", "s01"}, // a new key is pinned to it
	{"k0", "s00", "s00"}, // a pin to a live session is kept even if it is not the least loaded
	{"k3", "s03", "s01"}, // a pin to a stopped session moves
	{"k2", "s02", "s01"}, // ... and one to a session whose heartbeat is late
	{"k4", "s04", "s04"}, // a live session still starting keeps its pin
	{"k9", "s42", "s01"}, // a pin to a session that does not exist moves
}

func TestPoolPickFixture(t *testing.T) {
	pool := selectionFixture(t)
	p, err := Open(pool)
	if err != nil {
		t.Fatal(err)
	}
	views, err := p.Views()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][3]any{ // alive, dead, load
		"s00": {true, false, 3}, "s01": {true, false, 2}, "s02": {false, false, 0},
		"s03": {false, true, 0}, "s04": {true, false, 0}, "s05": {false, true, 1},
	}
	if len(views) != len(want) {
		t.Fatalf("%d views: %+v", len(views), views)
	}
	for _, v := range views {
		w := want[v.Name]
		if v.Alive != w[0] || v.Dead != w[1] || v.Load() != w[2] {
			t.Errorf("%s: alive %v dead %v load %d (%s), want %v", v.Name, v.Alive, v.Dead, v.Load(), v.Why, w)
		}
	}
	for _, tc := range pickCases {
		if tc.pin != "" {
			writePinFile(t, pool, tc.key, tc.pin)
		}
		got, err := p.pick(views, tc.key, "")
		if err != nil || got.Name != tc.want {
			t.Errorf("%+v: got %s %v", tc, got.Name, err)
		}
		if tc.key != "" {
			if pin, _ := p.readPin(tc.key); pin.Session != tc.want {
				t.Errorf("%+v: pin now %q", tc, pin.Session)
			}
		}
	}
}

// The Python and Tcl pickers choose what the Go one chooses.
func TestPoolPickInterop(t *testing.T) {
	testenv.Slow(t, "real runners racing for seconds")
	for _, lang := range []string{"python3", "tclsh"} {
		t.Run(lang, func(t *testing.T) {
			needTool(t, lang)
			pool := selectionFixture(t)
			for _, tc := range pickCases {
				if tc.pin != "" {
					writePinFile(t, pool, tc.key, tc.pin)
				}
				refreshHeartbeats(pool)
				got := runPick(t, lang, pool, tc.key)
				if got != tc.want {
					t.Errorf("%s %+v: got %q", lang, tc, got)
				}
				if tc.key != "" {
					p, _ := Open(pool)
					if pin, _ := p.readPin(tc.key); pin.Session != tc.want {
						t.Errorf("%s %+v: pin now %q", lang, tc, pin.Session)
					}
				}
			}
		})
	}
}

func runPick(t *testing.T, lang, pool, key string) string {
	t.Helper()
	var cmd *exec.Cmd
	if lang == "python3" {
		args := []string{"clients/python/skillpilot_pool.py", "pick", pool}
		if key != "" {
			args = append(args, key)
		}
		cmd = exec.Command(testenv.Python3(), args...)
	} else {
		script := `source [lindex $argv 0]; puts [skillpilot::pool_pick [lindex $argv 1] -affinity [lindex $argv 2]]`
		f := filepath.Join(t.TempDir(), "pick.tcl")
		os.WriteFile(f, []byte(script), 0o600)
		cmd = exec.Command("tclsh", f, "clients/tcl/skillpilot_pool.tcl", pool, key)
	}
	cmd.Dir = ".."
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", lang, err, out)
	}
	return strings.TrimSpace(string(out))
}

// With no session alive, every picker says so (Go: ErrRunnerNotAlive).
func TestPoolPickNoneAlive(t *testing.T) {
	pool := t.TempDir()
	os.WriteFile(filepath.Join(pool, FilePool), []byte(`{"protocol_version":1,"size":1,"via":"local"}`), 0o600)
	os.MkdirAll(filepath.Join(pool, "s00", "queue"), 0o700)
	p, _ := Open(pool)
	if _, err := p.Submit(context.Background(), "expr 1", SubmitOptions{}); err == nil || !strings.Contains(err.Error(), "no live session") {
		t.Fatalf("%v", err)
	}
	if _, err := p.Submit(context.Background(), "expr 1", SubmitOptions{Affinity: "bad/key"}); err == nil {
		t.Fatal("a bad affinity key was accepted")
	}
}

// A submit moves the queued commands of a dead session it judged to a live
// one, and does nothing else of a heal: it respawns nothing (a scheduler
// submission, seconds each), though pool.json says to and the dead
// session's job is gone (it ran a whole Heal inline, which
// relaunched it).
func TestSubmitRescuesQueuedWithoutAHeal(t *testing.T) {
	_, pool := newPoolDir(t, "s00", "s01")
	os.WriteFile(filepath.Join(pool, FilePool), []byte(`{"protocol_version":1,"size":2,"via":"local","respawn":true,"max_respawns":3}`), 0o600)
	p, err := Open(pool)
	if err != nil {
		t.Fatal(err)
	}
	runnerIn(t, filepath.Join(pool, "s00"))
	s01 := filepath.Join(pool, "s01")
	launchLocal(t, s01)
	li, err := launch.ReadLaunch(s01)
	if err != nil {
		t.Fatal(err)
	}
	if err := killJob(li); err != nil {
		t.Fatal(err)
	}
	if _, err := launch.WaitJobGone(ctx(t), sched.Local{}, nil, li.JobID); err != nil {
		t.Fatal(err)
	}
	side := filepath.Join(t.TempDir(), "side")
	stuck := queueSideEffects(t, s01, side, 2)
	var c *Command
	for {
		if c, err = p.Submit(ctx(t), "expr 1", SubmitOptions{}); err != nil || c.Session != "s00" {
			t.Fatalf("submit: %v, session %v", err, c)
		}
		if _, err := os.Stat(filepath.Join(s01, sessionio.DirForward, stuck[0].Name)); err == nil {
			break // s01 judged dead (its lock free once the killed runner is gone) and rescued.
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, sc := range stuck {
		if _, err := os.Stat(filepath.Join(s01, sessionio.DirForward, sc.Name)); err != nil {
			t.Errorf("%s not moved out of the dead s01: %v", sc.Name, err)
		}
	}
	if li, err := launch.ReadLaunch(s01); err != nil || li.Launches != 1 {
		t.Errorf("the submit respawned s01: %+v %v", li, err)
	}
	checkExactlyOnce(t, pool, side, stuck)
}

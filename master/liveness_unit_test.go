package master

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
)

// A new runner counts its heartbeats from 1 again and can show the very
// number a dead one stopped at: the counter is judged together with the
// session_id, so that is a change, not a heartbeat standing still.
func TestLivenessCounterKeyedBySession(t *testing.T) {
	s, dir := bareSession(t)
	s.io.AssumeNetworkFS() // Judge by the heartbeat alone, as on NFS.
	write := func(session string, counter int64) {
		st, _ := json.Marshal(protocol.State{ProtocolVersion: 1, Phase: protocol.PhaseIdle, SessionID: session})
		hb, _ := json.Marshal(protocol.Heartbeat{ProtocolVersion: 1, Counter: counter, SessionID: session,
			Phase: protocol.PhaseIdle, IntervalMS: 60000, Hostname: "h"})
		os.WriteFile(filepath.Join(dir, protocol.FileState), st, 0o600)
		os.WriteFile(filepath.Join(dir, protocol.FileHeartbeat), hb, 0o600)
	}
	write("old", 7)
	if l := s.observe(); l.alive {
		t.Fatalf("alive at the first look: %+v", l)
	}
	write("new", 7)
	if l := s.observe(); !l.alive {
		t.Fatalf("a new runner's heartbeat with the old counter was not taken as moving: %+v", l)
	}
}

func TestGraceAndWindow(t *testing.T) {
	for _, c := range []struct {
		base, interval, want time.Duration
	}{
		{0, 0, 10 * time.Second},                              // no heartbeat read yet: the default
		{0, time.Second, 10 * time.Second},                    // the default heartbeat
		{0, 500 * time.Millisecond, 10 * time.Second},         // ten intervals are shorter
		{0, 5 * time.Second, 50 * time.Second},                // a slow heartbeat: ten intervals
		{3 * time.Second, time.Second, 3 * time.Second},       // the caller's grace
		{time.Second, time.Second, 2250 * time.Millisecond},   // never under one window
		{time.Second, 10 * time.Millisecond, time.Second},     // an interval under 100 ms counts as 100 ms
		{0, 10 * time.Millisecond, DefaultWaitForRunner},      // likewise
		{20 * time.Second, 5 * time.Second, 20 * time.Second}, // the caller's, above a window
	} {
		if got := graceFor(c.base, c.interval); got != c.want {
			t.Errorf("graceFor(%v, %v) = %v, want %v", c.base, c.interval, got, c.want)
		}
	}
	if w := liveWindow(0); w != 2250*time.Millisecond {
		t.Errorf("liveWindow(0) = %v", w)
	}
}

// lateSession is a session on a "network" filesystem (the counter alone
// decides) whose heartbeat beats every 100 ms (window 450 ms) when beat is
// called.
func lateSession(t *testing.T) (*Session, func(counter int64)) {
	t.Helper()
	s, dir := bareSession(t)
	s.io.AssumeNetworkFS()
	st, _ := json.Marshal(protocol.State{ProtocolVersion: 1, Phase: protocol.PhaseIdle, SessionID: "sid"})
	os.WriteFile(filepath.Join(dir, protocol.FileState), st, 0o600)
	beat := func(counter int64) {
		hb, _ := json.Marshal(protocol.Heartbeat{ProtocolVersion: 1, Counter: counter, SessionID: "sid",
			Phase: protocol.PhaseIdle, IntervalMS: 100, Hostname: "h"})
		tmp := filepath.Join(dir, "state", ".hb")
		os.WriteFile(tmp, hb, 0o600)
		os.Rename(tmp, filepath.Join(dir, protocol.FileHeartbeat))
	}
	beat(1)
	return s, beat
}

// A request's check before it writes follows the rule of every wait
// (PROTOCOL.md section 8, "Giving up"): a heartbeat late by more than the
// window (450 ms here) but less than the grace is not a dead runner. Under
// the old rule the request answered "runner not alive" after one window.
func TestAwaitAliveOutlastsALateHeartbeat(t *testing.T) {
	s, beat := lateSession(t)
	s.WaitForRunner = time.Minute
	// The beats stop before the test's directory is removed (they wrote
	// into it while it was removed: "directory not empty", under load).
	stop, stopped := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(stop); <-stopped })
	go func() {
		defer close(stopped)
		wait := 1500 * time.Millisecond // Over three windows: late, not dead.
		for c := int64(2); c < 40; c++ {
			select {
			case <-stop:
				return
			case <-time.After(wait):
			}
			beat(c)
			wait = 100 * time.Millisecond
		}
	}()
	l, err := s.awaitAlive(t.Context())
	if err != nil {
		t.Fatalf("a live runner whose heartbeat was late answered: %v", err)
	}
	if !l.alive || l.state.SessionID != "sid" {
		t.Fatalf("look %+v", l)
	}
	// A status is a snapshot: the same late counter reads as not alive.
	s2, _ := lateSession(t)
	time.Sleep(50 * time.Millisecond)
	if alive, why := s2.alive(t.Context()); alive || !strings.Contains(why, "has not moved") {
		t.Fatalf("status of a counter that stands still: alive=%v %q", alive, why)
	}
}

// A counter that never moves ends the request's check with
// ErrRunnerNotAlive once the grace has passed, not after one window.
func TestAwaitAliveGivesUpAfterTheGrace(t *testing.T) {
	s, _ := lateSession(t)
	s.WaitForRunner = 1500 * time.Millisecond // Over three windows of 450 ms.
	start := time.Now()
	_, err := s.awaitAlive(t.Context())
	if !errors.Is(err, ErrRunnerNotAlive) {
		t.Fatalf("err = %v, want ErrRunnerNotAlive", err)
	}
	if took := time.Since(start); took < s.WaitForRunner {
		t.Fatalf("gave up after %v, before the grace of %v: %v", took, s.WaitForRunner, err)
	}
}

// bareSession opens a session directory with the protocol's directories
// and no runner: for tests that write the runner's files themselves. It
// returns the session and its directory.
func bareSession(t *testing.T) (*Session, string) {
	t.Helper()
	dir := t.TempDir()
	for _, d := range protocol.Dirs {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s, dir
}

package master

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/skillpilot/skillpilot/protocol"
)

// A new runner counts its heartbeats from 1 again and can show the very
// number a dead one stopped at: the counter is judged together with the
// session_id, so that is a change, not a heartbeat standing still.
func TestLivenessCounterKeyedBySession(t *testing.T) {
	dir := t.TempDir()
	for _, d := range protocol.Dirs {
		os.MkdirAll(filepath.Join(dir, d), 0o700)
	}
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	s.network = true // Judge by the heartbeat alone, as on NFS.
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

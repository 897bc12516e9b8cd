package pool

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skillpilot/skillpilot/launch"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
)

// claimOnDead queues a command in the pool's session name, which has no
// runner (dead: no state), and claims it as a runner would (queue/ to
// inflight/), then leaves it: a claimed command of a dead session.
func claimOnDead(t *testing.T, pool, name string) *master.Command {
	t.Helper()
	s, err := master.Open(filepath.Join(pool, name))
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Submit(ctx(t), "after 60000", master.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(pool, name, protocol.DirQueue, c.Name), filepath.Join(pool, name, protocol.DirInflight, c.Name)); err != nil {
		t.Fatal(err)
	}
	return c
}

// A pool wait ends at once for a command claimed by a dead session (no
// respawn) and for one whose session directory was deleted, with the
// classes, messages and context every master gives.
func TestPoolWaitDeadAndDeleted(t *testing.T) {
	p, pool := newPoolDir(t, "s00", "s01")
	c := claimOnDead(t, pool, "s00")
	_, err := p.WaitCommand(ctx(t), c)
	if !errors.Is(err, master.ErrRunnerNotAlive) || !strings.Contains(err.Error(), ClaimedDeadMessage(c.ID, "s00")) {
		t.Fatalf("claimed by a dead session: %v", err)
	}
	if got := master.ErrorContext(err); got["session"] != "s00" || got["cmd_id"] != c.ID || got["reason"] == "" {
		t.Errorf("context %v", got)
	}

	gone := claimOnDead(t, pool, "s01")
	if err := os.RemoveAll(filepath.Join(pool, "s01")); err != nil {
		t.Fatal(err)
	}
	_, err = p.WaitCommand(ctx(t), gone)
	if !errors.Is(err, master.ErrSessionMissing) || !strings.Contains(err.Error(), GoneMessage(gone.ID, "s01")) {
		t.Fatalf("deleted session: %v", err)
	}
	if code, exit := master.Classify(err); code != "session_missing" || exit != 5 {
		t.Errorf("classified %s %d", code, exit)
	}
	if got := master.ErrorContext(err); got["session"] != "s01" || got["cmd_id"] != gone.ID {
		t.Errorf("context %v", got)
	}
}

// pool status names a session whose directory is gone as missing, and one
// stopped on purpose as retired, not dead.
func TestPoolStatusMissingRetired(t *testing.T) {
	p, pool := newPoolDir(t, "s00", "s01", "s02")
	b, _ := json.Marshal(map[string]any{"protocol_version": 1, "via": "local", "job_id": "1@h:1", "launches": 1,
		"stopped_at": protocol.Now(), "stopped_by": "master pool shrink"})
	if err := os.WriteFile(filepath.Join(pool, "s02", launch.FileLaunch), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(pool, "s01")); err != nil {
		t.Fatal(err)
	}
	sts, err := p.Status(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]SessionStatus{}
	var order []string
	for _, s := range sts {
		got[s.Name] = s
		order = append(order, s.Name)
	}
	if strings.Join(order, " ") != "s00 s01 s02" {
		t.Fatalf("rows %v", order)
	}
	if s := got["s01"]; !s.Missing || !strings.Contains(s.Note, "missing") {
		t.Errorf("s01: %+v", s)
	}
	if s := got["s02"]; !s.Retired || s.Missing || !strings.HasPrefix(s.Note, "retired") {
		t.Errorf("s02: %+v", s)
	}
	if s := got["s00"]; s.Retired || s.Missing {
		t.Errorf("s00: %+v", s)
	}
}

// Progress lines are key=value for people, not a Go map (pool
// grow printed "map[...]" on stderr).
func TestEventLine(t *testing.T) {
	got := eventLine("respawned", map[string]any{"ts": protocol.Now(), "event": "respawned", "session": "s01",
		"job_id": "4711.3", "launches": 2, "why": "the runner's lock is free"})
	want := `respawned job_id=4711.3 launches=2 session=s01 why="the runner's lock is free"`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

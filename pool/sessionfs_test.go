package pool

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
)

// Symlinks planted in a pool and in its sessions are never followed by
// pool operations: a dead session's moved/ pointing outside (heal's claim
// would rename the queued command out of the session), its forward/,
// the pool's affinity/ and events.jsonl, and a session directory that is
// a symlink to a session elsewhere. Nothing outside changes; the command
// stays queued where it was.
func TestPoolSymlinksNotFollowed(t *testing.T) {
	needTool(t, "tclsh")
	p, pool := newPoolDir(t, "s00", "s01")
	runnerIn(t, filepath.Join(pool, "s00"))
	side := filepath.Join(t.TempDir(), "side")
	cmds := queueSideEffects(t, filepath.Join(pool, "s01"), side, 1)
	outMoved, outForward, outAffinity := t.TempDir(), t.TempDir(), t.TempDir()
	outEvents := filepath.Join(t.TempDir(), "events")
	if err := os.WriteFile(outEvents, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	elsewhere := filepath.Join(t.TempDir(), "s02")
	for _, d := range protocol.Dirs {
		if err := os.MkdirAll(filepath.Join(elsewhere, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	os.RemoveAll(filepath.Join(pool, DirAffinity))
	for link, target := range map[string]string{
		filepath.Join(pool, "s01", DirMoved): outMoved, filepath.Join(pool, "s01", "forward"): outForward,
		filepath.Join(pool, DirAffinity): outAffinity, filepath.Join(pool, FilePoolEvents): outEvents,
		filepath.Join(pool, "s02"): elsewhere,
	} {
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	if names := p.SessionNames(); len(names) != 2 {
		t.Errorf("sessions %v: a symlink to a directory is not a session of the pool", names)
	}
	if _, err := p.session("s02"); err == nil {
		t.Errorf("opened s02, a symlink to a session elsewhere")
	}
	rep, err := p.Heal(ctx(t))
	if !errors.Is(err, fsq.ErrLayout) || len(rep.Moved) != 0 {
		t.Errorf("heal through a symlinked moved/: %+v %v, want an error wrapping ErrLayout and no move", rep, err)
	}
	if _, err := os.Lstat(filepath.Join(pool, "s01", protocol.DirQueue, cmds[0].Name)); err != nil {
		t.Errorf("the dead session's command left its queue: %v", err)
	}
	if _, err := p.writePin("k", "s00", false); !errors.Is(err, fsq.ErrLayout) {
		t.Errorf("pin through a symlinked affinity/: %v, want ErrLayout", err)
	}
	if _, err := p.writePin("k", "s00", true); !errors.Is(err, fsq.ErrLayout) {
		t.Errorf("pin (replace) through a symlinked affinity/: %v, want ErrLayout", err)
	}
	p.event("test", map[string]any{})
	if w, _ := p.Locate(cmds[0]); w.State != "queued" {
		t.Errorf("located %+v, want queued in s01", w)
	}
	for _, d := range []string{outMoved, outForward, outAffinity} {
		if entries, _ := os.ReadDir(d); len(entries) != 0 {
			t.Errorf("%s: files appeared outside the pool: %v", d, entries)
		}
	}
	if fi, err := os.Stat(outEvents); err != nil || fi.Size() != 0 {
		t.Errorf("events appended outside the pool: %v", err)
	}
}

// TestPoolMemberSwappedForSymlink: a member the pool already had open,
// swapped for a symlink to a live session outside the pool (mv s01 away,
// ln -s elsewhere s01), is refused by pool submit: nothing is written
// into the outside session, whose runner would run it. The
// pool opens its members relative to its own root and never by path again.
func TestPoolMemberSwappedForSymlink(t *testing.T) {
	needTool(t, "tclsh")
	p, pool := newPoolDir(t, "s01")
	outside := filepath.Join(t.TempDir(), "outside")
	runnerIn(t, outside)
	if _, err := p.Views(); err != nil { // The pool has opened s01.
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(pool, "s01"), filepath.Join(pool, "s01.away")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(pool, "s01")); err != nil {
		t.Fatal(err)
	}
	c, err := p.Submit(ctx(t), "puts through-the-link", SubmitOptions{})
	if err == nil {
		t.Errorf("submitted %s into %s through a member swapped for a symlink", c.ID, c.Session)
	}
	// The pool listed s01 before the swap and judges it after: the handle
	// it holds must not reach through the link either (it did: a handle
	// whose directory moved reopened its path, following the symlink).
	if s, err := p.session("s01"); err == nil {
		if c, err := s.Submit(ctx(t), "puts through-the-held-handle", master.SubmitOptions{}); err == nil {
			t.Errorf("the pool's handle on s01 queued %s through the symlink", c.Name)
		}
	}
	for _, d := range []string{protocol.DirQueue, protocol.DirInflight, protocol.DirResult} {
		if names := commandsIn(filepath.Join(outside, d)); len(names) > 0 {
			t.Errorf("the outside session's %s/ holds %v", d, names)
		}
	}
}

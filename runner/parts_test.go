package runner

import (
	"testing"
	"time"
)

// The parts' methods hold the rules the loop relies on; these tests use a
// part alone, without a Runner, a tool or a session.

// A full disk counts the bytes it does not write from the start of a
// suspension; a second failure while suspended neither restarts the
// counts nor reports a new suspension.
func TestSpoolDiskSuspension(t *testing.T) {
	t.Parallel()
	var d spoolDisk
	if d.full || d.outputSuspended(3) {
		t.Fatal("a fresh disk is suspended")
	}
	if released, first := d.suspend(); released || !first {
		t.Fatalf("suspend = %v, %v; want no reserve released, first", released, first)
	}
	if !d.outputSuspended(5) || !d.full {
		t.Fatal("output not suspended on a full disk")
	}
	if _, first := d.suspend(); first {
		t.Fatal("a second failure started a new suspension")
	}
	if d.fullOut != 5 {
		t.Fatalf("output bytes not written = %d, want 5", d.fullOut)
	}
}

// Buffered output is due out flushDelay after its first byte, not after
// the last one.
func TestSpoolDiskFlushDue(t *testing.T) {
	t.Parallel()
	var d spoolDisk
	t0 := time.Unix(1000, 0)
	if !d.bufferedAt.IsZero() || !d.flushAt().IsZero() || d.flushDue(t0.Add(time.Hour)) {
		t.Fatal("nothing buffered, yet a flush is due")
	}
	d.markBuffered(t0)
	d.markBuffered(t0.Add(flushDelay / 2))
	if got := d.flushAt(); !got.Equal(t0.Add(flushDelay)) {
		t.Fatalf("flushAt = %v, want %v", got, t0.Add(flushDelay))
	}
	if d.flushDue(t0.Add(flushDelay-1)) || !d.flushDue(t0.Add(flushDelay)) {
		t.Fatal("flushDue does not turn at flushDelay after the first byte")
	}
}

// state.json is scheduled only when something changed, and once.
func TestRunStatusSchedule(t *testing.T) {
	t.Parallel()
	var s runStatus
	t0 := time.Unix(1000, 0)
	s.schedule(t0)
	if !s.writeAt.IsZero() {
		t.Fatal("scheduled with nothing changed")
	}
	s.dirty = true
	s.schedule(t0)
	s.schedule(t0.Add(time.Second))
	if s.writeAt != t0.Add(stateDelay) {
		t.Fatalf("due at %v, want %v", s.writeAt, t0.Add(stateDelay))
	}
	if s.beat() != 1 || s.beat() != 2 || s.beats != 2 {
		t.Fatal("beats do not count one by one")
	}
}

// Each begin without an end is ended once.
func TestCmdQueueOpenBegins(t *testing.T) {
	t.Parallel()
	a, b := beginKey{1, "a"}, beginKey{2, "b"}
	q := cmdQueue{openBegins: map[beginKey]*openBegin{a: {next: -1}, b: {next: -1}}}
	if keys := q.openBeginsExcept(map[beginKey]bool{a: true}); len(keys) != 1 || keys[0] != b {
		t.Fatalf("openBeginsExcept = %v, want [%v]", keys, b)
	}
	if !q.endBegin(a) || q.endBegin(a) {
		t.Fatal("a begin was ended twice")
	}
}

// A request of unknown age is never judged older than the runner, and
// every file moved aside gets a name of its own.
func TestMailboxStartAndAside(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	m := mailbox{startMod: t0}
	if m.writtenBeforeStart(time.Time{}) || m.writtenBeforeStart(t0) || !m.writtenBeforeStart(t0.Add(-1)) {
		t.Fatal("writtenBeforeStart judges wrongly")
	}
	if x, y := m.asideName("stop.json"), m.asideName("stop.json"); x == y {
		t.Fatalf("two files moved aside under one name %s", x)
	}
}

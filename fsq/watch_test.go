package fsq

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"
)

// The adaptive poll period: fast right after a hurry, a quarter longer at
// each tick, never beyond the poll period; a hurry starts over.
func TestPacer(t *testing.T) {
	p := newPacer(10*time.Millisecond, 250*time.Millisecond)
	if d := p.next(); d != 250*time.Millisecond {
		t.Fatalf("idle period %v, want the poll period", d)
	}
	p.hurry()
	var got []time.Duration
	var sum time.Duration
	for range 20 {
		d := p.next()
		got = append(got, d)
		sum += d
	}
	if got[0] != 10*time.Millisecond {
		t.Errorf("first period after a hurry %v, want 10ms", got[0])
	}
	for i := 1; i < len(got); i++ {
		if got[i] < got[i-1] || got[i] > 250*time.Millisecond {
			t.Fatalf("periods %v: not growing up to the poll period", got)
		}
	}
	if got[len(got)-1] != 250*time.Millisecond {
		t.Errorf("periods %v never come back to the poll period", got)
	}
	p.hurry()
	if d := p.next(); d != 10*time.Millisecond {
		t.Errorf("a second hurry starts at %v", d)
	}
	// A poll period shorter than the fast one is never exceeded.
	q := newPacer(10*time.Millisecond, 5*time.Millisecond)
	q.hurry()
	if d := q.next(); d != 5*time.Millisecond {
		t.Errorf("fast period beyond a 5ms poll: %v", d)
	}
}

// Hurry makes a polling watcher ring although its poll period is an hour;
// with inotify it is a no-op.
func TestWatchHurry(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := Watch(ctx, []string{t.TempDir()}, time.Hour, false, log)
	for i := range 3 { // It keeps ringing after a hurry (the period grows from HurryPoll).
		if i == 0 {
			w.Hurry()
		}
		select {
		case <-w.Rescan:
		case <-time.After(30 * time.Second):
			t.Fatalf("ring %d: no ring after Hurry with an hour's poll", i)
		}
	}
	var nilW *Watcher
	nilW.Hurry() // A runner without a watcher yet.
}

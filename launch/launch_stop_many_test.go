package launch

import (
	"context"
	"errors"
	"testing"
	"time"
)

// StopMany's batch never keeps a session from its wait for good: a place
// given back twice (once by the session, once by the hold's timer) is
// given back once; a session that never gives its place back (stuck
// before its request, e.g. on a late heartbeat) loses it by itself, so
// the next session gets in and every wait begins; a session whose
// context ends while it waits for a place counts as written.
func TestStopBatch(t *testing.T) {
	b := newStopBatch(stopGate + 2)
	var dones []func()
	for range stopGate {
		done, err := b.enter(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		dones = append(dones, done)
	}
	// Every place is taken, and nobody gives one back: the holds end by
	// themselves and the next session gets in.
	late, err := b.enter(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Given back by the session after (or before) its hold ended: once.
	for _, done := range append(dones, late) {
		done()
		done()
	}
	// One more, whose context has ended: it either gets a free place
	// (then gives it back) or counts as written without one.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if done, err := b.enter(ctx); err == nil {
		done()
	} else if !errors.Is(err, context.Canceled) {
		t.Fatalf("enter with an ended context: %v", err)
	}
	waited := make(chan struct{})
	go func() { b.written.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(time.Minute):
		t.Fatal("the waits never began: a place or a session was not counted as written")
	}
	if len(b.sem) != 0 {
		t.Fatalf("%d places still taken", len(b.sem))
	}
}

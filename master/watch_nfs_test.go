package master

import (
	"context"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
)

// On a network filesystem a wait polls adaptively: its doorbell rings at
// once and keeps ringing although PollInterval is an hour here (without
// the adaptive start it would first ring after an hour).
func TestNetworkWaitPollsAdaptively(t *testing.T) {
	s, _ := bareSession(t)
	defer s.Close()
	s.io.AssumeNetworkFS()
	s.PollInterval = time.Hour
	bell, stop := s.watch(context.Background(), protocol.DirResult)
	defer stop()
	for i := range 5 {
		select {
		case <-bell:
		case <-time.After(30 * time.Second):
			t.Fatalf("ring %d: a network wait did not poll before PollInterval", i)
		}
	}
}

// A network wait's looks are paced to the time waited so far: a result
// that appears at any time is looked at within 2 ms and an eighth of that time
// (2 ms at first), and the gaps reach a 100 ms PollInterval within about a
// second, after which the shared poll tick takes over. (The earlier pacing,
// from 250 µs growing by half, had 32 ms gaps 64 ms into a wait, where a
// round trip across NFS clients ends; docs/benchmarks-log.md, "NFS: adaptive
// polling".)
func TestNetworkLooksPacedToTheWait(t *testing.T) {
	const poll = 100 * time.Millisecond
	var waited time.Duration
	looks := 0
	for d := firstLook(true); d < poll; d = nextLook(d, true) {
		if d > 2*time.Millisecond+waited/8 {
			t.Fatalf("look %d: gap %v after %v waited, more than 2 ms and an eighth of it", looks, d, waited)
		}
		waited += d
		looks++
	}
	if waited > 1200*time.Millisecond || looks > 40 {
		t.Errorf("the gaps reach PollInterval after %v and %d looks, want within ~1 s and 40 looks", waited, looks)
	}
	// A local quick wait (the CLI) is paced the same way from 100 µs: a
	// round trip of a millisecond or two is seen within ~12% of it, with
	// some twenty looks in the first 10 ms (issue 44).
	waited, looks = 0, 0
	for d := firstLook(false); waited < 10*time.Millisecond; d = nextLook(d, false) {
		if d > 100*time.Microsecond+waited/8 {
			t.Fatalf("local look %d: gap %v after %v waited", looks, d, waited)
		}
		waited += d
		looks++
	}
	if looks > 25 {
		t.Errorf("%d local looks in the first 10 ms", looks)
	}
}

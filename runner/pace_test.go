package runner

import (
	"testing"
	"time"
)

// A poll tick is never lost: polling only, a tick whose listing of queue/
// the 9× rule holds back, or that comes while a listing is in flight, is
// owed a listing as soon as the rule allows (pace.go); with inotify nothing
// is owed (inotify events carry the names).
func TestPollTickOwedAListing(t *testing.T) {
	t.Parallel()
	listed := make(chan struct{}, 10)
	q := &cmdQueue{pend: newPending(), scan: newScanner("queue", func(string) ([]string, error) {
		listed <- struct{}{}
		return nil, nil
	}, realClock{})}
	defer q.scan.close()
	tick := func() { q.pollTick(false) }
	finish := func() {
		t.Helper()
		<-listed
		if err := q.scanned(<-q.scan.results); err != nil {
			t.Fatal(err)
		}
	}
	// The last listing just ended and took an hour: 9× that holds the
	// next one back.
	q.scan.lastEnd, q.scan.lastTook = time.Now(), time.Hour
	tick()
	if q.scan.inFlight {
		t.Fatal("a listing started against the 9× rule")
	}
	if d, ok := q.owedScanIn(); !ok || d < 8*time.Hour {
		t.Fatalf("owed listing in %v (owed %v), want one owed in ~9 h", d, ok)
	}
	q.payOwedScan(false)
	if q.scan.inFlight {
		t.Fatal("an owed listing started before the rule allows it")
	}
	q.scan.lastTook = 0 // The rule allows it now.
	if d, ok := q.owedScanIn(); !ok || d != 0 {
		t.Fatalf("owed listing in %v (owed %v), want now", d, ok)
	}
	q.payOwedScan(false)
	if !q.scan.inFlight {
		t.Fatal("the owed listing did not start")
	}
	// A tick while that listing is in flight: owed again once it ends
	// (the listing may have begun before a command was written).
	tick()
	if _, ok := q.owedScanIn(); ok {
		t.Fatal("owed while a listing is in flight: its result comes first")
	}
	finish()
	q.scan.lastTook = 0 // It took no time: the rule allows the next at once.
	if d, ok := q.owedScanIn(); !ok || d != 0 {
		t.Fatalf("a tick during a listing: owed in %v (owed %v), want now", d, ok)
	}
	q.payOwedScan(false)
	finish()
	if _, ok := q.owedScanIn(); ok {
		t.Fatal("still owed after the owed listing")
	}
	// A tick that starts its listing owes nothing; neither does inotify.
	q.scan.lastTook = 0
	tick()
	if _, ok := q.owedScanIn(); ok || !q.scan.inFlight {
		t.Fatalf("a tick that started its listing: owed %v, in flight %v", ok, q.scan.inFlight)
	}
	finish()
	q.scan.lastEnd, q.scan.lastTook = time.Now(), time.Hour
	q.oweScan(true, false)
	if _, ok := q.owedScanIn(); ok {
		t.Fatal("owed with inotify")
	}
}

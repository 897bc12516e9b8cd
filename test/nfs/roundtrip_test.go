package nfs

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
)

// TestNFSRoundTrips prints 40 round trips at the default settings (runner
// on client A, a Go master on client B), each on the guest's one clock:
// "NFS TRIP i t0 T t1 T start T end T t2 T looks L" in Unix µs (t0 the
// submit, t1 its return, start/end the result's start_ts/end_ts, t2 the
// wait's return) and the wait's looks (µs after t1), for an A/B of runner
// and master binaries in one guest boot (docs/benchmarks-log.md, "NFS: adaptive
// polling"). It asserts nothing about time and runs only with
// SP_NFS_TRIPS=1.
func TestNFSRoundTrips(t *testing.T) {
	if os.Getenv("SP_NFS_TRIPS") == "" {
		t.Skip("SP_NFS_TRIPS not set")
	}
	a, b := session(t)
	runnerOnA(t, a)
	s := ready(t, b)
	for i := range 40 {
		tr := timedTrip(t, s, "puts hi", true)
		fmt.Printf("NFS TRIP %d t0 %d t1 %d start %d end %d t2 %d looks %s\n", i, tr.t0.UnixMicro(), tr.t1.UnixMicro(),
			tr.start.UnixMicro(), tr.end.UnixMicro(), tr.t2.UnixMicro(), strings.Join(tr.looks, ","))
	}
}

// trip is one timed round trip on the guest's one clock: t0 the submit,
// t1 its return, start and end the result's start_ts and end_ts, t2 the
// wait's return, and (when asked for) the wait's looks in µs after t1.
type trip struct {
	t0, t1, start, end, t2 time.Time
	looks                  []string
}

func (tr trip) total() time.Duration  { return tr.t2.Sub(tr.t0) }
func (tr trip) submit() time.Duration { return tr.t1.Sub(tr.t0) }
func (tr trip) pickup() time.Duration { return tr.start.Sub(tr.t1) }
func (tr trip) run() time.Duration    { return tr.end.Sub(tr.start) }
func (tr trip) notice() time.Duration { return tr.t2.Sub(tr.end) }

// timedTrip submits payload through s, waits for its result and times
// each step.
func timedTrip(t *testing.T, s *master.Session, payload string, looks bool) trip {
	t.Helper()
	var tr trip
	tr.t0 = time.Now()
	c, err := s.Submit(ctx(t), payload, master.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tr.t1 = time.Now()
	var res *protocol.Result
	if looks {
		res, err = c.Wait(ctx(t), master.WaitOptions{Progress: func() { tr.looks = append(tr.looks, fmt.Sprint(time.Since(tr.t1).Microseconds())) }})
	} else {
		res, err = c.Wait(ctx(t), master.WaitOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
	tr.t2, tr.start, tr.end = time.Now(), res.StartTS.Time, res.EndTS.Time
	return tr
}

// waitAside submits payload through s and waits for its result in a
// goroutine: the channel gets the wait's error.
func waitAside(t *testing.T, s *master.Session, payload string) <-chan error {
	t.Helper()
	c, err := s.Submit(ctx(t), payload, master.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := c.Wait(ctx(t), master.WaitOptions{}); done <- err }()
	return done
}

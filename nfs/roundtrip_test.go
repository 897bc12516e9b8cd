package nfs

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/master"
)

// TestNFSRoundTrips prints 40 round trips at the default settings (runner
// on client A, a Go master on client B), each on the guest's one clock:
// "NFS TRIP i t0 T t1 T start T end T t2 T looks L" in Unix µs (t0 the
// submit, t1 its return, start/end the result's start_ts/end_ts, t2 the
// wait's return) and the wait's looks (µs after t1), for an A/B of runner
// and master binaries in one guest boot (BENCHMARKS.md, "NFS: adaptive
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
		t0 := time.Now()
		c, err := s.Submit(ctx(t), "puts hi", master.SubmitOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t1 := time.Now()
		var looks []string
		res, err := c.WaitProgress(ctx(t), func() { looks = append(looks, fmt.Sprint(time.Since(t1).Microseconds())) })
		if err != nil {
			t.Fatal(err)
		}
		t2 := time.Now()
		fmt.Printf("NFS TRIP %d t0 %d t1 %d start %d end %d t2 %d looks %s\n", i, t0.UnixMicro(), t1.UnixMicro(),
			res.StartTS.UnixMicro(), res.EndTS.UnixMicro(), t2.UnixMicro(), strings.Join(looks, ","))
	}
}

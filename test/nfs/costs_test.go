package nfs

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/master"
)

// nfsdCounts are the NFS server's counters (/proc/net/rpc/nfsd, what
// nfsstat -s reads): RPC calls, and operations (NFSv3 procedures plus
// NFSv4 operations: one v4 COMPOUND call carries several).
type nfsdCounts struct{ calls, ops int64 }

func serverCounts(t *testing.T) nfsdCounts {
	t.Helper()
	data, err := os.ReadFile("/proc/net/rpc/nfsd")
	if err != nil {
		t.Fatal(err)
	}
	var c nfsdCounts
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "rpc":
			fmt.Sscan(f[1], &c.calls)
		case "proc3", "proc4ops": // A count of fields, then one counter per procedure.
			for _, x := range f[2:] {
				var n int64
				fmt.Sscan(x, &n)
				c.ops += n
			}
		}
	}
	return c
}

// rates is what one window cost: server calls and operations per second,
// and the calls of each client per second.
type rates struct{ server, ops, clientA, clientB float64 }

func (r rates) String() string {
	return fmt.Sprintf("server %.1f calls/s (%.1f ops/s); client A %.1f/s, client B %.1f/s", r.server, r.ops, r.clientA, r.clientB)
}

func (r rates) minus(b rates) rates {
	return rates{r.server - b.server, r.ops - b.ops, r.clientA - b.clientA, r.clientB - b.clientB}
}

// window measures the counters over d.
func window(t *testing.T, d time.Duration) rates {
	s0, a0, b0 := serverCounts(t), rpcCalls(t, ""), rpcCalls(t, "cb")
	time.Sleep(d)
	s1, a1, b1 := serverCounts(t), rpcCalls(t, ""), rpcCalls(t, "cb")
	sec := d.Seconds()
	return rates{float64(s1.calls-s0.calls) / sec, float64(s1.ops-s0.ops) / sec, float64(a1-a0) / sec, float64(b1-b0) / sec}
}

func median(x []time.Duration) time.Duration {
	if len(x) == 0 {
		return 0
	}
	sort.Slice(x, func(i, j int) bool { return x[i] < x[j] })
	return x[len(x)/2].Round(time.Millisecond)
}

// statusTimes runs `master status` on client B n times (whole process).
func statusTimes(t *testing.T, bin, dirB string, n int) []time.Duration {
	t.Helper()
	var d []time.Duration
	for i := 0; i < n; i++ {
		t0 := time.Now()
		out, err := onHostB(t, bin, "status", "--session", dirB).CombinedOutput()
		d = append(d, time.Since(t0))
		if err != nil {
			t.Fatalf("master status on B: %v\n%s", err, out)
		}
	}
	return d
}

// TestNFSFarmCosts measures what the NFS server pays for one session and
// one master (docs/benchmarks-log.md, "Farm on NFS: what the file
// server pays"), with the runner on client A and a Go master on client B,
// each at two or three settings of its knobs (the runner's --heartbeat and
// --poll, the master's PollInterval), and what each setting costs in
// latency. Figures only (no time is asserted); it runs on request:
//
//	SP_NFS_COSTS=1 ./test/nfs/nfs-costs.sh
func TestNFSFarmCosts(t *testing.T) {
	if os.Getenv("SP_NFS_COSTS") == "" {
		t.Skip("figures on request: SP_NFS_COSTS=1 (test/nfs/nfs-costs.sh)")
	}
	a, b := session(t)
	bin := masterCLI(t)
	if err := os.Mkdir(a, 0o777); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	base := window(t, 10*time.Second)
	fmt.Printf("NFS COSTS: nothing running: %v\n", base)
	for i, set := range []struct{ hb, poll string }{{"1s", "250ms"}, {"1s", "1s"}, {"5s", "2s"}, {"200ms", "250ms"}} {
		label := fmt.Sprintf("--heartbeat %s --poll %s", set.hb, set.poll)
		if i == 0 {
			label += " (the defaults on NFS)"
		}
		da, db := filepath.Join(a, fmt.Sprint("s", i)), filepath.Join(b, fmt.Sprint("s", i))
		r := start(t, exec.Command(runnerBin, "--session", da, "--heartbeat", set.hb, "--poll", set.poll))
		s := ready(t, db)
		time.Sleep(3 * time.Second)
		idle := window(t, 10*time.Second).minus(base)
		fmt.Printf("NFS COSTS: idle session, %s: %v\n", label, idle)
		// A command arriving at the idle runner: the runner's pickup
		// (submitted → start_ts) and the whole round trip.
		var rt, pick []time.Duration
		for k := 0; k < 5; k++ {
			time.Sleep(3 * time.Second) // Past the fast polls after the last activity.
			tr := timedTrip(t, s, "puts hi", false)
			rt, pick = append(rt, tr.total()), append(pick, tr.pickup())
		}
		n := 5
		if i == 0 {
			n = 11
		}
		st := statusTimes(t, bin, db, n)
		fmt.Printf("NFS COSTS: latency, %s: a command after 3 s idle: runner pickup p50 %v, round trip p50 %v (5 each); master status on B (whole process, %d runs): median %v, max %v\n",
			label, median(pick), median(rt), n, median(st), st[len(st)-1].Round(time.Millisecond))
		if i == 0 {
			streamAndWaits(t, s)
		}
		if _, err := stopWait(ctx(t), s, "graceful"); err != nil {
			t.Fatal(err)
		}
		r.wait(t)
	}
}

// streamAndWaits measures a busy session (a stream of commands from a
// master on B; a runner busy with one long command) and a Go master on B
// waiting for a long command at three PollIntervals.
func streamAndWaits(t *testing.T, s *master.Session) {
	// A stream: one command after another; 10 s measured after 2 s.
	var n atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := s.Run(ctx(t), "puts hi", master.SubmitOptions{}); err != nil {
				t.Error(err)
				return
			}
			n.Add(1)
		}
	}()
	time.Sleep(2 * time.Second)
	n0 := n.Load()
	w := window(t, 10*time.Second)
	cmds := n.Load() - n0
	close(stop)
	<-done
	if cmds == 0 {
		t.Fatal("no command ran in the stream's window")
	}
	fmt.Printf("NFS COSTS: busy session, a stream of Run(\"puts hi\") from B (defaults): %.1f commands/s; %v; per command: server %.1f calls, client A (runner) %.1f, client B (master) %.1f\n",
		float64(cmds)/10, w, w.server*10/float64(cmds), w.clientA*10/float64(cmds), w.clientB*10/float64(cmds))

	// A runner busy with a long command, nobody waiting.
	c, err := s.Submit(ctx(t), "after 14000", master.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	busy := window(t, 10*time.Second)
	if _, err := c.Wait(ctx(t), master.WaitOptions{}); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("NFS COSTS: busy session, one long command, no master waiting: %v\n", busy)

	// A Go master on B waiting, at three PollIntervals: its client's
	// calls over 8 s (after the wait's first 2 s), and how long after
	// the command's end the wait returns (three waits of 5 s commands).
	for _, pi := range []time.Duration{100 * time.Millisecond, 500 * time.Millisecond, time.Second} {
		// A Session of its own: its shared poll tick is set when it
		// first waits.
		s, err := master.Open(s.Dir())
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		s.PollInterval = pi
		errc := waitAside(t, s, "after 11000")
		time.Sleep(2 * time.Second)
		w := window(t, 8*time.Second)
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		var notice []time.Duration
		for k := 0; k < 3; k++ {
			c, err := s.Submit(ctx(t), "after 5000", master.SubmitOptions{})
			if err != nil {
				t.Fatal(err)
			}
			res, err := c.Wait(ctx(t), master.WaitOptions{})
			if err != nil {
				t.Fatal(err)
			}
			notice = append(notice, time.Since(res.EndTS.Time))
		}
		fmt.Printf("NFS COSTS: a master on B waiting (PollInterval %v): client B %.1f calls/s (server total %.1f/s with the busy runner); the wait returns p50 %v after the command's end (3 waits of 5 s)\n",
			pi, w.clientB, w.server, median(notice))
	}
}

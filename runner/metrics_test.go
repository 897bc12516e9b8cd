package runner

import (
	"math"
	"sync"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
)

// TestLeaseRemaining: +Inf without a lease (or a stale one), the grace left
// with --require-lease, the TTL left since the last renewal, 0 once expired.
func TestLeaseRemaining(t *testing.T) {
	t.Parallel()
	now := time.Now()
	r := &Runner{id: identity{started: now.Add(-10 * time.Second)}}
	r.cfg.LeaseGrace = 30 * time.Second
	cases := []struct {
		name string
		l    leaseWatch
		req  bool
		want float64
	}{
		{"no lease", leaseWatch{}, false, math.Inf(1)},
		{"stale lease ignored", leaseWatch{valid: true, ignored: true}, false, math.Inf(1)},
		{"required, not yet written", leaseWatch{}, true, 20},
		{"ttl", leaseWatch{valid: true, renewedAt: now.Add(-4 * time.Second), lease: protocol.Lease{TTLMS: 10000}, ttl: 10 * time.Second}, false, 6},
		{"expires_at", leaseWatch{valid: true, lease: protocol.Lease{ExpiresAt: protocol.Time{Time: now.Add(90 * time.Second)}}}, false, 90},
		{"ttl passed", leaseWatch{valid: true, renewedAt: now.Add(-time.Minute), lease: protocol.Lease{TTLMS: 1000}, ttl: time.Second}, false, 0},
		{"expired", leaseWatch{valid: true, expired: true}, false, 0},
	}
	for _, c := range cases {
		r.cfg.RequireLease = c.req
		if got := c.l.remaining(r, now); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// recorder is an Observer that keeps what it was given.
type recorder struct {
	mu      sync.Mutex
	info    Info
	calls   []string
	results []*protocol.Result
	last    Snapshot
}

func (o *recorder) Start(i Info) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.info = i
	o.calls = append(o.calls, "start")
	return nil
}

func (o *recorder) Beat(s Snapshot) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, "beat")
	o.last = s
}

func (o *recorder) Result(res *protocol.Result, ran bool, s Snapshot) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, "result")
	o.results = append(o.results, res)
	o.last = s
}

func (o *recorder) Close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, "close")
}

// TestObserver: the Observer is started once with the runner's identity,
// sees every result and heartbeat, and is closed last, after a final
// heartbeat that says stopped.
func TestObserver(t *testing.T) {
	t.Parallel()
	o := &recorder{}
	h := newHarness(t, func(c *Config) { c.Observer = o }).start()
	h.result(h.submit("puts hello"))
	h.stop(protocol.StopGraceful)
	o.mu.Lock()
	defer o.mu.Unlock()
	st := h.state()
	if o.info.Session != h.dir || o.info.SessionID != st.SessionID || o.info.Kind != protocol.KindTcl || o.info.Started.IsZero() {
		t.Errorf("info %+v, state %+v", o.info, st)
	}
	if len(o.calls) < 4 || o.calls[0] != "start" || o.calls[len(o.calls)-1] != "close" || o.calls[len(o.calls)-2] != "beat" {
		t.Errorf("calls %v", o.calls)
	}
	if len(o.results) != 1 || o.results[0].Status != protocol.StatusOK {
		t.Errorf("results %+v", o.results)
	}
	if o.last.Phase != protocol.PhaseStopped || o.last.Busy || o.last.QueueDepth != 0 || o.last.Heartbeats < 1 || !math.IsInf(o.last.LeaseRemaining, 1) {
		t.Errorf("last snapshot %+v", o.last)
	}
}

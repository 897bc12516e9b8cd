package runner

import (
	"math"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
)

// TestLeaseRemaining: +Inf without a lease (or a stale one), the grace left
// with --require-lease, the TTL left since the last renewal, 0 once expired.
func TestLeaseRemaining(t *testing.T) {
	now := time.Now()
	r := &Runner{started: now.Add(-10 * time.Second)}
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

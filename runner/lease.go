package runner

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/protocol"
)

// leaseWatch judges the master's lease on the runner's own clock.
type leaseWatch struct {
	content   []byte
	renewedAt time.Time // our clock, when content last changed
	lease     protocol.Lease
	present   bool
	ignored   bool // stale at start: ignored until it changes
	expired   bool
}

func (l *leaseWatch) init(r *Runner, now time.Time) {
	l.renewedAt = now
	data, err := os.ReadFile(r.path(protocol.FileLease))
	if err != nil {
		return
	}
	lease, err := protocol.ParseLease(data)
	if err != nil {
		return
	}
	l.content, l.lease, l.present = data, lease, true
	if lease.TTLMS == 0 && now.After(lease.ExpiresAt.Time) {
		l.ignored = true
		r.log.Warn("state/lease.json expired before this runner started; ignoring it until a master renews it")
		r.event(protocol.Event{Event: protocol.EvLease, Detail: map[string]any{"action": "stale_ignored", "lease_id": lease.LeaseID}})
	}
}

// check reads state/lease.json and stops the runner when the lease has
// expired: with ttl_ms, when no renewal (a change of the file) was seen for
// ttl_ms on our clock; with only expires_at, when our clock passes it.
func (l *leaseWatch) check(r *Runner, now time.Time) {
	if l.expired {
		return
	}
	fsq.Revalidate(r.path(protocol.DirState))
	data, err := os.ReadFile(r.path(protocol.FileLease))
	switch {
	case errors.Is(err, os.ErrNotExist):
		l.present = false
		if r.cfg.RequireLease && now.Sub(r.started) > r.cfg.LeaseGrace {
			l.expire(r, "no lease was written within --lease-grace")
		}
		return
	case err != nil:
		return // Transient (ESTALE on NFS): judge at the next tick.
	}
	if !bytes.Equal(data, l.content) {
		lease, perr := protocol.ParseLease(data)
		if perr != nil {
			return // Possibly being written; the old lease stands.
		}
		l.ignored = false
		l.content, l.lease, l.present, l.renewedAt = bytes.Clone(data), lease, true, now
	}
	if l.ignored {
		return
	}
	switch {
	case l.lease.TTLMS > 0 && now.Sub(l.renewedAt) > time.Duration(l.lease.TTLMS)*time.Millisecond:
		l.expire(r, fmt.Sprintf("lease %s not renewed for %dms", l.lease.LeaseID, l.lease.TTLMS))
	case l.lease.TTLMS == 0 && now.After(l.lease.ExpiresAt.Time):
		l.expire(r, fmt.Sprintf("lease %s expired at %s", l.lease.LeaseID, l.lease.ExpiresAt.UTC().Format(time.RFC3339)))
	}
}

func (l *leaseWatch) expire(r *Runner, why string) {
	l.expired = true
	r.log.Warn("lease expired", "why", why)
	r.event(protocol.Event{Event: protocol.EvLease, Detail: map[string]any{"action": "expired", "why": why}})
	if r.cur != nil {
		r.interrupt(protocol.StatusCancelled, protocol.ReasonLeaseExpired, "lease expired: "+why, "")
	}
	r.requestStop(protocol.StopGraceful, "lease expired: "+why)
}

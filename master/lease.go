package master

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
)

var leaseCounter atomic.Int64

// WriteLease writes state/lease.json once with ttl and returns the lease
// it wrote. The runner judges it on its own clock (no renewal seen for
// ttl_ms: expired); expires_at is written too, for runners that follow the
// seed protocol. A session made by an older runner without state/ gets
// the directory.
func (s *Session) WriteLease(leaseID string, ttl time.Duration) (protocol.Lease, error) {
	if ttl < time.Millisecond { // ttl_ms 0 or negative: no lease the runner keeps (0 with expires_at now: expired at once).
		return protocol.Lease{}, usageErr("lease ttl %v: at least 1ms", ttl)
	}
	l := protocol.Lease{
		ProtocolVersion: protocol.Version, LeaseID: leaseID, TTLMS: ttl.Milliseconds(),
		ExpiresAt: protocol.Time{Time: time.Now().Add(ttl)}, Counter: leaseCounter.Add(1), Owner: s.io.Owner(),
	}
	b, err := json.Marshal(l)
	if err != nil {
		return l, err
	}
	return l, s.io.WriteFile(protocol.FileLease, b)
}

// KeepLease renews the lease every ttl/3 until ctx ends. Every renewal that
// fails is reported on the returned channel (buffered; a slow reader misses
// reports, never blocks the renewals). The channel is closed when ctx ends.
// Renewal runs in its own goroutine, so work in the caller cannot delay it.
func (s *Session) KeepLease(ctx context.Context, ttl time.Duration) <-chan error {
	errs := make(chan error, 8)
	id := fmt.Sprintf("lease-%s", NewCmdID())
	report := func(err error) {
		select {
		case errs <- err:
		default:
		}
	}
	if _, err := s.WriteLease(id, ttl); err != nil {
		report(err)
	}
	go func() {
		defer close(errs)
		t := time.NewTicker(max(ttl/3, 10*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if _, err := s.WriteLease(id, ttl); err != nil {
					report(wrapf(err, "renew lease"))
				}
			}
		}
	}()
	return errs
}

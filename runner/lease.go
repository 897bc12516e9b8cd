package runner

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/protocol"
)

// leaseWatch judges the master's lease on the runner's own clock.
//
// state/lease.json is read like every session file: without following a
// symlink, without blocking on a FIFO, and only up to maxStateFile bytes.
// A lease that cannot be understood (not a regular file, too large, not
// JSON, a field out of range) is never ignored silently: state.json says
// why (lease_error) and a lease event records it; the last lease that was
// understood stands meanwhile (it expires if nobody renews it), and with
// --require-lease a lease that was never understood counts as missing.
type leaseWatch struct {
	content   []byte
	renewedAt time.Time // our clock, when content last changed
	lease     protocol.Lease
	ttl       time.Duration // lease.TTL(), clamped
	valid     bool          // a lease was understood since start
	ignored   bool          // stale at start: ignored until it changes
	expired   bool
	err       string // lease_error ("" when fine)
}

// init takes the lease an earlier master left. One whose expires_at has
// already passed is ignored until a master renews it (PROTOCOL.md §10),
// whether or not it also has ttl_ms: SkillPilot's masters write both, and
// a `master lease --ttl 2s` never renewed must not stop every later runner
// ttl_ms after its start. It is judged only after that
// decision, so it cannot stop the new runner. A lease with ttl_ms and no
// expires_at cannot be told stale and is judged as usual.
func (l *leaseWatch) init(r *Runner, now time.Time) {
	l.renewedAt = now
	if !l.read(r, now) || l.expired {
		return
	}
	if l.staleAt(now) {
		l.ignored = true
		r.log.Warn("state/lease.json expired before this runner started; ignoring it until a master renews it")
		r.event(protocol.Event{Event: protocol.EvLease, Detail: map[string]any{"action": "stale_ignored", "lease_id": l.lease.LeaseID}})
	}
	l.judge(r, now)
}

// check reads state/lease.json and stops the runner when the lease has
// expired: with ttl_ms, when no renewal (a change of the file) was seen for
// ttl_ms on our clock; with only expires_at, when our clock passes it.
func (l *leaseWatch) check(r *Runner, now time.Time) {
	if l.expired {
		return
	}
	if l.read(r, now) && !l.expired {
		l.judge(r, now)
	}
}

// read takes what state/lease.json says now; false when there is nothing
// to judge (no file, or a transient NFS error). Without a lease that could
// be understood, --require-lease stops the runner after --lease-grace.
func (l *leaseWatch) read(r *Runner, now time.Time) bool {
	if r.id.network {
		// A master on another host renews it: see fsq.Root.Revalidate. Locally
		// the open would only cost system calls on every heartbeat.
		r.root.Revalidate(protocol.DirState)
	}
	data, _, err := r.root.ReadFile(protocol.FileLease, maxStateFile)
	switch {
	case errors.Is(err, os.ErrNotExist):
		l.setErr(r, "")
		if l.missing(r.cfg.RequireLease, now.Sub(r.id.started), r.cfg.LeaseGrace) {
			l.expire(r, "no lease was written within --lease-grace")
		}
		return false
	case errors.Is(err, fsq.ErrTooLarge):
		l.setErr(r, fmt.Sprintf("state/lease.json is larger than %d bytes", maxStateFile))
	case errors.Is(err, fsq.ErrSymlink), errors.Is(err, fsq.ErrNotRegular):
		l.setErr(r, "state/lease.json is not a regular file: "+err.Error())
	case errors.Is(err, syscall.ESTALE):
		return false // Transient on NFS: judge at the next tick.
	case err != nil:
		l.setErr(r, "state/lease.json cannot be read: "+err.Error())
	case !bytes.Equal(data, l.content):
		l.update(r, data, now)
	default:
		l.setErr(r, "")
	}
	if l.missing(r.cfg.RequireLease, now.Sub(r.id.started), r.cfg.LeaseGrace) {
		why := "no lease that could be understood was written within --lease-grace (" + l.err + ")"
		if l.ignored {
			why = "no lease was written within --lease-grace: the one found at start was stale (its expires_at had passed)"
		}
		l.expire(r, why)
		return false
	}
	return true
}

// missing reports that --require-lease (require) finds no lease after
// --lease-grace (grace), up is how long the runner has run: none was
// understood, or the only one is the stale lease found at start (which
// counts as none until a master renews it).
func (l *leaseWatch) missing(require bool, up, grace time.Duration) bool {
	return (!l.valid || l.ignored) && require && up > grace
}

// staleAt reports that the lease understood was left by an earlier
// session, as the runner starting at now judges it: its expires_at has
// passed, whatever else it says.
func (l *leaseWatch) staleAt(now time.Time) bool {
	return l.valid && !l.lease.ExpiresAt.IsZero() && now.After(l.lease.ExpiresAt.Time)
}

// update takes changed lease content: a renewal if it parses.
func (l *leaseWatch) update(r *Runner, data []byte, now time.Time) {
	lease, err := protocol.ParseLease(data)
	if err != nil {
		l.setErr(r, "state/lease.json: "+err.Error())
		return
	}
	l.setErr(r, "")
	l.ignored = false
	ttl, clamped := lease.TTL()
	if clamped && (!l.valid || lease.TTLMS != l.lease.TTLMS) {
		r.log.Warn("lease ttl_ms out of range; clamped", "ttl_ms", lease.TTLMS, "to", ttl)
		r.event(protocol.Event{Event: protocol.EvLease, Detail: map[string]any{"action": "ttl_clamped",
			"lease_id": lease.LeaseID, "ttl_ms": lease.TTLMS, "clamped_to_ms": ttl.Milliseconds()}})
	}
	l.content, l.lease, l.ttl, l.valid, l.renewedAt = bytes.Clone(data), lease, ttl, true, now
}

// judge stops the runner when the lease has expired at now.
func (l *leaseWatch) judge(r *Runner, now time.Time) {
	if why := l.verdict(now); why != "" {
		l.expire(r, why)
	}
}

// verdict is PROTOCOL.md section 10's expiry rule on the lease as the
// runner holds it at now (its own clock): why it has expired, or "".
// With ttl_ms, when no renewal was seen for ttl_ms; with only expires_at,
// when the clock passes it. Nothing expires before a lease was understood
// or while the stale one found at start is ignored.
func (l *leaseWatch) verdict(now time.Time) string {
	switch {
	case !l.valid || l.ignored:
		return ""
	case l.ttl > 0 && now.Sub(l.renewedAt) > l.ttl:
		return fmt.Sprintf("lease %s not renewed for %dms", l.lease.LeaseID, l.ttl.Milliseconds())
	case l.ttl == 0 && now.After(l.lease.ExpiresAt.Time):
		return fmt.Sprintf("lease %s expired at %s", l.lease.LeaseID, l.lease.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return ""
}

// setErr records why the lease cannot be understood ("" clears it), with
// an event and a log line when that changes.
func (l *leaseWatch) setErr(r *Runner, msg string) {
	if msg == l.err {
		return
	}
	l.err = msg
	r.status.dirty = true
	if msg == "" {
		r.event(protocol.Event{Event: protocol.EvLease, Detail: map[string]any{"action": "understood"}})
		return
	}
	r.log.Warn("state/lease.json cannot be understood", "why", msg)
	r.event(protocol.Event{Event: protocol.EvLease, Detail: map[string]any{"action": "error", "error": msg,
		"standing": l.valid}})
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

package runner

import (
	"math"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
)

// Observer receives what the runner measures, for an exporter outside this
// package (cmd/runner wires runner/promfile's Prometheus text file to it
// with --metrics-file). Every method runs on the runner's owner goroutine:
// it must return quickly, must not block on I/O, and must not call the
// Runner. Values are cumulative since this runner process started.
type Observer interface {
	// Start is called once by Open, under the session lock, before
	// anything else; an error makes Open fail (and release the lock).
	Start(Info) error
	// Beat is called on every heartbeat, including the final one of a
	// stop.
	Beat(Snapshot)
	// Result is called for every committed result; ran says the tool ran
	// the command (its start_ts to end_ts is a run time).
	Result(res *protocol.Result, ran bool, s Snapshot)
	// Close is called once when the runner stops, after the final Beat;
	// the observer finishes its work (a last write) before it returns.
	Close()
}

// Info identifies a runner; it does not change while it runs.
type Info struct {
	Session   string        // the session directory's absolute path (any bytes)
	SessionID string        // state.json session_id
	Hostname  string        // the runner's host
	Kind      protocol.Kind // tcl or sh
	Started   time.Time     // when the runner started, on its clock
}

// Snapshot is what the runner measures at one moment.
type Snapshot struct {
	QueueDepth         int            // commands waiting in queue/ as the runner knows them
	Busy               bool           // a command runs
	CurrentOutputBytes int64          // bytes the running command printed so far (0 when idle)
	CurrentCmdID       string         // the running command's cmd_id ("" when idle)
	CurrentTraceID     string         // and its trace_id
	ToolRestarts       int64          // starts of the tool after the first one
	Heartbeats         int64          // heartbeats written (state/heartbeat.json's counter)
	Phase              protocol.Phase // state.json phase
	// LeaseRemaining is how many seconds remain until the lease expires
	// on the runner's clock: +Inf when no lease applies, 0 once expired.
	LeaseRemaining float64
}

// metrics forwards the runner's figures to its Observer. A nil *metrics
// (no Observer) does nothing, so the hooks need no test.
type metrics struct{ obs Observer }

// newMetrics starts r's Observer, or returns nil when there is none.
func newMetrics(r *Runner) (*metrics, error) {
	if r.cfg.Observer == nil {
		return nil, nil
	}
	err := r.cfg.Observer.Start(Info{Session: r.dir, SessionID: r.id.sessionID, Hostname: r.id.hostname,
		Kind: r.cfg.Kind, Started: r.id.started})
	if err != nil {
		return nil, err
	}
	return &metrics{obs: r.cfg.Observer}, nil
}

// snapshot reads the runner's figures; it runs on the owner goroutine.
func (r *Runner) snapshot() Snapshot {
	phase, _ := r.phase()
	s := Snapshot{QueueDepth: r.queue.pend.len(), ToolRestarts: max(r.tool.starts-1, 0), Heartbeats: r.status.beats, Phase: phase,
		LeaseRemaining: r.lease.remaining(r, r.clk.Now())}
	if r.cur != nil {
		r.cur.describeSnapshot(&s)
	}
	return s
}

// beat passes the heartbeat's figures on. It runs on the owner goroutine
// (from Runner.beat).
func (m *metrics) beat(r *Runner) {
	if m == nil {
		return
	}
	m.obs.Beat(r.snapshot())
}

// result passes a committed result on; ran says the tool ran the command.
// It runs on the owner goroutine.
func (m *metrics) result(r *Runner, res *protocol.Result, ran bool) {
	if m == nil {
		return
	}
	m.obs.Result(res, ran, r.snapshot())
}

// close tells the Observer the runner stopped (after the final heartbeat).
func (m *metrics) close() {
	if m == nil {
		return
	}
	m.obs.Close()
}

// remaining is how many seconds remain until the lease expires, on the
// runner's clock: +Inf when no lease applies (none, or a stale one being
// ignored), 0 once it has expired.
func (l *leaseWatch) remaining(r *Runner, now time.Time) float64 {
	var left time.Duration
	switch {
	case l.expired:
		return 0
	case !l.valid && r.cfg.RequireLease:
		left = r.cfg.LeaseGrace - now.Sub(r.id.started)
	case !l.valid || l.ignored:
		return math.Inf(1)
	case l.ttl > 0:
		left = l.ttl - now.Sub(l.renewedAt)
	default:
		left = l.lease.ExpiresAt.Sub(now)
	}
	return max(left, 0).Seconds()
}

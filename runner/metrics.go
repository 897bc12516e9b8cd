package runner

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/skillpilot/skillpilot/protocol"
)

// metrics exports the runner's figures in the Prometheus text exposition
// format to --metrics-file, for node_exporter's textfile collector. The
// values live in a client_golang registry; the owner goroutine updates them
// (cheap, lock-free) on every heartbeat and every result and rings a
// doorbell; a writer goroutine then writes the file with
// prometheus.WriteToTextfile (a temporary file in the same directory, then
// a rename, so a scrape never sees half a file). Writes are coalesced (at
// most one per metricsMinInterval, a burst of results shares one) and never
// make the owner goroutine wait. The stop writes the final values.
//
// Counters count what this runner process did since it started (a new
// runner starts from zero, as Prometheus counters do; runner_start_time
// tells a restart). A nil *metrics does nothing, so the hooks need no test.
type metrics struct {
	path string
	reg  *prometheus.Registry

	commands    *prometheus.CounterVec
	runTime     prometheus.Histogram
	outputBytes prometheus.Counter
	queueDepth  prometheus.Gauge
	busy        prometheus.Gauge
	curBytes    prometheus.Gauge
	restarts    prometheus.Counter
	heartbeats  prometheus.Counter
	leaseLeft   prometheus.Gauge
	phase       *prometheus.GaugeVec

	// Owned by the runner's goroutine: what was already added to counters.
	seenStarts, seenBeats int64
	lastPhase             protocol.Phase

	ring  chan struct{}
	done  chan struct{}
	start sync.Once  // starts the writer at the first write
	mu    sync.Mutex // serialises writes (the writer goroutine and close)
	err   error      // the last write error, logged once until a write works
	log   func(msg string, err error)
}

// runTimeBuckets span 1 ms to about 4.7 hours, ×4 apart: EDA commands run
// from milliseconds (a query) to hours (placement, routing).
var runTimeBuckets = prometheus.ExponentialBuckets(0.001, 4, 13)

// newMetrics prepares the metrics of runner r, or returns nil when no
// --metrics-file was given. The file's directory must exist.
func newMetrics(r *Runner) (*metrics, error) {
	if r.cfg.MetricsFile == "" {
		return nil, nil
	}
	path, err := filepath.Abs(r.cfg.MetricsFile)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("runner: --metrics-file %s: its directory does not exist", r.cfg.MetricsFile)
	}
	m := &metrics{path: path, reg: prometheus.NewRegistry(), ring: make(chan struct{}, 1), done: make(chan struct{}),
		log: func(msg string, err error) { r.log.Warn(msg, "path", path, "err", err) }}
	// The session label keeps several runners' files on one host apart.
	labels := prometheus.Labels{"session": r.dir}
	f := prometheus.WrapRegistererWith(labels, m.reg)
	m.commands = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "skillpilot_commands_total",
		Help: "Results written by this runner, by status and exit_reason (every command file, including invalid ones and those cancelled before they started)."},
		[]string{"status", "exit_reason"})
	m.runTime = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "skillpilot_command_run_seconds",
		Help: "Run time of the commands the tool ran, from the moment the command was typed to its result.", Buckets: runTimeBuckets})
	m.outputBytes = prometheus.NewCounter(prometheus.CounterOpts{Name: "skillpilot_output_bytes_total",
		Help: "Bytes of output of the finished commands (their output files)."})
	m.queueDepth = prometheus.NewGauge(prometheus.GaugeOpts{Name: "skillpilot_queue_depth",
		Help: "Commands waiting in queue/ as the runner knows them."})
	m.busy = prometheus.NewGauge(prometheus.GaugeOpts{Name: "skillpilot_busy",
		Help: "1 while a command runs, else 0."})
	m.curBytes = prometheus.NewGauge(prometheus.GaugeOpts{Name: "skillpilot_current_output_bytes",
		Help: "Bytes the running command has printed so far (0 when idle)."})
	m.restarts = prometheus.NewCounter(prometheus.CounterOpts{Name: "skillpilot_tool_restarts_total",
		Help: "Starts of the tool after the first one (after a crash, an exit, a cancel that killed it, a failed start)."})
	m.heartbeats = prometheus.NewCounter(prometheus.CounterOpts{Name: "skillpilot_heartbeats_total",
		Help: "Heartbeats written; equals the counter in state/heartbeat.json."})
	m.leaseLeft = prometheus.NewGauge(prometheus.GaugeOpts{Name: "skillpilot_lease_remaining_seconds",
		Help: "Time until the lease expires on the runner's clock; +Inf when no lease applies, 0 once expired."})
	m.phase = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "skillpilot_phase",
		Help: "1 for the runner's current phase (state.json phase), 0 for the others."}, []string{"phase"})
	start := prometheus.NewGauge(prometheus.GaugeOpts{Name: "skillpilot_runner_start_time_seconds",
		Help: "When this runner started, in seconds since the Unix epoch (its clock)."})
	start.Set(float64(r.started.UnixNano()) / 1e9)
	info := prometheus.NewGauge(prometheus.GaugeOpts{Name: "skillpilot_runner_info",
		Help:        "Always 1; the labels identify the runner.",
		ConstLabels: prometheus.Labels{"session_id": r.sessionID, "hostname": r.hostname, "kind": string(r.cfg.Kind)}})
	info.Set(1)
	for _, c := range []prometheus.Collector{m.commands, m.runTime, m.outputBytes, m.queueDepth, m.busy, m.curBytes,
		m.restarts, m.heartbeats, m.leaseLeft, m.phase, start, info} {
		f.MustRegister(c)
	}
	for _, p := range []protocol.Phase{protocol.PhaseStarting, protocol.PhaseIdle, protocol.PhaseBusy,
		protocol.PhaseError, protocol.PhaseStopping, protocol.PhaseStopped} {
		m.phase.WithLabelValues(string(p)).Set(0)
	}
	m.leaseLeft.Set(math.Inf(1))
	return m, nil
}

// metricsMinInterval spaces the writes: a write costs about half a
// millisecond (most of it the rename, which ext4 makes flush the new file),
// so a runner finishing a thousand commands a second writes ten times a
// second, not a thousand. Results during the pause share the next write.
const metricsMinInterval = 100 * time.Millisecond

// writer writes the file each time the doorbell rings, at most every
// metricsMinInterval.
func (m *metrics) writer() {
	for range m.ring {
		m.write()
		time.Sleep(metricsMinInterval)
	}
	close(m.done)
}

func (m *metrics) write() {
	m.mu.Lock()
	defer m.mu.Unlock()
	err := prometheus.WriteToTextfile(m.path, m.reg)
	if err != nil && (m.err == nil || m.err.Error() != err.Error()) {
		m.log("write metrics", err)
	}
	m.err = err
}

func (m *metrics) wake() {
	m.start.Do(func() { go m.writer() })
	select {
	case m.ring <- struct{}{}:
	default: // A write is pending; it will see these values.
	}
}

// beat refreshes the gauges from the runner's state and writes the file.
// It runs on the owner goroutine (from Runner.beat).
func (m *metrics) beat(r *Runner) {
	if m == nil {
		return
	}
	m.refresh(r)
	m.wake()
}

// refresh sets the gauges and catches the counters up with the runner.
func (m *metrics) refresh(r *Runner) {
	m.queueDepth.Set(float64(r.pend.len()))
	busy, cur := 0.0, 0.0
	if r.cur != nil {
		busy, cur = 1, float64(r.cur.bytes)
	}
	m.busy.Set(busy)
	m.curBytes.Set(cur)
	if starts := max(r.toolStarts-1, 0); starts > m.seenStarts {
		m.restarts.Add(float64(starts - m.seenStarts))
		m.seenStarts = starts
	}
	if r.beats > m.seenBeats {
		m.heartbeats.Add(float64(r.beats - m.seenBeats))
		m.seenBeats = r.beats
	}
	if r.phase != m.lastPhase {
		if m.lastPhase != "" {
			m.phase.WithLabelValues(string(m.lastPhase)).Set(0)
		}
		m.phase.WithLabelValues(string(r.phase)).Set(1)
		m.lastPhase = r.phase
	}
	m.leaseLeft.Set(r.lease.remaining(r, time.Now()))
}

// result counts a committed result; ran says the tool ran the command (its
// run time is observed). It runs on the owner goroutine.
func (m *metrics) result(r *Runner, res *protocol.Result, ran bool) {
	if m == nil {
		return
	}
	m.commands.WithLabelValues(string(res.Status), string(res.ExitReason)).Inc()
	m.outputBytes.Add(float64(res.Stats.Bytes))
	if ran {
		m.runTime.Observe(res.EndTS.Sub(res.StartTS.Time).Seconds())
	}
	m.refresh(r)
	m.wake()
}

// close writes the file a last time (after the final heartbeat of a stop)
// and ends the writer.
func (m *metrics) close() {
	if m == nil {
		return
	}
	started := true
	m.start.Do(func() { started = false })
	close(m.ring)
	if started {
		<-m.done
	}
	m.write()
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
		left = r.cfg.LeaseGrace - now.Sub(r.started)
	case !l.valid || l.ignored:
		return math.Inf(1)
	case l.ttl > 0:
		left = l.ttl - now.Sub(l.renewedAt)
	default:
		left = l.lease.ExpiresAt.Sub(now)
	}
	return max(left, 0).Seconds()
}

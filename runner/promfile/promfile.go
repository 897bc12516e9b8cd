// Package promfile writes a runner's figures (runner.Observer) in the
// Prometheus text exposition format to a file, for node_exporter's
// textfile collector: cmd/runner's --metrics-file. It lives outside the
// runner library so that the runner links neither client_golang nor
// net/http nor protobuf.
//
// The values live in a client_golang registry; the runner's owner
// goroutine updates them (cheap, lock-free) on every heartbeat and every
// result and rings a doorbell; a writer goroutine then writes the file with
// prometheus.WriteToTextfile (a temporary file in the same directory, then
// a rename, so a scrape never sees half a file). Writes are coalesced (at
// most one per minInterval, a burst of results shares one) and never make
// the runner wait. The stop writes the final values.
//
// Counters count what this runner process did since it started (a new
// runner starts from zero, as Prometheus counters do; runner_start_time
// tells a restart). Label values are the runner's strings with any byte
// sequence that is not valid UTF-8 replaced by U+FFFD, so any session path
// works (PROTOCOL.md, the metrics file).
package promfile

import (
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/skillpilot/skillpilot/protocol"
	"github.com/skillpilot/skillpilot/runner"
)

// Writer is a runner.Observer that writes the metrics file.
type Writer struct {
	path string
	reg  *prometheus.Registry

	commands    *prometheus.CounterVec
	runTime     prometheus.Histogram
	outputBytes prometheus.Counter
	queueDepth  prometheus.Gauge
	busy        prometheus.Gauge
	curBytes    prometheus.Gauge
	current     *prometheus.GaugeVec // skillpilot_current_command_info
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
	mu    sync.Mutex // serialises writes (the writer goroutine and Close)
	err   error      // the last write error, logged once until a write works
	log   *slog.Logger
}

var _ runner.Observer = (*Writer)(nil)

// runTimeBuckets span 1 ms to about 4.7 hours, ×4 apart: EDA commands run
// from milliseconds (a query) to hours (placement, routing).
var runTimeBuckets = prometheus.ExponentialBuckets(0.001, 4, 13)

// New prepares a writer of file (as given to --metrics-file, for the
// messages), whose directory must exist; it writes nothing until the
// runner starts it. log receives write failures.
func New(file string, log *slog.Logger) (*Writer, error) {
	path, err := filepath.Abs(file)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("runner: --metrics-file %s: its directory does not exist", file)
	}
	if log == nil {
		log = slog.Default()
	}
	return &Writer{path: path, reg: prometheus.NewRegistry(), ring: make(chan struct{}, 1), done: make(chan struct{}), log: log}, nil
}

// label makes s a valid label value: invalid UTF-8 becomes U+FFFD.
func label(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

// Start registers the metrics of the runner info describes.
func (m *Writer) Start(info runner.Info) error {
	// The session label keeps several runners' files on one host apart.
	labels := prometheus.Labels{"session": label(info.Session)}
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
	m.current = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "skillpilot_current_command_info",
		Help: "1 for the running command, labelled with its cmd_id and trace_id; no series when idle."}, []string{"cmd_id", "trace_id"})
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
	start.Set(float64(info.Started.UnixNano()) / 1e9)
	info1 := prometheus.NewGauge(prometheus.GaugeOpts{Name: "skillpilot_runner_info",
		Help:        "Always 1; the labels identify the runner.",
		ConstLabels: prometheus.Labels{"session_id": label(info.SessionID), "hostname": label(info.Hostname), "kind": label(string(info.Kind))}})
	info1.Set(1)
	for _, c := range []prometheus.Collector{m.commands, m.runTime, m.outputBytes, m.queueDepth, m.busy, m.curBytes, m.current,
		m.restarts, m.heartbeats, m.leaseLeft, m.phase, start, info1} {
		if err := f.Register(c); err != nil {
			return fmt.Errorf("runner: --metrics-file: %w", err)
		}
	}
	for _, p := range []protocol.Phase{protocol.PhaseStarting, protocol.PhaseIdle, protocol.PhaseBusy,
		protocol.PhaseError, protocol.PhaseStopping, protocol.PhaseStopped} {
		m.phase.WithLabelValues(string(p)).Set(0)
	}
	m.leaseLeft.Set(math.Inf(1))
	return nil
}

// minInterval spaces the writes: a write costs about half a millisecond
// (most of it the rename, which ext4 makes flush the new file), so a
// runner finishing a thousand commands a second writes ten times a second,
// not a thousand. Results during the pause share the next write.
const minInterval = 100 * time.Millisecond

// writer writes the file each time the doorbell rings, at most every
// minInterval (real time: it paces the machine's work).
func (m *Writer) writer() {
	for range m.ring {
		m.write()
		time.Sleep(minInterval)
	}
	close(m.done)
}

func (m *Writer) write() {
	m.mu.Lock()
	defer m.mu.Unlock()
	err := prometheus.WriteToTextfile(m.path, m.reg)
	if err != nil && (m.err == nil || m.err.Error() != err.Error()) {
		m.log.Warn("write metrics", "path", m.path, "err", err)
	}
	m.err = err
}

func (m *Writer) wake() {
	m.start.Do(func() { go m.writer() })
	select {
	case m.ring <- struct{}{}:
	default: // A write is pending; it will see these values.
	}
}

// Beat refreshes the gauges and writes the file.
func (m *Writer) Beat(s runner.Snapshot) {
	m.refresh(s)
	m.wake()
}

// refresh sets the gauges and catches the counters up with the runner.
func (m *Writer) refresh(s runner.Snapshot) {
	m.queueDepth.Set(float64(s.QueueDepth))
	busy := 0.0
	if s.Busy {
		busy = 1
	}
	m.busy.Set(busy)
	m.curBytes.Set(float64(s.CurrentOutputBytes))
	m.current.Reset() // One series at most: the running command's.
	if s.CurrentCmdID != "" {
		m.current.WithLabelValues(label(s.CurrentCmdID), label(s.CurrentTraceID)).Set(1)
	}
	if s.ToolRestarts > m.seenStarts {
		m.restarts.Add(float64(s.ToolRestarts - m.seenStarts))
		m.seenStarts = s.ToolRestarts
	}
	if s.Heartbeats > m.seenBeats {
		m.heartbeats.Add(float64(s.Heartbeats - m.seenBeats))
		m.seenBeats = s.Heartbeats
	}
	if s.Phase != m.lastPhase {
		if m.lastPhase != "" {
			m.phase.WithLabelValues(string(m.lastPhase)).Set(0)
		}
		m.phase.WithLabelValues(string(s.Phase)).Set(1)
		m.lastPhase = s.Phase
	}
	m.leaseLeft.Set(s.LeaseRemaining)
}

// Result counts a committed result; ran says the tool ran the command (its
// run time is observed).
func (m *Writer) Result(res *protocol.Result, ran bool, s runner.Snapshot) {
	m.commands.WithLabelValues(string(res.Status), string(res.ExitReason)).Inc()
	m.outputBytes.Add(float64(res.Stats.Bytes))
	if ran {
		m.runTime.Observe(res.EndTS.Sub(res.StartTS.Time).Seconds())
	}
	m.refresh(s)
	m.wake()
}

// Close writes the file a last time (after the final heartbeat of a stop)
// and ends the writer.
func (m *Writer) Close() {
	started := true
	m.start.Do(func() { started = false })
	close(m.ring)
	if started {
		<-m.done
	}
	m.write()
}

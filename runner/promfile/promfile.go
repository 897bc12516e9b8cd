// Package promfile writes a runner's figures (runner.Observer) in the
// Prometheus text exposition format to a file, for node_exporter's
// textfile collector: cmd/runner's --metrics-file. It lives outside the
// runner library, which knows only the Observer interface.
//
// The values live in the Writer; the runner's owner goroutine updates them
// (under a mutex, cheap) on every heartbeat and every result and rings a
// doorbell; a writer goroutine then writes the file in the text format
// (version 0.0.4: families sorted by name, labels by name, series by
// their labels' values, as Prometheus' own client writes it) through a
// temporary file in the same directory and a rename, so a scrape never
// sees half a file. The format is written here rather than with
// client_golang, which would link net/http, TLS and protobuf into the
// runner and cost its every start about 8 ms of initialisation (issue 44). Writes are coalesced (at
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
	"bytes"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
	"github.com/skillpilot/skillpilot/runner"
)

// Writer is a runner.Observer that writes the metrics file.
type Writer struct {
	path string

	mu sync.Mutex // guards what follows, the writes, and err
	// The session label, on every series (it keeps several runners'
	// files on one host apart), and the runner's identity.
	session, sessionID, hostname, kind string
	startTime                          float64
	commands                           map[[2]string]float64 // by status, exit_reason
	runBuckets                         []uint64              // per runTimeBuckets bound (not cumulative)
	runSum                             float64
	runCount                           uint64
	outputBytes                        float64
	queueDepth, busy, curBytes         float64
	curCmdID, curTraceID               string // "" when idle: no series
	restarts, heartbeats               float64
	leaseLeft                          float64
	phases                             map[string]float64

	// Owned by the runner's goroutine: what was already added to counters.
	seenStarts, seenBeats int64
	lastPhase             protocol.Phase

	ring  chan struct{}
	done  chan struct{}
	start sync.Once // starts the writer at the first write
	err   error     // the last write error, logged once until a write works
	log   *slog.Logger
}

var _ runner.Observer = (*Writer)(nil)

// runTimeBuckets span 1 ms to about 4.7 hours, ×4 apart: EDA commands run
// from milliseconds (a query) to hours (placement, routing).
var runTimeBuckets = func() []float64 {
	b := make([]float64, 13)
	for i, v := 0, 0.001; i < len(b); i, v = i+1, v*4 {
		b[i] = v
	}
	return b
}()

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
	return &Writer{path: path, ring: make(chan struct{}, 1), done: make(chan struct{}), log: log}, nil
}

// label makes s a valid label value: invalid UTF-8 becomes U+FFFD.
func label(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

// phases are the values of the skillpilot_phase series.
var phases = []protocol.Phase{protocol.PhaseStarting, protocol.PhaseIdle, protocol.PhaseBusy,
	protocol.PhaseError, protocol.PhaseStopping, protocol.PhaseStopped}

// Start sets up the metrics of the runner info describes.
func (m *Writer) Start(info runner.Info) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.session, m.sessionID, m.hostname, m.kind = label(info.Session), label(info.SessionID), label(info.Hostname), label(string(info.Kind))
	m.startTime = float64(info.Started.UnixNano()) / 1e9
	m.commands = map[[2]string]float64{}
	m.runBuckets = make([]uint64, len(runTimeBuckets))
	m.phases = map[string]float64{}
	for _, p := range phases {
		m.phases[string(p)] = 0
	}
	m.leaseLeft = math.Inf(1)
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
	err := writeAtomic(m.path, m.text())
	if err != nil && (m.err == nil || m.err.Error() != err.Error()) {
		m.log.Warn("write metrics", "path", m.path, "err", err)
	}
	m.err = err
}

// writeAtomic writes data to path through a temporary file beside it
// (mode 0644, as node_exporter's textfile collector expects to read it)
// and a rename.
func writeAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path))
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // Gone after the rename; a leftover after a failure.
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
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
	m.mu.Lock()
	m.refresh(s)
	m.mu.Unlock()
	m.wake()
}

// refresh sets the gauges and catches the counters up with the runner
// (m.mu held).
func (m *Writer) refresh(s runner.Snapshot) {
	m.queueDepth = float64(s.QueueDepth)
	m.busy = 0
	if s.Busy {
		m.busy = 1
	}
	m.curBytes = float64(s.CurrentOutputBytes)
	m.curCmdID, m.curTraceID = "", "" // One series at most: the running command's.
	if s.CurrentCmdID != "" {
		m.curCmdID, m.curTraceID = label(s.CurrentCmdID), label(s.CurrentTraceID)
	}
	if s.ToolRestarts > m.seenStarts {
		m.restarts += float64(s.ToolRestarts - m.seenStarts)
		m.seenStarts = s.ToolRestarts
	}
	if s.Heartbeats > m.seenBeats {
		m.heartbeats += float64(s.Heartbeats - m.seenBeats)
		m.seenBeats = s.Heartbeats
	}
	if s.Phase != m.lastPhase {
		if m.lastPhase != "" {
			m.phases[string(m.lastPhase)] = 0
		}
		m.phases[string(s.Phase)] = 1
		m.lastPhase = s.Phase
	}
	m.leaseLeft = s.LeaseRemaining
}

// Result counts a committed result; ran says the tool ran the command (its
// run time is observed).
func (m *Writer) Result(res *protocol.Result, ran bool, s runner.Snapshot) {
	m.mu.Lock()
	m.commands[[2]string{string(res.Status), string(res.ExitReason)}]++
	m.outputBytes += float64(res.Stats.Bytes)
	if ran {
		d := res.EndTS.Sub(res.StartTS.Time).Seconds()
		m.runSum += d
		m.runCount++
		for i, le := range runTimeBuckets {
			if d <= le {
				m.runBuckets[i]++
				break
			}
		}
	}
	m.refresh(s)
	m.mu.Unlock()
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

// text is the metrics file (m.mu held): the families in name order.
func (m *Writer) text() []byte {
	var t textWriter
	t.family("skillpilot_busy", "gauge", "1 while a command runs, else 0.")
	t.sample("skillpilot_busy", m.busy, "session", m.session)
	t.family("skillpilot_command_run_seconds", "histogram", "Run time of the commands the tool ran, from the moment the command was typed to its result.")
	var cum uint64
	for i, le := range runTimeBuckets {
		cum += m.runBuckets[i]
		t.sample("skillpilot_command_run_seconds_bucket", float64(cum), "le", formatFloat(le), "session", m.session)
	}
	t.sample("skillpilot_command_run_seconds_bucket", float64(m.runCount), "le", "+Inf", "session", m.session)
	t.sample("skillpilot_command_run_seconds_sum", m.runSum, "session", m.session)
	t.sample("skillpilot_command_run_seconds_count", float64(m.runCount), "session", m.session)
	t.family("skillpilot_commands_total", "counter", "Results written by this runner, by status and exit_reason (every command file, including invalid ones and those cancelled before they started).")
	keys := make([][2]string, 0, len(m.commands))
	for k := range m.commands {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b [2]string) int { // By the labels' values in name order: exit_reason, session, status.
		if a[1] != b[1] {
			return strings.Compare(a[1], b[1])
		}
		return strings.Compare(a[0], b[0])
	})
	for _, k := range keys {
		t.sample("skillpilot_commands_total", m.commands[k], "exit_reason", k[1], "session", m.session, "status", k[0])
	}
	if m.curCmdID != "" {
		t.family("skillpilot_current_command_info", "gauge", "1 for the running command, labelled with its cmd_id and trace_id; no series when idle.")
		t.sample("skillpilot_current_command_info", 1, "cmd_id", m.curCmdID, "session", m.session, "trace_id", m.curTraceID)
	}
	t.family("skillpilot_current_output_bytes", "gauge", "Bytes the running command has printed so far (0 when idle).")
	t.sample("skillpilot_current_output_bytes", m.curBytes, "session", m.session)
	t.family("skillpilot_heartbeats_total", "counter", "Heartbeats written; equals the counter in state/heartbeat.json.")
	t.sample("skillpilot_heartbeats_total", m.heartbeats, "session", m.session)
	t.family("skillpilot_lease_remaining_seconds", "gauge", "Time until the lease expires on the runner's clock; +Inf when no lease applies, 0 once expired.")
	t.sample("skillpilot_lease_remaining_seconds", m.leaseLeft, "session", m.session)
	t.family("skillpilot_output_bytes_total", "counter", "Bytes of output of the finished commands (their output files).")
	t.sample("skillpilot_output_bytes_total", m.outputBytes, "session", m.session)
	t.family("skillpilot_phase", "gauge", "1 for the runner's current phase (state.json phase), 0 for the others.")
	names := make([]string, 0, len(m.phases))
	for p := range m.phases {
		names = append(names, p)
	}
	slices.Sort(names)
	for _, p := range names {
		t.sample("skillpilot_phase", m.phases[p], "phase", p, "session", m.session)
	}
	t.family("skillpilot_queue_depth", "gauge", "Commands waiting in queue/ as the runner knows them.")
	t.sample("skillpilot_queue_depth", m.queueDepth, "session", m.session)
	t.family("skillpilot_runner_info", "gauge", "Always 1; the labels identify the runner.")
	t.sample("skillpilot_runner_info", 1, "hostname", m.hostname, "kind", m.kind, "session", m.session, "session_id", m.sessionID)
	t.family("skillpilot_runner_start_time_seconds", "gauge", "When this runner started, in seconds since the Unix epoch (its clock).")
	t.sample("skillpilot_runner_start_time_seconds", m.startTime, "session", m.session)
	t.family("skillpilot_tool_restarts_total", "counter", "Starts of the tool after the first one (after a crash, an exit, a cancel that killed it, a failed start).")
	t.sample("skillpilot_tool_restarts_total", m.restarts, "session", m.session)
	return t.b.Bytes()
}

// textWriter writes the Prometheus text exposition format.
type textWriter struct{ b bytes.Buffer }

func (t *textWriter) family(name, typ, help string) {
	t.b.WriteString("# HELP " + name + " " + helpEscaper.Replace(help) + "\n")
	t.b.WriteString("# TYPE " + name + " " + typ + "\n")
}

// sample writes one series: labels are name, value pairs in name order.
func (t *textWriter) sample(name string, v float64, labels ...string) {
	t.b.WriteString(name)
	for i := 0; i+1 < len(labels); i += 2 {
		if i == 0 {
			t.b.WriteByte('{')
		} else {
			t.b.WriteByte(',')
		}
		t.b.WriteString(labels[i] + `="` + valueEscaper.Replace(labels[i+1]) + `"`)
	}
	if len(labels) > 0 {
		t.b.WriteByte('}')
	}
	t.b.WriteString(" " + formatFloat(v) + "\n")
}

var (
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
	valueEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
)

// formatFloat writes a value as Prometheus' clients do.
func formatFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	case math.IsNaN(f):
		return "NaN"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

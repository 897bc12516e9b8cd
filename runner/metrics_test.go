package runner

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/skillpilot/skillpilot/internal/testenv"
	"github.com/skillpilot/skillpilot/protocol"
)

// promtool returns the path of promtool: a failure under CI, a skip with
// the package name elsewhere.
func promtool(t *testing.T) string {
	t.Helper()
	return testenv.NeedTool(t, "promtool", "prometheus")
}

// checkMetrics runs `promtool check metrics` on the file (it lints names,
// types, help and units) and parses it.
func checkMetrics(t *testing.T, tool, path string) map[string]*dto.MetricFamily {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(tool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(data)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s\nfile:\n%s", err, out, data)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// value returns the value of the one sample of a family whose labels
// include want.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	t.Helper()
	f := fams[name]
	if f == nil {
		t.Fatalf("no metric %s", name)
	}
	var found []float64
	for _, m := range f.Metric {
		labels := map[string]string{}
		for _, l := range m.Label {
			labels[l.GetName()] = l.GetValue()
		}
		ok := true
		for k, v := range want {
			ok = ok && labels[k] == v
		}
		if !ok {
			continue
		}
		switch {
		case m.Counter != nil:
			found = append(found, m.Counter.GetValue())
		case m.Gauge != nil:
			found = append(found, m.Gauge.GetValue())
		case m.Histogram != nil:
			found = append(found, float64(m.Histogram.GetSampleCount()))
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s%v: %d samples", name, want, len(found))
	}
	return found[0]
}

// TestMetricsFile runs commands that end every way (ok, Tcl error, exit,
// cancel while running, cancel while queued, invalid file), checks the
// metrics file with promtool while the runner runs and after it stopped,
// and compares every value with what the session's files say.
func TestMetricsFile(t *testing.T) {
	tool := promtool(t)
	path := filepath.Join(t.TempDir(), "runner.prom")
	h := newHarness(t, func(c *Config) { c.MetricsFile = path }).start()
	h.writeFile(protocol.FileLease, `{"lease_id":"m","ttl_ms":600000,"counter":1}`)
	names := []string{h.submit("puts hello"), h.submit("error boom"), h.submit("exit 3"),
		h.submit("puts [string repeat x 1000]")}
	for _, n := range names {
		h.result(n)
	}
	blocker := h.submit("puts started; flush stdout; after 60000")
	queued := h.submit("puts never")
	h.waitFor("the blocker's output", func() bool {
		b, _ := os.ReadFile(filepath.Join(h.dir, protocol.DirOutput, protocol.OutputName(blocker)))
		return strings.Contains(string(b), "started")
	})
	h.writeFile(protocol.FileCancel, `{"cmd_id":"`+cmdID(queued)+`"}`)
	h.result(queued)
	h.writeFile(protocol.FileCancel, `{"cmd_id":"`+cmdID(blocker)+`"}`)
	h.result(blocker)
	h.writeFile(rel(protocol.DirQueue, "cmd_99_bad.json"), `{"cmd_id":"bad","seq":99}`)
	h.result("cmd_99_bad.json")
	last := h.submit("expr 6*7")
	h.result(last)

	// While it runs: the file passes promtool and catches up with the
	// results (written right after each one, coalesced).
	h.waitFor("the metrics file to count 8 results", func() bool {
		if _, err := os.Stat(path); err != nil {
			return false
		}
		fams := checkMetrics(t, tool, path)
		total := 0.0
		if f := fams["skillpilot_commands_total"]; f != nil {
			for _, m := range f.Metric {
				total += m.Counter.GetValue()
			}
		}
		return total == 8
	})
	fams := checkMetrics(t, tool, path)
	if v := value(t, fams, "skillpilot_lease_remaining_seconds", nil); v <= 0 || v > 600 {
		t.Errorf("lease remaining %v s, want within (0, 600]", v)
	}
	h.stop(protocol.StopGraceful)

	// After the stop: every value against the session's own files.
	fams = checkMetrics(t, tool, path)
	byLabel := map[[2]string]float64{}
	var ran, bytesOut float64
	entries, _ := os.ReadDir(filepath.Join(h.dir, protocol.DirResult))
	for _, e := range entries {
		res := h.result(e.Name())
		byLabel[[2]string{string(res.Status), string(res.ExitReason)}]++
		bytesOut += float64(res.Stats.Bytes)
		if res.ExitReason != protocol.ReasonInvalidRequest && res.ExitReason != protocol.ReasonCancelledQueued {
			ran++
		}
	}
	if len(entries) != 8 {
		t.Fatalf("%d results, want 8", len(entries))
	}
	for k, n := range byLabel {
		if got := value(t, fams, "skillpilot_commands_total", map[string]string{"status": k[0], "exit_reason": k[1]}); got != n {
			t.Errorf("commands_total{status=%s,exit_reason=%s} = %v, the session has %v", k[0], k[1], got, n)
		}
	}
	if got := value(t, fams, "skillpilot_command_run_seconds", nil); got != ran {
		t.Errorf("run-time histogram counts %v commands, %v ran", got, ran)
	}
	if got := value(t, fams, "skillpilot_output_bytes_total", nil); got != bytesOut {
		t.Errorf("output_bytes_total %v, results say %v", got, bytesOut)
	}
	st := h.state()
	var hb protocol.Heartbeat
	b, err := os.ReadFile(filepath.Join(h.dir, protocol.FileHeartbeat))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &hb); err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"skillpilot_tool_restarts_total", nil, float64(st.ToolStarts - 1)},
		{"skillpilot_heartbeats_total", nil, float64(hb.Counter)},
		{"skillpilot_queue_depth", nil, 0},
		{"skillpilot_busy", nil, 0},
		{"skillpilot_current_output_bytes", nil, 0},
		{"skillpilot_phase", map[string]string{"phase": "stopped"}, 1},
		{"skillpilot_phase", map[string]string{"phase": "busy"}, 0},
		{"skillpilot_runner_info", map[string]string{"session_id": st.SessionID, "kind": "tcl"}, 1},
	}
	for _, c := range checks {
		if got := value(t, fams, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, the session says %v", c.name, c.labels, got, c.want)
		}
	}
	if st.ToolStarts < 3 {
		t.Errorf("tool_starts %d: exit 3 and the cancel should each have restarted tclsh", st.ToolStarts)
	}
	var start time.Time
	for _, e := range h.events() {
		if e.Event == protocol.EvRunnerStart {
			start = e.TS.Time
		}
	}
	got := value(t, fams, "skillpilot_runner_start_time_seconds", nil)
	if d := math.Abs(got - float64(start.UnixNano())/1e9); d > 60 {
		t.Errorf("runner_start_time %v is %.1fs from the runner_start event", got, d)
	}
	for _, f := range fams {
		for _, m := range f.Metric {
			if !hasLabel(m, "session", h.dir) {
				t.Errorf("%s has no session=%q label", f.GetName(), h.dir)
			}
		}
	}
	// No temporary file is left beside it.
	left, _ := filepath.Glob(path + "*")
	if len(left) != 1 {
		t.Errorf("files beside the metrics file: %v", left)
	}
}

// TestMetricsFileBadDirectory: a --metrics-file in a missing directory is
// refused at start, before anything runs.
func TestMetricsFileBadDirectory(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MetricsFile = filepath.Join(t.TempDir(), "missing", "x.prom") })
	if _, err := Open(h.cfg); err == nil || !strings.Contains(err.Error(), "metrics-file") {
		t.Fatalf("Open: %v, want an error naming --metrics-file", err)
	}
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.Label {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}

func cmdID(name string) string {
	_, id, _ := protocol.ParseCommandName(name)
	return id
}

// BenchmarkMetricsWrite measures one write of the metrics file (gather,
// encode, temp file, rename), which runs on the writer goroutine.
func BenchmarkMetricsWrite(b *testing.B) {
	h := newHarness(b, func(c *Config) { c.MetricsFile = filepath.Join(b.TempDir(), "runner.prom") })
	r, err := Open(h.cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer r.release()
	defer r.closeLogs()
	res := &protocol.Result{Status: protocol.StatusOK, ExitReason: protocol.ReasonMarkerSeen,
		StartTS: protocol.Now(), EndTS: protocol.Now(), Stats: protocol.Stats{Bytes: 100}}
	r.metrics.commands.WithLabelValues(string(res.Status), string(res.ExitReason)).Inc()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r.metrics.runTime.Observe(float64(i%1000) / 1000)
		r.metrics.write()
	}
}

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

package promfile

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/skillpilot/skillpilot/internal/testenv"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/protocol"
	"github.com/skillpilot/skillpilot/runner"
)

// longWait bounds every wait in these tests. It is an anti-hang guard, not
// a timing assertion.
const longWait = 90 * time.Second

// harness runs a runner in-process on a temporary session with a
// promfile Writer as its Observer.
type harness struct {
	t    *testing.T
	dir  string
	errc chan error
	seq  int64
}

func start(t *testing.T, metricsFile string) *harness {
	t.Helper()
	return startIn(t, filepath.Join(t.TempDir(), "sess"), metricsFile)
}

func startIn(t *testing.T, dir, metricsFile string) *harness {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	w, err := New(metricsFile, log)
	if err != nil {
		t.Fatal(err)
	}
	r, err := runner.Open(runner.Config{Session: dir, Heartbeat: 100 * time.Millisecond, Poll: 200 * time.Millisecond,
		KillGrace: time.Second, ParseGrace: 500 * time.Millisecond, ResyncWait: 3 * time.Second, Logger: log, Observer: w})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	h := &harness{t: t, dir: dir, errc: make(chan error, 1)}
	go func() { h.errc <- r.Run(context.Background(), nil) }()
	t.Cleanup(func() {
		if h.errc == nil {
			return
		}
		_ = os.WriteFile(filepath.Join(dir, protocol.FileStop), []byte(`{"mode":"force"}`), 0o600)
		h.waitExit()
	})
	return h
}

func (h *harness) waitExit() error {
	h.t.Helper()
	select {
	case err := <-h.errc:
		h.errc = nil
		return err
	case <-time.After(longWait):
		h.t.Fatal("the runner did not stop")
		return nil
	}
}

// stop asks for a stop through ctl/stop.json and waits for the exit.
func (h *harness) stop(mode protocol.StopMode) {
	h.t.Helper()
	h.writeFile(protocol.FileStop, fmt.Sprintf(`{"mode":%q}`, mode))
	if err := h.waitExit(); err != nil {
		h.t.Fatalf("Run: %v", err)
	}
}

func (h *harness) writeFile(rel, content string) {
	h.t.Helper()
	r, err := fsq.OpenRoot(h.dir)
	if err != nil {
		h.t.Fatal(err)
	}
	defer r.Close()
	if err := r.WriteAtomic(rel, []byte(content), 0o600, fsq.Volatile); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) submit(payload string) string {
	h.t.Helper()
	h.seq++
	c := protocol.Command{CmdID: fmt.Sprintf("c%d", h.seq), Seq: h.seq, Kind: protocol.KindTcl, Payload: payload}
	b, err := json.Marshal(c)
	if err != nil {
		h.t.Fatal(err)
	}
	name := protocol.CommandName(c.Seq, c.CmdID)
	h.writeFile(protocol.DirQueue+"/"+name, string(b))
	return name
}

// result waits for result/<name> and decodes it.
func (h *harness) result(name string) protocol.Result {
	h.t.Helper()
	var res protocol.Result
	h.waitFor("the result of "+name, func() bool {
		b, err := os.ReadFile(filepath.Join(h.dir, protocol.DirResult, name))
		if err != nil {
			return false
		}
		if err := json.Unmarshal(b, &res); err != nil {
			h.t.Fatalf("result %s: %v\n%s", name, err, b)
		}
		return true
	})
	return res
}

func (h *harness) state() protocol.State {
	h.t.Helper()
	var st protocol.State
	h.waitFor("state.json", func() bool {
		b, err := os.ReadFile(filepath.Join(h.dir, protocol.FileState))
		if err != nil {
			return false
		}
		if err := json.Unmarshal(b, &st); err != nil {
			h.t.Fatalf("state.json: %v", err)
		}
		return true
	})
	return st
}

// waitFor polls cond until it holds (bounded by longWait).
func (h *harness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(longWait)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (h *harness) events() []protocol.Event {
	h.t.Helper()
	b, err := os.ReadFile(filepath.Join(h.dir, protocol.FileMeta))
	if err != nil {
		h.t.Fatal(err)
	}
	b = b[:bytes.LastIndexByte(b, '\n')+1] // A last line without its newline is still being written.
	var evs []protocol.Event
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		var e protocol.Event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			h.t.Fatalf("meta.log line %q: %v", line, err)
		}
		evs = append(evs, e)
	}
	return evs
}

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
	h := start(t, path)
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
	h.writeFile(protocol.DirQueue+"/cmd_99_bad.json", `{"cmd_id":"bad","seq":99}`)
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
// refused before anything runs.
func TestMetricsFileBadDirectory(t *testing.T) {
	file := filepath.Join(t.TempDir(), "missing", "x.prom")
	if _, err := New(file, nil); err == nil || err.Error() != "runner: --metrics-file "+file+": its directory does not exist" {
		t.Fatalf("New: %v, want an error naming --metrics-file", err)
	}
}

// TestMetricsInvalidUTF8Session: a session whose path is not
// valid UTF-8 gets its metrics, the label's invalid bytes replaced by
// U+FFFD (it used to panic at the start).
func TestMetricsInvalidUTF8Session(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "m\xff")
	path := filepath.Join(base, "m.prom")
	h := startIn(t, dir, path)
	h.result(h.submit("expr 1"))
	h.stop(protocol.StopGraceful)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !utf8.Valid(data) {
		t.Fatalf("the metrics file is not valid UTF-8:\n%s", data)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(base, "m\uFFFD")
	for _, f := range fams {
		for _, m := range f.Metric {
			if !hasLabel(m, "session", want) {
				t.Errorf("%s has no session=%q label", f.GetName(), want)
			}
		}
	}
	if got := value(t, fams, "skillpilot_commands_total", map[string]string{"status": "ok"}); got != 1 {
		t.Errorf("commands_total{status=ok} = %v, want 1", got)
	}
	if tool, err := exec.LookPath("promtool"); err == nil {
		checkMetrics(t, tool, path)
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
	w, err := New(filepath.Join(b.TempDir(), "runner.prom"), nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := w.Start(runner.Info{Session: b.TempDir(), SessionID: "session_x", Hostname: "h", Kind: protocol.KindTcl, Started: time.Now()}); err != nil {
		b.Fatal(err)
	}
	res := &protocol.Result{Status: protocol.StatusOK, ExitReason: protocol.ReasonMarkerSeen,
		StartTS: protocol.Now(), EndTS: protocol.Now(), Stats: protocol.Stats{Bytes: 100}}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res.EndTS = protocol.Time{Time: res.StartTS.Add(time.Duration(i%1000) * time.Millisecond)}
		w.Result(res, true, runner.Snapshot{Phase: protocol.PhaseIdle})
		w.write()
	}
}

// TestMetricsCurrentCommand: skillpilot_current_command_info names the
// running command and its trace_id while it runs, and has no series once
// the runner is idle (PROTOCOL.md section 4, Correlation).
func TestMetricsCurrentCommand(t *testing.T) {
	tool := promtool(t)
	path := filepath.Join(t.TempDir(), "runner.prom")
	h := start(t, path)
	h.writeFile(protocol.DirQueue+"/cmd_1_long.json",
		`{"cmd_id":"long","seq":1,"kind":"tcl","payload":"after 60000","trace_id":"flow-7/place","labels":{"step":"place"}}`)
	h.waitFor("the running command's series", func() bool {
		if _, err := os.Stat(path); err != nil {
			return false
		}
		f := checkMetrics(t, tool, path)["skillpilot_current_command_info"]
		return f != nil && len(f.Metric) == 1
	})
	fams := checkMetrics(t, tool, path)
	if v := value(t, fams, "skillpilot_current_command_info", map[string]string{"cmd_id": "long", "trace_id": "flow-7/place"}); v != 1 {
		t.Fatalf("current_command_info = %v", v)
	}
	h.writeFile(protocol.FileCancel, "")
	h.result("cmd_1_long.json")
	h.waitFor("no series once idle", func() bool {
		f := checkMetrics(t, tool, path)["skillpilot_current_command_info"]
		return f == nil || len(f.Metric) == 0
	})
	h.stop(protocol.StopGraceful)
}

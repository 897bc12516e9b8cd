package runner

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
)

// endsOf returns the cmd_end events of evs by cmd_id.
func endsOf(t *testing.T, evs []protocol.Event) map[string]protocol.Event {
	t.Helper()
	ends := map[string]protocol.Event{}
	for _, e := range evs {
		if e.Event == protocol.EvCmdEnd {
			if _, dup := ends[e.CmdID]; dup {
				t.Errorf("two cmd_end for %s", e.CmdID)
			}
			ends[e.CmdID] = e
		}
	}
	return ends
}

// jsonOf renders v as JSON so that a detail value read back from meta.log
// (float64, nil) compares with a result's (*int).
func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// Meta.log alone tells each command's outcome. Every cmd_end
// carries its result's status, exit_reason, tool_rc (null when the tool
// gave none), exit_code and signal when the tool exited, error_code, and
// tool_restarted: an ok command, a Tcl error, a timeout and a tool exit.
func TestCmdEndSaysHowItEnded(t *testing.T) {
	t.Parallel()
	h := newHarness(t).start()
	names := []string{
		h.submit("set x 1"),
		h.submit("error boom"),
		h.submit("after 60000", withTimeout(0.3)),
		h.submit("exit 3"),
		h.submit("set y 2"),
	}
	results := map[string]protocol.Result{}
	for _, n := range names {
		r := h.result(n)
		results[r.CmdID] = r
	}
	h.stop(protocol.StopGraceful)
	ends := endsOf(t, h.events())
	if len(ends) != len(names) {
		t.Fatalf("%d cmd_end events for %d commands", len(ends), len(names))
	}
	for id, r := range results {
		e, ok := ends[id]
		if !ok {
			t.Errorf("%s: no cmd_end", id)
			continue
		}
		if e.Status != r.Status || e.ExitReason != r.ExitReason {
			t.Errorf("%s: cmd_end %s/%s, result %s/%s", id, e.Status, e.ExitReason, r.Status, r.ExitReason)
		}
		if v, ok := e.Detail["tool_rc"]; !ok || jsonOf(v) != jsonOf(r.ToolRC) {
			t.Errorf("%s: cmd_end tool_rc %v (present %v), result %s", id, v, ok, jsonOf(r.ToolRC))
		}
		want := map[string]any{}
		if r.ExitCode != nil {
			want["exit_code"] = *r.ExitCode
		}
		if r.Signal != "" {
			want["signal"] = r.Signal
		}
		if r.Error != nil {
			want["error_code"] = r.Error.Code
		}
		if r.ToolRestarted {
			want["tool_restarted"] = true
		}
		for _, k := range []string{"exit_code", "signal", "error_code", "tool_restarted"} {
			if jsonOf(e.Detail[k]) != jsonOf(want[k]) {
				t.Errorf("%s: cmd_end %s = %v, result says %v", id, k, e.Detail[k], want[k])
			}
		}
	}
	// The cases are the ones named: they are not all alike.
	if r := results["c4"]; r.ExitCode == nil || *r.ExitCode != 3 || ends["c4"].Detail["exit_code"] != float64(3) {
		t.Errorf("exit 3: result %+v, cmd_end %v", r, ends["c4"].Detail)
	}
	if r := results["c2"]; r.ToolRC == nil || *r.ToolRC == 0 || ends["c2"].Status != protocol.StatusError {
		t.Errorf("error boom: result %+v, cmd_end %+v", r, ends["c2"])
	}
	if ends["c3"].Status != protocol.StatusTimeout {
		t.Errorf("timeout: cmd_end %+v", ends["c3"])
	}
}

// A recovery at start writes one recovery_summary event with its counts;
// the cmd_end it writes for a dead runner's cmd_begin says how it ended.
func TestRecoverySummaryEvent(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	r1 := writeCmd(t, h.dir, 1, "r1", "puts x")
	r2 := writeCmd(t, h.dir, 2, "r2", "puts y")
	for _, n := range []string{r1, r2} {
		os.Rename(filepath.Join(h.dir, protocol.DirQueue, n), filepath.Join(h.dir, protocol.DirInflight, n))
	}
	h.writeDone(r2)
	// The dead runner began r1, and left a temporary state file and a
	// payload file behind.
	os.WriteFile(filepath.Join(h.dir, protocol.FileMeta),
		fmt.Appendf(nil, "{\"ts\":\"2026-01-01T00:00:00Z\",\"event\":\"cmd_begin\",\"cmd_id\":\"r1\",\"seq\":1,\"spool_start\":0}\n"), 0o600)
	os.WriteFile(filepath.Join(h.dir, protocol.DirState, ".state.json.123"), []byte("{"), 0o600)
	os.WriteFile(filepath.Join(h.dir, protocol.DirInflight, "payload_r1.tcl"), []byte("puts x"), 0o600)
	h.start()
	h.result(r1)
	h.stop(protocol.StopGraceful)
	evs := h.events()
	var sums []protocol.Event
	for _, e := range evs {
		if e.Event == protocol.EvRecoverySummary {
			sums = append(sums, e)
		}
	}
	if len(sums) != 1 {
		t.Fatalf("%d recovery_summary events", len(sums))
	}
	want := map[string]float64{"claimed": 2, "results_written": 1, "results_kept": 1, "cmd_end_written": 1, "files_removed": 2}
	for k, v := range want {
		if sums[0].Detail[k] != v {
			t.Errorf("recovery_summary %s = %v, want %v (%v)", k, sums[0].Detail[k], v, sums[0].Detail)
		}
	}
	end := endsOf(t, evs)["r1"]
	if end.ExitReason != protocol.ReasonRunnerRestarted || end.Detail["error_code"] != string(protocol.CodeRunnerRestarted) ||
		jsonOf(end.Detail["tool_rc"]) != "null" {
		t.Errorf("recovered cmd_end: %+v", end)
	}
	// A clean start writes none.
	h2 := newHarness(t).start()
	h2.result(h2.submit("set x 1"))
	h2.stop(protocol.StopGraceful)
	if n := countEvents(h2.events(), protocol.EvRecoverySummary); n != 0 {
		t.Errorf("a clean start wrote %d recovery_summary events", n)
	}
}

// A runner killed between a result's commit and the cmd_end that follows
// it, or whose log lost its last lines (PROTOCOL.md section 13), leaves a
// cmd_begin without its end: a command whose result was committed but
// whose cmd_end was lost gets its cmd_end at the next start,
// rebuilt from its result (detail.recovered), so every cmd_begin keeps its
// one cmd_end across crashes. A clean stop's log is left alone.
func TestLostCmdEndRebuiltFromResult(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	a := writeCmd(t, h.dir, 1, "a", "puts x")
	b := writeCmd(t, h.dir, 2, "b", "puts y")
	for _, n := range []string{a, b} {
		os.Remove(filepath.Join(h.dir, protocol.DirQueue, n))
	}
	h.writeDone(a)
	h.writeDone(b)
	// The dead runner logged both begins and only b's end.
	os.WriteFile(filepath.Join(h.dir, protocol.FileMeta), fmt.Appendf(nil,
		"{\"ts\":\"2026-01-01T00:00:00Z\",\"event\":\"cmd_begin\",\"cmd_id\":\"a\",\"seq\":1,\"spool_start\":0}\n"+
			"{\"ts\":\"2026-01-01T00:00:00Z\",\"event\":\"cmd_begin\",\"cmd_id\":\"b\",\"seq\":2,\"spool_start\":0}\n"+
			"{\"ts\":\"2026-01-01T00:00:01Z\",\"event\":\"cmd_end\",\"cmd_id\":\"b\",\"seq\":2,\"status\":\"ok\",\"exit_reason\":\"marker_seen\",\"spool_start\":0,\"spool_end\":0}\n"), 0o600)
	h.start()
	h.stop(protocol.StopGraceful)
	evs := h.events()
	ends := endsOf(t, evs) // Fails on a second cmd_end for b.
	end, ok := ends["a"]
	if !ok || end.Status != protocol.StatusOK || end.ExitReason != protocol.ReasonMarkerSeen || end.Detail["recovered"] != true ||
		jsonOf(end.Detail["tool_rc"]) != "0" {
		t.Fatalf("a's cmd_end: %+v (found %v)", end, ok)
	}
	sum := 0
	for _, e := range evs {
		if e.Event == protocol.EvRecoverySummary {
			sum++
			if e.Detail["cmd_end_written"] != float64(1) {
				t.Errorf("recovery_summary %v", e.Detail)
			}
		}
	}
	if sum != 1 {
		t.Errorf("%d recovery_summary events", sum)
	}
	// The next start after that clean stop reads the log's last line and
	// settles nothing.
	h.start()
	h.stop(protocol.StopGraceful)
	if n := countEvents(h.events(), protocol.EvRecoverySummary); n != 1 {
		t.Errorf("%d recovery_summary events after a clean restart", n)
	}
}

// A runner killed after a result's commit and before its
// cmd_end (and the move out of inflight/) leaves the command in inflight/
// with its result in result/. The next start keeps the result, and the
// cmd_end it writes follows that result (PROTOCOL.md §13, §22): its status,
// exit_reason, spool range and tool_rc, not runner_restarted.
func TestRecoveredEndFollowsKeptResult(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	a := writeCmd(t, h.dir, 1, "a", "puts x")
	os.Rename(filepath.Join(h.dir, protocol.DirQueue, a), filepath.Join(h.dir, protocol.DirInflight, a))
	h.writeFile(rel(protocol.DirResult, a), `{"protocol_version":1,"cmd_id":"a","seq":1,"status":"ok",`+
		`"exit_reason":"marker_seen","tool_rc":0,"start_ts":"2026-01-01T00:00:00Z","end_ts":"2026-01-01T00:00:01Z","spool_start":40,"spool_end":98,"stats":{"bytes":12,"lines":1,"duration_ms":5},"command_path":"archive/`+a+`"}`)
	os.WriteFile(filepath.Join(h.dir, protocol.FileMeta),
		[]byte(`{"ts":"2026-01-01T00:00:00Z","event":"cmd_begin","cmd_id":"a","seq":1,"spool_start":40}`+"\n"), 0o600)
	h.start()
	h.stop(protocol.StopGraceful)
	evs := h.events()
	end, ok := endsOf(t, evs)["a"]
	if !ok {
		t.Fatal("no cmd_end for a")
	}
	if end.Status != protocol.StatusOK || end.ExitReason != protocol.ReasonMarkerSeen || end.Detail["recovered"] != true ||
		jsonOf(end.Detail["tool_rc"]) != "0" || end.Detail["error_code"] != nil {
		t.Errorf("cmd_end does not follow the kept result: %+v", end)
	}
	if end.SpoolStart == nil || end.SpoolEnd == nil || *end.SpoolStart != 40 || *end.SpoolEnd != 98 {
		t.Errorf("cmd_end range %v..%v, want the result's 40..98", end.SpoolStart, end.SpoolEnd)
	}
	if r := h.result(a); r.Status != protocol.StatusOK || r.ExitReason != protocol.ReasonMarkerSeen {
		t.Errorf("the kept result changed: %+v", r)
	}
	for _, e := range evs {
		if e.Event == protocol.EvRecovered && (e.Status != protocol.StatusOK || e.Detail["had_result"] != true) {
			t.Errorf("recovered event does not follow the kept result: %+v", e)
		}
	}
	if _, err := os.Stat(filepath.Join(h.dir, protocol.DirInflight, a)); !os.IsNotExist(err) {
		t.Errorf("inflight/%s left: %v", a, err)
	}
}

// A command whose runner is killed (SIGKILL) mid-run can be
// replayed from meta.log and session.out (PROTOCOL.md §22): the recovered
// result and cmd_end start at its cmd_begin's spool_start and end no
// earlier than its last cmd_output, and the result's stats describe what
// its output file holds. Real runner process, real tclsh.
func TestRecoveredRangeReplays(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "s")
	p := startRunnerProc(t, "--session", dir, "--heartbeat", "100ms")
	h := &harness{t: t, dir: dir}
	h.result(writeCmd(t, dir, 1, "warm", "puts [string repeat w 39]")) // So the command starts past 0.
	name := writeCmd(t, dir, 2, "k", "puts [string repeat x 50]; flush stdout; after 60000")
	var outs []protocol.Event
	h.waitFor("a cmd_output of k", func() bool {
		outs = outs[:0]
		for _, e := range readEventsLoose(dir) {
			if e.Event == protocol.EvCmdOutput && e.CmdID == "k" {
				outs = append(outs, e)
			}
		}
		return len(outs) > 0
	})
	old := h.state().SessionID
	killedAt := time.Now()
	p.Kill()
	checkNoOrphans(t, dir)
	lastOut := *outs[len(outs)-1].SpoolEnd
	p = startRunnerProc(t, "--session", dir, "--heartbeat", "100ms")
	r := h.result(name)
	// Recovery writes its results before the runner serves; a stop
	// written meanwhile would be older than the runner (stale). The dead
	// runner's state.json may say idle too (its writes are coalesced, and
	// lag under load): wait for the new runner's.
	h.waitFor("serving", func() bool { st := h.state(); return st.Phase == protocol.PhaseIdle && st.SessionID != old })
	stopChecked(t, dir, p)
	if r.ExitReason != protocol.ReasonRunnerRestarted {
		t.Fatalf("%+v", r)
	}
	var begin, end *protocol.Event
	for _, e := range readEvents(t, dir) {
		if e.CmdID != "k" {
			continue
		}
		switch e.Event {
		case protocol.EvCmdBegin:
			begin = &e
		case protocol.EvCmdEnd:
			end = &e
		}
	}
	if begin == nil || end == nil || begin.SpoolStart == nil || *begin.SpoolStart == 0 {
		t.Fatalf("begin %+v end %+v", begin, end)
	}
	// It began at its cmd_begin and ran until its
	// runner's last sign of life (its last heartbeat or spool write, both
	// before the kill), not until the recovery; it names what it ran.
	if !r.StartTS.Equal(begin.TS.Time) || r.EndTS.Before(r.StartTS.Time) || r.EndTS.After(killedAt) {
		t.Errorf("result %v..%v, want from the cmd_begin's %v to at most the kill at %v", r.StartTS, r.EndTS, begin.TS, killedAt)
	}
	if want := r.EndTS.Sub(r.StartTS.Time).Milliseconds(); r.Stats.DurationMS != want || end.Detail["duration_ms"] != float64(want) {
		t.Errorf("duration_ms %d (cmd_end %v), want end_ts - start_ts = %d", r.Stats.DurationMS, end.Detail["duration_ms"], want)
	}
	if sha, _ := begin.Detail["payload_sha256"].(string); sha == "" || r.PayloadSHA256 != sha {
		t.Errorf("payload_sha256 %q, the cmd_begin says %q", r.PayloadSHA256, sha)
	}
	if r.SpoolStart != *begin.SpoolStart || r.SpoolEnd < lastOut {
		t.Errorf("result range %d..%d, want from the cmd_begin's %d to at least the last cmd_output's end %d",
			r.SpoolStart, r.SpoolEnd, *begin.SpoolStart, lastOut)
	}
	if *end.SpoolStart != r.SpoolStart || *end.SpoolEnd != r.SpoolEnd || end.Detail["recovered"] != true {
		t.Errorf("cmd_end %v..%v, result %d..%d", *end.SpoolStart, *end.SpoolEnd, r.SpoolStart, r.SpoolEnd)
	}
	spool, err := os.ReadFile(filepath.Join(dir, protocol.FileSpool))
	if err != nil || int64(len(spool)) < r.SpoolEnd {
		t.Fatalf("spool %d bytes (%v), result ends at %d", len(spool), err, r.SpoolEnd)
	}
	if !strings.Contains(string(spool[r.SpoolStart:r.SpoolEnd]), strings.Repeat("x", 50)) {
		t.Errorf("the range does not replay the command's output: %q", spool[r.SpoolStart:r.SpoolEnd])
	}
	out, err := os.ReadFile(filepath.Join(dir, r.OutputPath))
	if err != nil || r.OutputPath == "" || len(out) == 0 || r.Stats.Bytes != int64(len(out)) || r.OutputSHA256 != sha256Hex(string(out)) {
		t.Errorf("result stats %+v sha %s path %q; output file %q (%v)", r.Stats, r.OutputSHA256, r.OutputPath, out, err)
	}
	if end.Detail["bytes"] != float64(r.Stats.Bytes) {
		t.Errorf("cmd_end bytes %v, result %d", end.Detail["bytes"], r.Stats.Bytes)
	}
	invariants(t, dir, name)
}

// readEventsLoose reads meta.log as it is now, skipping a line still being
// written.
func readEventsLoose(dir string) []protocol.Event {
	b, _ := os.ReadFile(filepath.Join(dir, protocol.FileMeta))
	var evs []protocol.Event
	for _, l := range strings.Split(string(b), "\n") {
		var e protocol.Event
		if json.Unmarshal([]byte(l), &e) == nil {
			evs = append(evs, e)
		}
	}
	return evs
}

// Every externally observable transition is logged: the runner logs cmd_queued when it first sees a command in
// queue/, before its cmd_begin, and cmd_begin says how the command will
// run: kind, cancel_policy, the effective timeout_s and max_output_bytes
// (absent when none), and payload_sha256 (the result's). Real tclsh.
func TestQueuedEventAndBeginDetail(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.MaxOutputBytes = 7000 }).start()
	a := h.submit("expr 6*7", withTimeout(30), withPolicy(protocol.PolicyTerminateTool), withBudget(5000))
	b := h.submit("expr 1")
	ra, rb := h.result(a), h.result(b)
	h.stop(protocol.StopGraceful)
	queued := map[string]int{}
	begins := map[string]protocol.Event{}
	for i, e := range h.events() {
		switch e.Event {
		case protocol.EvCmdQueued:
			if _, dup := queued[e.CmdID]; dup {
				t.Errorf("two cmd_queued for %s", e.CmdID)
			}
			queued[e.CmdID] = i
			if e.Seq == 0 || e.Detail["file"] != "queue/"+protocol.CommandName(e.Seq, e.CmdID) {
				t.Errorf("cmd_queued %+v", e)
			}
		case protocol.EvCmdBegin:
			if _, ok := queued[e.CmdID]; !ok {
				t.Errorf("cmd_begin of %s without a cmd_queued before it", e.CmdID)
			}
			begins[e.CmdID] = e
		}
	}
	check := func(name string, r protocol.Result, want map[string]any) {
		t.Helper()
		d := begins[r.CmdID].Detail
		want["payload_sha256"] = r.PayloadSHA256
		want["kind"] = "tcl"
		for k, v := range want {
			if jsonOf(d[k]) != jsonOf(v) {
				t.Errorf("%s: cmd_begin detail %s = %v, want %v (%v)", name, k, d[k], v, d)
			}
		}
	}
	check("a", ra, map[string]any{"cancel_policy": "terminate_tool", "timeout_s": 30, "max_output_bytes": 5000})
	check("b", rb, map[string]any{"cancel_policy": "ctrl_c", "max_output_bytes": 7000})
	if _, ok := begins[rb.CmdID].Detail["timeout_s"]; ok {
		t.Errorf("b has no timeout, yet cmd_begin says timeout_s: %v", begins[rb.CmdID].Detail)
	}
}

// A command left in inflight/ without a result
// that another command began after (its result was still being written
// when the runner died) ends where the next cmd_begin started, not at the
// spool's end, and never short of its last cmd_output.
func TestRecoveredRangeEndsAtNextBegin(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	a := writeCmd(t, h.dir, 1, "a", "puts x")
	os.Rename(filepath.Join(h.dir, protocol.DirQueue, a), filepath.Join(h.dir, protocol.DirInflight, a))
	b := writeCmd(t, h.dir, 2, "b", "puts y")
	os.Remove(filepath.Join(h.dir, protocol.DirQueue, b))
	h.writeDone(b)
	h.writeFile(protocol.FileSpool, strings.Repeat("s", 300))
	h.writeFile(rel(protocol.DirOutput, protocol.OutputName(a)), "xyz\n")
	os.WriteFile(filepath.Join(h.dir, protocol.FileMeta), []byte(
		`{"ts":"2026-01-01T00:00:00Z","event":"cmd_begin","cmd_id":"a","seq":1,"spool_start":40}`+"\n"+
			`{"ts":"2026-01-01T00:00:00Z","event":"cmd_output","cmd_id":"a","seq":1,"spool_start":40,"spool_end":60}`+"\n"+
			`{"ts":"2026-01-01T00:00:01Z","event":"cmd_begin","cmd_id":"b","seq":2,"spool_start":100}`+"\n"+
			`{"ts":"2026-01-01T00:00:02Z","event":"cmd_end","cmd_id":"b","seq":2,"status":"ok","exit_reason":"marker_seen","spool_start":100,"spool_end":150}`+"\n"), 0o600)
	h.start()
	r := h.result(a)
	h.stop(protocol.StopGraceful)
	if r.ExitReason != protocol.ReasonRunnerRestarted || r.SpoolStart != 40 || r.SpoolEnd != 100 {
		t.Errorf("result %s %d..%d, want runner_restarted 40..100", r.ExitReason, r.SpoolStart, r.SpoolEnd)
	}
	if r.Stats.Bytes != 4 || r.Stats.Lines != 1 || r.OutputSHA256 != sha256Hex("xyz\n") || r.OutputPath != rel(protocol.DirOutput, protocol.OutputName(a)) {
		t.Errorf("result output %+v %s %s", r.Stats, r.OutputSHA256, r.OutputPath)
	}
	end := endsOf(t, h.events())["a"]
	if end.SpoolStart == nil || *end.SpoolStart != 40 || *end.SpoolEnd != 100 {
		t.Errorf("cmd_end %+v", end)
	}
}

package runner

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

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

// Issue 23.4: meta.log alone tells each command's outcome. Every cmd_end
// carries its result's status, exit_reason, tool_rc (null when the tool
// gave none), exit_code and signal when the tool exited, error_code, and
// tool_restarted: an ok command, a Tcl error, a timeout and a tool exit.
func TestCmdEndSaysHowItEnded(t *testing.T) {
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

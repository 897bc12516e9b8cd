package runner

import (
	"maps"
	"testing"

	"github.com/skillpilot/skillpilot/protocol"
)

func withTrace(id string, labels map[string]string) func(*protocol.Command) {
	return func(c *protocol.Command) { c.TraceID, c.Labels = id, labels }
}

// TestCorrelationCarried: a command's trace_id and labels reach its result,
// its cmd_begin, cmd_end and interrupt events, and state.json while it runs
// (PROTOCOL.md section 4, Correlation).
func TestCorrelationCarried(t *testing.T) {
	t.Parallel()
	h := newHarness(t).start()
	labels := map[string]string{"step": "place", "block": "cpu_top"}
	name := h.submit(`puts waiting; flush stdout; after 600000`, withTrace("flow-42/place", labels), withTimeout(1))
	h.waitFor("state.json to name the running command's trace", func() bool {
		st := h.state()
		return st.CurrentTraceID == "flow-42/place" && maps.Equal(st.CurrentLabels, labels)
	})
	res := h.result(name)
	if res.Status != protocol.StatusTimeout {
		t.Fatalf("status %s, want timeout", res.Status)
	}
	if res.TraceID != "flow-42/place" || !maps.Equal(res.Labels, labels) {
		t.Fatalf("result trace_id %q labels %v", res.TraceID, res.Labels)
	}
	plain := h.submit("expr 1")
	if r := h.result(plain); r.TraceID != "" || r.Labels != nil {
		t.Fatalf("a command without correlation got trace_id %q labels %v", r.TraceID, r.Labels)
	}
	seen := map[string]bool{}
	for _, ev := range h.events() {
		if ev.CmdID != "c1" {
			continue
		}
		switch ev.Event {
		case protocol.EvCmdBegin, protocol.EvCmdEnd, protocol.EvInterrupt:
			if ev.TraceID != "flow-42/place" || !maps.Equal(ev.Labels, labels) {
				t.Errorf("%s: trace_id %q labels %v", ev.Event, ev.TraceID, ev.Labels)
			}
			seen[ev.Event] = true
		}
	}
	for _, e := range []string{protocol.EvCmdBegin, protocol.EvCmdEnd, protocol.EvInterrupt} {
		if !seen[e] {
			t.Errorf("no %s event for c1", e)
		}
	}
}

// TestCorrelationRecovered: a command a dead runner left in inflight/ gets
// its runner_restarted result with its trace_id and labels, read from the
// file; a file whose fields break the rules gives a result without them.
func TestCorrelationRecovered(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.writeFile(rel(protocol.DirInflight, "cmd_0000000001_a.json"),
		`{"cmd_id":"a","seq":1,"kind":"tcl","payload":"expr 1","trace_id":"T-1","labels":{"run":"7"}}`)
	h.writeFile(rel(protocol.DirInflight, "cmd_0000000002_b.json"),
		`{"cmd_id":"b","seq":2,"kind":"tcl","payload":"expr 1","trace_id":"has space"}`)
	h.start()
	a := h.result("cmd_0000000001_a.json")
	if a.ExitReason != protocol.ReasonRunnerRestarted || a.TraceID != "T-1" || a.Labels["run"] != "7" {
		t.Fatalf("recovered a: %+v", a)
	}
	b := h.result("cmd_0000000002_b.json")
	if b.ExitReason != protocol.ReasonRunnerRestarted || b.TraceID != "" {
		t.Fatalf("recovered b: %+v", b)
	}
}

// TestCorrelationInvalid: a command whose trace_id or labels break the
// bounds gets an invalid_request result naming the field, and never runs.
func TestCorrelationInvalid(t *testing.T) {
	t.Parallel()
	h := newHarness(t).start()
	many := map[string]string{}
	for i := range protocol.MaxLabels + 1 {
		many[string(rune('a'+i))] = "v"
	}
	cases := []struct {
		mod   func(*protocol.Command)
		field string
	}{
		{withTrace("has space", nil), "trace_id"},
		{withTrace("", map[string]string{"Step": "x"}), "labels"},
		{withTrace("", map[string]string{"step": "a\nb"}), "labels.step"},
		{withTrace("", many), "labels"},
	}
	for _, c := range cases {
		name := h.submit(`set ::ran 1`, c.mod)
		res := h.result(name)
		if res.ExitReason != protocol.ReasonInvalidRequest || res.Error == nil ||
			len(res.Error.Message) < len(c.field) || res.Error.Message[:len(c.field)] != c.field {
			t.Errorf("%s: %+v %v", name, res, res.Error)
		}
	}
	if r := h.result(h.submit(`info exists ::ran`)); r.Value == nil || *r.Value != "0" {
		t.Fatalf("an invalid command ran: %+v", r)
	}
}

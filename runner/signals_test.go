package runner

import (
	"strings"
	"testing"

	"github.com/skillpilot/skillpilot/protocol"
)

// KILL kills the tool itself, not only the foreground job.
// Under bash with job control the running `sleep` is a process group of
// its own: TERM ends only it (bash, which ignores TERM, goes on: the
// command ends with rc 143, no restart), while KILL also kills bash: the
// command ends tool_died with signal KILL and tool_restarted, and the next
// command runs in a new tool. STOP stays refused.
func TestSignalKillRestartsTool(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.Kind = protocol.KindSh }).start()
	running := func(id string) func() bool {
		return func() bool { st := h.state(); return st.CurrentCmdID != nil && *st.CurrentCmdID == id }
	}
	// The command's own process prints "up": it is the terminal's
	// foreground group by then (interactive bash ignores a TERM sent
	// while it is still the foreground itself: 3 in 47 loaded runs).
	a := h.submit("sh -c 'echo up; exec sleep 60'")
	h.waitFor("c1 running", func() bool { return strings.Contains(readFile(h, a), "up") })
	if r := h.reply(h.request(1, "g1", protocol.OpSignal, map[string]any{"cmd_id": "c1", "signal": "STOP"})); r.Outcome != protocol.OutcomeRejected {
		t.Errorf("STOP: %+v", r)
	}
	if r := h.reply(h.request(2, "g2", protocol.OpSignal, map[string]any{"cmd_id": "c1", "signal": "TERM"})); r.Outcome != protocol.OutcomeDelivered {
		t.Fatalf("TERM: %+v", r)
	}
	res := h.result(a)
	if res.Status != protocol.StatusError || res.ExitReason != protocol.ReasonMarkerSeen || res.ToolRestarted ||
		res.ToolRC == nil || *res.ToolRC != 143 {
		t.Fatalf("after TERM: %+v", res)
	}
	starts := h.state().ToolStarts
	b := h.submit("sleep 60")
	h.waitFor("c2 running", running("c2"))
	if r := h.reply(h.request(3, "g3", protocol.OpSignal, map[string]any{"cmd_id": "c2", "signal": "KILL"})); r.Outcome != protocol.OutcomeDelivered {
		t.Fatalf("KILL: %+v", r)
	}
	res = h.result(b)
	if res.Status != protocol.StatusError || res.ExitReason != protocol.ReasonToolDied || !res.ToolRestarted ||
		res.Signal == "" || res.Error == nil || res.Error.Code != string(protocol.ReasonToolDied) {
		t.Fatalf("after KILL: %+v %+v", res, res.Error)
	}
	if r := h.result(h.submit("echo next")); r.Status != protocol.StatusOK || h.state().ToolStarts != starts+1 {
		t.Fatalf("next command: %+v, tool starts %d -> %d", r, starts, h.state().ToolStarts)
	}
}

package runner

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/skillpilot/skillpilot/protocol"
)

// checkContext compares an error's context as read from a file with want
// (both through JSON, so numbers compare as numbers).
func checkContext(t *testing.T, what string, got, want map[string]any) {
	t.Helper()
	norm := func(m map[string]any) map[string]any {
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		var out map[string]any
		jsonUnmarshal(b, &out)
		return out
	}
	if g, w := norm(got), norm(want); !reflect.DeepEqual(g, w) {
		t.Errorf("%s: context %v, want %v", what, g, w)
	}
}

// A result's error carries a context beside its code and
// message (PROTOCOL.md section 7 and 19): the file and the field of an
// invalid request, the limit it broke, the cmd_id and the other result of
// a duplicate, the effective timeout, the output budget, the request that
// cancelled it, how the tool ended. Real tclsh.
func TestResultErrorContext(t *testing.T) {
	t.Parallel()
	h := newHarness(t).start()
	h.seq = 100
	q := func(name, content string) string {
		h.writeFile(rel(protocol.DirQueue, name), content)
		return name
	}
	seqBad := q("cmd_3_bad3.json", `{"cmd_id":"bad3","seq":4,"kind":"tcl","payload":"puts x"}`)
	policyBad := q("cmd_9_bad9.json", `{"cmd_id":"bad9","seq":9,"kind":"tcl","payload":"x","cancel_policy":"nuke"}`)
	kindBad := q("cmd_15_bad15.json", `{"cmd_id":"bad15","seq":15,"kind":"sh","payload":"ls"}`)
	notJSON := q("cmd_16_bad16.json", `{not json`)
	big := "cmd_11_big.json"
	// Renamed into place whole: 16 MiB written in place could stall long
	// enough (a loaded disk) to be judged a file that stopped growing
	// before the limit, not one over it.
	if err := os.WriteFile(filepath.Join(h.dir, protocol.DirQueue, ".big"), make([]byte, protocol.MaxCommandSize+10), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(h.dir, protocol.DirQueue, ".big"), filepath.Join(h.dir, protocol.DirQueue, big)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		want map[string]any
	}{
		{seqBad, map[string]any{"file": "queue/" + seqBad, "field": "seq"}},
		{policyBad, map[string]any{"file": "queue/" + policyBad, "field": "cancel_policy"}},
		{kindBad, map[string]any{"file": "queue/" + kindBad, "field": "kind"}},
		{notJSON, map[string]any{"file": "queue/" + notJSON}},
		{big, map[string]any{"file": "queue/" + big, "limit": protocol.MaxCommandSize}},
	} {
		r := h.result(c.name)
		if r.Error == nil || r.Error.Code != protocol.CodeInvalidRequest {
			t.Fatalf("%s: %+v %+v", c.name, r, r.Error)
		}
		checkContext(t, c.name, r.Error.Context, c.want)
	}

	// A cmd_id that already has a result: the duplicate names both.
	first := h.submit("expr 1", func(c *protocol.Command) { c.CmdID = "twice" })
	if r := h.result(first); r.Status != protocol.StatusOK || r.Error != nil {
		t.Fatalf("first: %+v", r)
	}
	dup := h.submit("expr 2", func(c *protocol.Command) { c.CmdID = "twice" })
	r := h.result(dup)
	if r.Error == nil || r.Error.Code != protocol.CodeDuplicateCmdID {
		t.Fatalf("duplicate: %+v %+v", r, r.Error)
	}
	checkContext(t, "duplicate", r.Error.Context, map[string]any{"file": "queue/" + dup, "cmd_id": "twice", "other_result": "result/" + first})

	// The effective timeout.
	r = h.result(h.submit("after 60000", withTimeout(0.25)))
	if r.Status != protocol.StatusTimeout || r.Error == nil || r.Error.Code != protocol.CodeTimeout {
		t.Fatalf("timeout: %+v %+v", r, r.Error)
	}
	delete(r.Error.Context, "signal") // Plain tclsh dies of the Ctrl-C; tool_exit below checks how it ended.
	checkContext(t, "timeout", r.Error.Context, map[string]any{"timeout_s": 0.25})

	// The output budget, and the file that holds what was kept.
	name := h.submit(`while 1 {puts [string repeat x 40]}`, withBudget(1000))
	r = h.result(name)
	if r.Error == nil || r.Error.Code != protocol.CodeOutputLimit {
		t.Fatalf("output_limit: %+v %+v", r, r.Error)
	}
	delete(r.Error.Context, "signal") // As above; TestOutputLimitKeepsToolExit checks it.
	checkContext(t, "output_limit", r.Error.Context, map[string]any{"max_output_bytes": 1000, "file": r.OutputPath})

	// The request that cancelled a running command, and a queued one.
	running := h.submit("puts started; flush stdout; after 60000")
	h.waitFor("running", func() bool { s := h.state(); return s.CurrentCmdID != nil && *s.CurrentCmdID == "c"+fmt.Sprint(h.seq) })
	queued := h.submit("expr 3")
	rq := h.request(1, "stopq", protocol.OpCancel, map[string]any{"cmd_id": fmt.Sprintf("c%d", h.seq)})
	if rep := h.reply(rq); rep.Outcome != protocol.OutcomeCancelledQueued || rep.Context != nil {
		t.Errorf("cancel queued: %+v", rep)
	}
	rr := h.request(2, "stopr", protocol.OpCancel, map[string]any{"cmd_id": fmt.Sprintf("c%d", h.seq-1), "submitter": "me@host:1"})
	if rep := h.reply(rr); rep.Outcome != protocol.OutcomeCancelledRunning || rep.Context != nil {
		t.Errorf("cancel running: %+v", rep)
	}
	for n, want := range map[string]map[string]any{
		queued:  {"req_id": "stopq", "source": "ctl/" + rq},
		running: {"req_id": "stopr", "source": "ctl/" + rr, "submitter": "me@host:1"},
	} {
		r := h.result(n)
		if r.Status != protocol.StatusCancelled || r.Error == nil || r.Error.Code != protocol.CodeCancelled {
			t.Fatalf("%s: %+v %+v", n, r, r.Error)
		}
		// Plain tclsh dies of the Ctrl-C: the running one's context also
		// says how (signal), checked below for tool_exit.
		delete(r.Error.Context, "signal")
		checkContext(t, n, r.Error.Context, want)
	}

	// How the tool ended.
	r = h.result(h.submit("exit 3"))
	if r.Error == nil || r.Error.Code != protocol.CodeToolExit {
		t.Fatalf("exit: %+v %+v", r, r.Error)
	}
	checkContext(t, "tool_exit", r.Error.Context, map[string]any{"exit_code": 3})

	// An ok result has no error, so no context; a tool error has nothing
	// more to say than its code, message and tool_rc.
	if r := h.result(h.submit("expr 6*7")); r.Error != nil {
		t.Errorf("ok: %+v", r.Error)
	}
	if r := h.result(h.submit("error boom")); r.Error == nil || r.Error.Context != nil {
		t.Errorf("tool_error: %+v", r.Error)
	}
	h.stop(protocol.StopGraceful)
}

// A reply that refuses or cannot act carries a context: the
// invalid field and the request file of a rejected request, the limit it
// broke, the sessions of a stale one, the command named and where it is.
// Replies that acted carry none. Real tclsh.
func TestReplyErrorContext(t *testing.T) {
	t.Parallel()
	h := newHarness(t).start()
	done := h.submit("expr 1")
	h.result(done)
	sid := h.state().SessionID
	seq := int64(0)
	req := func(op protocol.Op, fields map[string]any) (string, protocol.ControlReply) {
		t.Helper()
		seq++
		name := h.request(seq, fmt.Sprintf("q%d", seq), op, fields)
		return name, h.reply(name)
	}
	type want struct {
		op      protocol.Op
		fields  map[string]any
		outcome protocol.Outcome
		ctx     func(name string) map[string]any
	}
	for _, c := range []want{
		{protocol.OpCancel, map[string]any{"scope": "nonsense", "cmd_id": "c1"}, protocol.OutcomeRejected,
			func(n string) map[string]any { return map[string]any{"field": "scope", "source": "ctl/" + n} }},
		{protocol.OpSignal, map[string]any{"cmd_id": "c1", "signal": "STOP"}, protocol.OutcomeRejected,
			func(n string) map[string]any {
				return map[string]any{"field": "signal", "source": "ctl/" + n, "cmd_id": "c1"}
			}},
		{protocol.OpCancel, map[string]any{"cmd_id": "nosuch"}, protocol.OutcomeNotFound,
			func(string) map[string]any { return map[string]any{"cmd_id": "nosuch"} }},
		{protocol.OpCancel, map[string]any{"cmd_id": "c1"}, protocol.OutcomeAlreadyFinished,
			func(string) map[string]any { return map[string]any{"cmd_id": "c1"} }},
		{protocol.OpCancel, map[string]any{"scope": "current"}, protocol.OutcomeIdle,
			func(string) map[string]any { return nil }},
		{protocol.OpSend, map[string]any{"cmd_id": "c1", "data_b64": "aGkK"}, protocol.OutcomeNotRunning,
			func(string) map[string]any { return map[string]any{"cmd_id": "c1", "cmd_state": "finished"} }},
		{protocol.OpCancel, map[string]any{"cmd_id": "c1", "session_id": "another"}, protocol.OutcomeStale,
			func(string) map[string]any {
				return map[string]any{"session_id": sid, "request_session_id": "another", "cmd_id": "c1"}
			}},
		{protocol.OpResize, map[string]any{"cols": 100, "rows": 40}, protocol.OutcomeDelivered,
			func(string) map[string]any { return nil }},
	} {
		name, rep := req(c.op, c.fields)
		if rep.Outcome != c.outcome {
			t.Errorf("%s %v: %s %q, want %s", c.op, c.fields, rep.Outcome, rep.Message, c.outcome)
			continue
		}
		checkContext(t, fmt.Sprintf("%s %v", c.op, c.fields), rep.Context, c.ctx(name))
	}
	// A request over the size limit names the limit.
	seq++
	big := protocol.RequestName(seq, "big")
	if err := os.WriteFile(filepath.Join(h.dir, protocol.DirCtl, ".big"), make([]byte, protocol.MaxRequestSize+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(h.dir, protocol.DirCtl, ".big"), filepath.Join(h.dir, protocol.DirCtl, big)); err != nil {
		t.Fatal(err)
	}
	rep := h.reply(big)
	if rep.Outcome != protocol.OutcomeRejected {
		t.Fatalf("too large: %+v", rep)
	}
	checkContext(t, "too large", rep.Context, map[string]any{"limit": protocol.MaxRequestSize, "source": "ctl/" + big})
	h.stop(protocol.StopGraceful)
}

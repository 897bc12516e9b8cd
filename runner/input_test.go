package runner

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
)

// Send, signal and resize requests against the fake tool and the fake
// clock (faketerm_test.go): what reaches the tool, in which order, what
// is refused, and expect timeouts measured on the runner's clock, without
// real waiting. The same promises on real tools and PTYs are in
// interactive_test.go.

func sendFields(id, data string, more map[string]any) map[string]any {
	f := map[string]any{"cmd_id": id, "data_b64": base64.StdEncoding.EncodeToString([]byte(data))}
	for k, v := range more {
		f[k] = v
	}
	return f
}

// reqSeq numbers the requests of a test (commands have their own seqs).
func (h *harness) send(seq int64, id, data string, more map[string]any) string {
	h.t.Helper()
	return h.request(seq, fmt.Sprintf("s%d", seq), protocol.OpSend, sendFields(id, data, more))
}

// A prompt answered twice through expect: each send waits for its prompt
// from the expect cursor (the end of the previous match), so the second
// does not match the first prompt again; the reply says where it matched.
func TestInputExpectCursorFake(t *testing.T) {
	t.Parallel()
	h := newFakeHarness(t, nil).start()
	a := h.submit("printn Overwrite?\ngets\nprintn Overwrite?\ngets\nvalue done")
	tool := h.waitTool(1)
	r1 := h.reply(h.send(1, "c1", "y\n", map[string]any{"expect": `Overwrite\?`}))
	if r1.Outcome != protocol.OutcomeDelivered || *r1.MatchStart != 0 || *r1.MatchEnd != 10 || *r1.Bytes != 2 || r1.SHA256 == "" {
		t.Fatalf("first send %+v", r1)
	}
	r2 := h.reply(h.send(2, "c1", "n\n", map[string]any{"expect": `Overwrite\?`}))
	if r2.Outcome != protocol.OutcomeDelivered || *r2.MatchStart != 16 || *r2.MatchEnd != 26 {
		t.Fatalf("second send %+v (the output is %q)", r2, "Overwrite?got y\nOverwrite?")
	}
	if res := h.result(a); res.Status != protocol.StatusOK || *res.Value != "done" {
		t.Fatalf("%+v", res)
	}
	if got := h.output(a); got != "Overwrite?got y\nOverwrite?got n\n" {
		t.Errorf("output %q", got)
	}
	if got := tool.inputsSoFar(); !slices.Equal(got, []string{"y\n", "n\n"}) {
		t.Errorf("the tool got %q", got)
	}
	evs := h.events()
	for _, id := range []string{"s1", "s2"} {
		e := requestEvents(evs, id)
		if len(e) != 1 || e[0].Event != protocol.EvInput || e[0].CmdID != "c1" || e[0].SpoolOffset == nil ||
			e[0].Detail["bytes"] != float64(2) || e[0].Detail["sha256"] == nil {
			t.Errorf("events of %s: %+v", id, e)
		}
	}
}

// Sends to one command apply in seq order: a plain send behind a send
// whose expect is pending waits for it (here until its expect times out,
// on the runner's clock), and only then reaches the tool.
func TestInputOrderBehindExpectFake(t *testing.T) {
	t.Parallel()
	h := newFakeHarness(t, nil).start()
	a := h.submit("printn First\ngets\nprintn Second\ngets")
	tool := h.waitTool(1)
	waitEvent(t, tool, "gets")
	n1 := h.send(1, "c1", "x\n", map[string]any{"expect": "Second", "expect_timeout_ms": 2000})
	n2 := h.send(2, "c1", "y\n", nil)
	n3 := h.send(3, "c1", "z\n", map[string]any{"expect": "Second"})
	h.taken(4)
	if _, err := os.Stat(filepath.Join(h.dir, protocol.DirAck, n2)); err == nil {
		t.Fatal("the plain send was answered while the send before it waited for its expect")
	}
	if got := tool.inputsSoFar(); len(got) != 0 {
		t.Fatalf("input reached the tool before the pending expect ended: %q", got)
	}
	h.clk.Advance(1999 * time.Millisecond)
	h.taken(5)
	if _, err := os.Stat(filepath.Join(h.dir, protocol.DirAck, n1)); err == nil {
		t.Fatal("expect timed out before its expect_timeout_ms on the runner's clock")
	}
	h.clk.Advance(time.Millisecond)
	if r := h.reply(n1); r.Outcome != protocol.OutcomeExpectTimeout || r.Bytes != nil || r.SHA256 != "" {
		t.Fatalf("first %+v", r)
	}
	if r := h.reply(n2); r.Outcome != protocol.OutcomeDelivered {
		t.Fatalf("second %+v", r)
	}
	if r := h.reply(n3); r.Outcome != protocol.OutcomeDelivered || *r.MatchStart != int64(len("Firstgot y\n")) {
		t.Fatalf("third %+v", r)
	}
	h.result(a)
	if got := tool.inputsSoFar(); !slices.Equal(got, []string{"y\n", "z\n"}) {
		t.Errorf("the tool got %q", got)
	}
}

// Input to a command that is not running is refused, never written:
// queued, finished, unknown (also a cmd_id that a queued command's name
// merely starts with), and the reply names the command's state.
func TestInputRefusedFake(t *testing.T) {
	t.Parallel()
	h := newFakeHarness(t, nil).start()
	done := h.submit("value 1")
	h.result(done)
	run := h.submit("printn ask\nhang")
	queued := h.submit("value 2") // c3
	tool := h.waitTool(1)
	waitEvent(t, tool, "hang")
	cases := []struct {
		op    protocol.Op
		id    string
		state string
	}{
		{protocol.OpSend, "c1", "finished"},
		{protocol.OpSend, "c3", "queued"},
		{protocol.OpSend, "c", "unknown"},
		{protocol.OpSend, "nosuch", "unknown"},
		{protocol.OpSignal, "c3", "queued"},
		{protocol.OpSignal, "c1", "finished"},
	}
	for i, c := range cases {
		f := sendFields(c.id, "secret-looking\n", nil)
		if c.op == protocol.OpSignal {
			f = map[string]any{"cmd_id": c.id, "signal": "USR1"}
		}
		r := h.reply(h.request(int64(10+i), fmt.Sprintf("r%d", i), c.op, f))
		if r.Outcome != protocol.OutcomeNotRunning || r.CmdState != c.state || r.CmdID != c.id || r.Bytes != nil {
			t.Errorf("%s to %s: %+v, want not_running %s", c.op, c.id, r, c.state)
		}
	}
	if got := tool.inputsSoFar(); len(got) != 0 {
		t.Fatalf("refused input reached the tool: %q", got)
	}
	if _, ok := tool.noted("fg SIGUSR1"); ok {
		t.Fatal("a refused signal was sent")
	}
	h.reply(h.request(30, "cx", protocol.OpCancel, map[string]any{"cmd_id": "c2"}))
	h.result(run)
	h.result(queued)
	for _, e := range h.events() {
		if e.Event == protocol.EvInput && e.Detail["outcome"] == string(protocol.OutcomeNotRunning) && e.Detail["cmd_state"] == nil {
			t.Errorf("refusal event without cmd_state: %+v", e)
		}
	}
}

// A secret is refused while the terminal echoes, and otherwise delivered
// with no trace of its bytes: no sha256 in the reply or the event.
func TestInputSecretFake(t *testing.T) {
	t.Parallel()
	h := newFakeHarness(t, func(int) fakeBehavior { return fakeBehavior{onInt: "prompt", echo: true} }).start()
	a := h.submit("printn Password:\ngets")
	tool := h.waitTool(1)
	waitEvent(t, tool, "gets")
	r := h.reply(h.send(1, "c1", "hunter2\n", map[string]any{"secret": true, "expect": "Password:"}))
	if r.Outcome != protocol.OutcomeRefusedEcho || r.SHA256 != "" || r.Bytes != nil {
		t.Fatalf("secret with echo on: %+v", r)
	}
	if got := tool.inputsSoFar(); len(got) != 0 {
		t.Fatalf("refused secret reached the tool: %q", got)
	}
	h.reply(h.request(2, "cx", protocol.OpCancel, map[string]any{"cmd_id": "c1"}))
	h.result(a)

	h2 := newFakeHarness(t, func(int) fakeBehavior { return fakeBehavior{onInt: "prompt"} }).start()
	b := h2.submit("printn Password:\ngets")
	r = h2.reply(h2.send(1, "c1", "hunter2\n", map[string]any{"secret": true, "expect": "Password:"}))
	if r.Outcome != protocol.OutcomeDelivered || r.SHA256 != "" || *r.Bytes != 8 {
		t.Fatalf("secret with echo off: %+v", r)
	}
	h2.result(b)
	for _, e := range requestEvents(h2.events(), "s1") {
		if _, ok := e.Detail["sha256"]; ok || e.Detail["secret"] != true {
			t.Errorf("secret send event %+v", e)
		}
	}
}

// Input the command did not read is dropped at the fence after its done
// marker: it never reaches the tool's prompt or the next command.
func TestInputFenceDropsUnreadFake(t *testing.T) {
	t.Parallel()
	h := newFakeHarness(t, nil).start()
	a := h.submit("printn ready?\ngets")
	b := h.submit("value next")
	tool := h.waitTool(1)
	r := h.reply(h.send(1, "c1", "first\nsecond\npartial", map[string]any{"expect": `ready\?`}))
	if r.Outcome != protocol.OutcomeDelivered {
		t.Fatalf("%+v", r)
	}
	h.result(a)
	if got := h.output(a); got != "ready?got first\n" {
		t.Errorf("output %q", got)
	}
	if rb := h.result(b); rb.Status != protocol.StatusOK || *rb.Value != "next" {
		t.Fatalf("the next command: %+v", rb)
	}
	if _, ok := tool.noted("dropped second"); !ok {
		t.Error("the unread line did not end at the fence")
	}
	for _, w := range []string{"unknown line second", "unknown line partial"} {
		if _, ok := tool.noted(w); ok {
			t.Errorf("unread input reached the tool's prompt: %s", w)
		}
	}
}

// A tool that does not read its input: the write waits without blocking
// the runner, and when the command ends (here a cancel) it is cut off and
// answered not_running with the count written.
func TestInputStuckWriteEndsWithCommandFake(t *testing.T) {
	t.Parallel()
	h := newFakeHarness(t, func(int) fakeBehavior { return fakeBehavior{onInt: "prompt", stuck: true} }).start()
	a := h.submit("printn ask\nhang")
	tool := h.waitTool(1)
	waitEvent(t, tool, "hang")
	n := h.send(1, "c1", "never read\n", nil)
	waitEvent(t, tool, "input stuck")
	st := h.reply(h.request(2, "st", protocol.OpCancel, map[string]any{"scope": "current"}))
	if st.Outcome != protocol.OutcomeCancelledRunning {
		t.Fatalf("cancel while a write waits: %+v", st)
	}
	r := h.reply(n)
	if r.Outcome != protocol.OutcomeNotRunning || *r.Bytes != 0 || r.CmdState != "finished" {
		t.Fatalf("cut-off send %+v", r)
	}
	if res := h.result(a); res.Status != protocol.StatusCancelled {
		t.Fatalf("%+v", res)
	}
}

// A signal goes to the foreground process group of the running command
// without cancel semantics; resize reaches the terminal and is kept for
// the next start of the tool.
func TestInputSignalResizeFake(t *testing.T) {
	t.Parallel()
	h := newFakeHarness(t, nil).start()
	a := h.submit("printn waiting\ngets\nvalue after")
	tool := h.waitTool(1)
	// A signal for a command still queued is answered not_running: wait
	// until c1 runs (the tool being up is not enough under load). The fake
	// tool notes reaching the payload's gets; state.json is no witness
	// here, its coalesced rewrite waits for the fake clock.
	h.waitFor("c1 at its gets", func() bool { _, ok := tool.noted("gets"); return ok })
	r := h.reply(h.request(1, "g1", protocol.OpSignal, map[string]any{"cmd_id": "c1", "signal": "USR1"}))
	if r.Outcome != protocol.OutcomeDelivered {
		t.Fatalf("signal %+v", r)
	}
	if _, ok := tool.noted("fg SIGUSR1"); !ok {
		t.Fatal("the signal did not reach the foreground process group")
	}
	if _, ok := tool.noted("sent SIGINT"); ok {
		t.Fatal("a signal request interrupted the command")
	}
	rz := h.reply(h.request(2, "z1", protocol.OpResize, map[string]any{"cols": 132, "rows": 43}))
	if rz.Outcome != protocol.OutcomeDelivered {
		t.Fatalf("resize %+v", rz)
	}
	h.reply(h.send(3, "c1", "go\n", nil))
	if res := h.result(a); res.Status != protocol.StatusOK || *res.Value != "after" {
		t.Fatalf("the signalled command %+v", res)
	}
	h.result(h.submit("exit 3")) // The tool ends; the next start gets the last size.
	h.waitTool(2)
	h.fake.mu.Lock()
	spec := h.fake.specs[1]
	h.fake.mu.Unlock()
	if spec.Cols != 132 || spec.Rows != 43 {
		t.Errorf("the next start of the tool gets %dx%d, want 132x43", spec.Cols, spec.Rows)
	}
	evs := h.events()
	if e := requestEvents(evs, "g1"); len(e) != 1 || e[0].Event != protocol.EvSignal || e[0].CmdID != "c1" || e[0].Detail["signal"] != "USR1" {
		t.Errorf("signal event %+v", e)
	}
	if e := requestEvents(evs, "z1"); len(e) != 1 || e[0].Event != protocol.EvResize || e[0].Detail["cols"] != float64(132) {
		t.Errorf("resize event %+v", e)
	}
}

// The terminal's echo of delivered input, when the tool's terminal echoes,
// is left out of the command's output and kept in the spool.
func TestInputEchoLeftOutOfOutputFake(t *testing.T) {
	t.Parallel()
	h := newFakeHarness(t, func(int) fakeBehavior { return fakeBehavior{onInt: "prompt", echo: true} }).start()
	a := h.submit("printn name:\ngets")
	h.reply(h.send(1, "c1", "bob\n", map[string]any{"expect": "name:"}))
	h.result(a)
	if got := h.output(a); got != "name:got bob\n" {
		t.Errorf("output %q, want the echo left out", got)
	}
	spool, _ := os.ReadFile(filepath.Join(h.dir, protocol.FileSpool))
	if !strings.Contains(string(spool), "name:bob\ngot bob\n") {
		t.Errorf("the spool lacks the echo: %q", spool)
	}
}

// A send whose master withdrew it (deleted its file) before delivery is
// not delivered; it has its event and no reply.
func TestInputWithdrawnFake(t *testing.T) {
	t.Parallel()
	h := newFakeHarness(t, nil).start()
	a := h.submit("printn q\ngets")
	tool := h.waitTool(1)
	waitEvent(t, tool, "gets")
	n := h.send(1, "c1", "late\n", map[string]any{"expect": "never", "expect_timeout_ms": 1000})
	h.taken(2)
	if err := os.Remove(filepath.Join(h.dir, protocol.DirCtl, n)); err != nil {
		t.Fatal(err)
	}
	h.clk.Advance(time.Second)
	h.waitFor("its event", func() bool { return len(requestEvents(h.events(), "s1")) == 1 })
	if _, err := os.Stat(filepath.Join(h.dir, protocol.DirAck, n)); err == nil {
		t.Error("a withdrawn request got a reply")
	}
	h.reply(h.send(3, "c1", "now\n", nil))
	h.result(a)
	if got := tool.inputsSoFar(); !slices.Equal(got, []string{"now\n"}) {
		t.Errorf("the tool got %q", got)
	}
}

// taken writes a resize request with seq and waits for its reply: the
// mailbox takes requests in seq order, so every request with a lower seq
// has been taken (answered or held) by then.
func (h *harness) taken(seq int64) {
	h.t.Helper()
	h.reply(h.request(seq, fmt.Sprintf("mark%d", seq), protocol.OpResize, map[string]any{"cols": 512, "rows": 50}))
}

// A send with an expect for a queued command waits for it to start (the
// output it expects does not exist yet), within its expect timeout; one
// whose command is cancelled while queued is refused as finished.
func TestInputExpectWaitsForQueuedFake(t *testing.T) {
	t.Parallel()
	h := newFakeHarness(t, nil).start()
	first := h.submit("printn busy\ngets")
	second := h.submit("printn Overwrite?\ngets\nvalue ok")
	third := h.submit("value never")
	tool := h.waitTool(1)
	waitEvent(t, tool, "gets")
	n2 := h.send(1, "c2", "y\n", map[string]any{"expect": `Overwrite\?`})
	n3 := h.send(2, "c3", "z\n", map[string]any{"expect": `never`})
	h.taken(4)
	if r := h.reply(h.request(5, "cx", protocol.OpCancel, map[string]any{"cmd_id": "c3"})); r.Outcome != protocol.OutcomeCancelledQueued {
		t.Fatalf("%+v", r)
	}
	if r := h.reply(n3); r.Outcome != protocol.OutcomeNotRunning || r.CmdState != "finished" {
		t.Fatalf("send for a command cancelled while queued: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(h.dir, protocol.DirAck, n2)); err == nil {
		t.Fatal("the send for the queued command was answered before it started")
	}
	h.reply(h.send(6, "c1", "free\n", nil))
	h.result(first)
	if r := h.reply(n2); r.Outcome != protocol.OutcomeDelivered || *r.MatchStart != 0 {
		t.Fatalf("%+v", r)
	}
	if res := h.result(second); *res.Value != "ok" || h.output(second) != "Overwrite?got y\n" {
		t.Fatalf("%+v %q", res, h.output(second))
	}
	h.result(third)
}

// Requests waiting behind a pending expect are bounded: beyond maxHeld a
// request is rejected at once (each may carry 1 MiB).
func TestInputHeldBoundedFake(t *testing.T) {
	t.Parallel()
	h := newFakeHarness(t, nil).start()
	a := h.submit("printn q\ngets")
	tool := h.waitTool(1)
	waitEvent(t, tool, "gets")
	h.send(1, "c1", "x\n", map[string]any{"expect": "never", "expect_timeout_ms": 1000})
	for i := 2; i <= maxHeld; i++ {
		h.send(int64(i), "c1", "y\n", nil)
	}
	over := h.reply(h.send(maxHeld+1, "c1", "z\n", nil))
	if over.Outcome != protocol.OutcomeRejected || !strings.Contains(over.Message, "already wait") {
		t.Fatalf("%+v", over)
	}
	h.clk.Advance(time.Second)
	h.result(a)
	if got := h.output(a); got != "qgot y\n" {
		t.Fatalf("output %q", got) // The first plain send answered; the rest were refused or dropped at the fence.
	}
	h.waitFor("every held request answered", func() bool {
		names, _ := os.ReadDir(filepath.Join(h.dir, protocol.DirCtl))
		return len(names) == 1 // ack/
	})
}

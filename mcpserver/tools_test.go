package mcpserver

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/skillpilot/skillpilot/protocol"
)

var allTools = []string{"cancel", "read_output", "resize", "run", "send", "signal", "status", "submit", "tail", "wait", "wait_for"}

func toolNames(t *testing.T, cs *mcp.ClientSession) map[string]*mcp.Tool {
	t.Helper()
	tools := map[string]*mcp.Tool{}
	for tool, err := range cs.Tools(testCtx(t), nil) {
		if err != nil {
			t.Fatal(err)
		}
		tools[tool.Name] = tool
	}
	return tools
}

func sortedKeys[V any](m map[string]V) []string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	slices.Sort(k)
	return k
}

// tools/list shows every tool with an input and an output schema; the
// arguments a call cannot do without are required.
func TestToolsListSchemas(t *testing.T) {
	_, cs := newSession(t)
	tools := toolNames(t, cs)
	if got := sortedKeys(tools); !slices.Equal(got, allTools) {
		t.Fatalf("tools %v, want %v", got, allTools)
	}
	required := map[string][]string{
		"run": {"payload"}, "submit": {"payload"}, "wait": {"cmd_id"}, "read_output": {"cmd_id", "offset"},
		"wait_for": {"pattern", "from_cursor"}, "tail": {"from_cursor"}, "cancel": nil, "status": nil,
		"send": {"cmd_id", "text"}, "signal": {"cmd_id", "signal"}, "resize": {"cols", "rows"},
	}
	for name, tool := range tools {
		var in, out struct {
			Type       string                     `json:"type"`
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
		}
		remarshal(t, tool.InputSchema, &in)
		remarshal(t, tool.OutputSchema, &out)
		if in.Type != "object" || out.Type != "object" || len(out.Properties) == 0 {
			t.Errorf("%s: input schema %+v output schema %+v", name, in, out)
		}
		if !slices.Equal(in.Required, required[name]) {
			t.Errorf("%s: required %v, want %v", name, in.Required, required[name])
		}
		if tool.Description == "" {
			t.Errorf("%s: no description", name)
		}
	}
	// An unknown argument, or one of the wrong type, is refused by the schema.
	if msg := callErr(t, cs, "run", map[string]any{"payload": "expr 1", "bogus": 1}); !strings.Contains(msg, "bogus") {
		t.Errorf("unknown argument: %s", msg)
	}
	if msg := callErr(t, cs, "wait_for", map[string]any{"pattern": "x", "from_cursor": "zero"}); !strings.Contains(msg, "from_cursor") {
		t.Errorf("bad argument: %s", msg)
	}
}

func remarshal(t *testing.T, v, out any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
}

// run returns the value; the command is an ordinary one: archived with the
// agent named as submitter, and in meta.log.
func TestRunExpr(t *testing.T) {
	dir, cs := newSession(t)
	var r CommandResult
	call(t, cs, "run", map[string]any{"payload": "puts [string cat he llo]; expr {6*7}",
		"trace_id": "flow-7/sta", "labels": map[string]any{"step": "sta"}}, &r)
	if !r.Done || r.Status != "ok" || r.Value != "42" || r.State != "finished" {
		t.Fatalf("%+v", r)
	}
	if r.TraceID != "flow-7/sta" || r.Labels["step"] != "sta" {
		t.Errorf("trace_id %q labels %v", r.TraceID, r.Labels)
	}
	if msg := callErr(t, cs, "submit", map[string]any{"payload": "expr 1", "trace_id": "a b"}); !strings.Contains(msg, "trace_id") {
		t.Errorf("bad trace_id: %s", msg)
	}
	if r.Output.Head != "hello\n" || r.Output.Size != 6 || r.Output.Truncated || r.Output.SHA256 != sha("hello\n") {
		t.Errorf("output %+v", r.Output)
	}
	if r.Session != "sess" || r.CommandPath == "" || r.SpoolEnd <= r.SpoolStart {
		t.Errorf("%+v", r)
	}
	var cmd protocol.Command
	// The command file reaches command_path just after the result appears
	// (PROTOCOL.md section 7).
	var b []byte
	waitUntil(t, "the archived command", func() bool {
		var err error
		b, err = os.ReadFile(filepath.Join(dir, r.CommandPath))
		return err == nil
	})
	if err := json.Unmarshal(b, &cmd); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(cmd.Submitter, "mcp@") || !strings.Contains(cmd.Submitter, "client=test-agent") || cmd.CmdID != r.CmdID ||
		cmd.TraceID != "flow-7/sta" {
		t.Errorf("archived command %+v", cmd)
	}
	// The runner appends cmd_end once its result writer reports the
	// result written, so the event may follow the result by a moment.
	waitUntil(t, "the cmd_end event in meta.log", func() bool {
		meta, _ := os.ReadFile(filepath.Join(dir, protocol.FileMeta))
		return bytes.Contains(meta, []byte(`"event":"cmd_end","cmd_id":"`+r.CmdID))
	})

	// A Tcl error is the command's status, not a tool error.
	r = CommandResult{}
	call(t, cs, "run", map[string]any{"payload": "error boom"}, &r)
	if r.Status != "error" || r.Error == nil || r.Error.Message != "boom" || r.Error.Code != protocol.CodeToolError {
		t.Fatalf("%+v", r)
	}
	// wait on a finished command answers at once with the same result.
	var w CommandResult
	call(t, cs, "wait", map[string]any{"cmd_id": r.CmdID}, &w)
	if w.Status != "error" || w.CmdID != r.CmdID {
		t.Fatalf("%+v", w)
	}
	// The value is bounded by the budget too.
	var v CommandResult
	call(t, cs, "run", map[string]any{"payload": "string repeat x 10000"}, &v)
	if len(v.Value) != DefaultPreviewBytes || !v.ValueTruncated || strings.Trim(v.Value, "x") != "" {
		t.Fatalf("value of %d bytes, truncated %v", len(v.Value), v.ValueTruncated)
	}
	// Bad input is a clear tool error.
	if msg := callErr(t, cs, "run", map[string]any{"payload": "expr 1", "kind": "Perl 5"}); !strings.Contains(msg, "kind") {
		t.Errorf("bad kind: %s", msg)
	}
	if msg := callErr(t, cs, "wait", map[string]any{"cmd_id": "no-such-command"}); !strings.Contains(msg, "unknown cmd_id") ||
		!strings.Contains(msg, `(context: {"cmd_id":"no-such-command"})`) {
		t.Errorf("unknown cmd_id: %s", msg)
	}
}

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// A command printing 10 MiB: the preview stays within the budget and gives
// size, sha256 and path; read_output fetches an exact middle range.
func TestBigOutputPreviewAndRange(t *testing.T) {
	const budget, lines = 4096, 10 << 20 / 16
	_, cs := newSession(t, func(c *Config) { c.PreviewBytes = budget })
	var want bytes.Buffer
	for i := 0; i < lines; i++ {
		fmt.Fprintf(&want, "%015d\n", i)
	}
	payload := fmt.Sprintf(`set s {}; for {set i 0} {$i < %d} {incr i} {append s [format %%015d\n $i]}; puts -nonewline $s; string length $s`, lines)
	res, err := cs.CallTool(testCtx(t), &mcp.CallToolParams{Name: "run", Arguments: map[string]any{"payload": payload, "wait_timeout_s": longWait.Seconds()}})
	if err != nil || res.IsError {
		t.Fatalf("%v %s", err, textOf(res))
	}
	var r CommandResult
	remarshal(t, res.StructuredContent, &r)
	p := r.Output
	if !r.Done || r.Status != "ok" || r.Value != fmt.Sprint(want.Len()) {
		t.Fatalf("%+v", r)
	}
	if p.Size != int64(want.Len()) || p.SHA256 != sha(want.String()) || !p.Truncated {
		t.Fatalf("preview %d bytes sha %s truncated %v", p.Size, p.SHA256, p.Truncated)
	}
	if n := len(p.Head) + len(p.Tail); n > budget || n < budget-8 {
		t.Errorf("head+tail %d bytes, budget %d", n, budget)
	}
	if !strings.HasPrefix(want.String(), p.Head) || want.String()[p.TailOffset:] != p.Tail ||
		p.OmittedBytes != p.TailOffset-int64(len(p.Head)) {
		t.Errorf("head %q… tail …%q at %d", p.Head[:32], p.Tail[len(p.Tail)-32:], p.TailOffset)
	}
	// The whole answer (text content and structured content) is small.
	if b, _ := json.Marshal(res); len(b) > 4*budget+4096 {
		t.Errorf("answer is %d bytes", len(b))
	}

	var ro ReadOutputOutput
	call(t, cs, "read_output", map[string]any{"cmd_id": r.CmdID, "offset": 5_000_003, "length": 1000}, &ro)
	if ro.Data != want.String()[5_000_003:5_001_003] || ro.Encoding != "utf-8" || ro.Length != 1000 || ro.EOF || !ro.Done ||
		ro.Size != int64(want.Len()) || ro.Path != p.Path || ro.ResumeCursor != 5_001_003 {
		t.Fatalf("read_output %+v", ro)
	}
	// A length above the server's maximum is capped to it.
	call(t, cs, "read_output", map[string]any{"cmd_id": r.CmdID, "offset": 0, "length": 1 << 30}, &ro)
	if ro.Length != DefaultMaxRead || ro.Data != want.String()[:DefaultMaxRead] {
		t.Fatalf("capped read: %d bytes", ro.Length)
	}
	// The last bytes: eof.
	call(t, cs, "read_output", map[string]any{"cmd_id": r.CmdID, "offset": want.Len() - 10}, &ro)
	if ro.Data != want.String()[want.Len()-10:] || !ro.EOF {
		t.Fatalf("%+v", ro)
	}
}

// wait_for follows the cursor rules of seed 000 (8.1 and 3.1-3.3): one
// cursor, resume_cursor = end of the match, the first match at or after the
// cursor (never a later one), and on timeout resume_cursor = spool size.
func TestWaitForCursorRules(t *testing.T) {
	dir, cs := newSession(t)
	var st StatusOutput
	call(t, cs, "status", nil, &st)
	c0 := st.Sessions[0].ResumeCursor
	call(t, cs, "run", map[string]any{"payload": `puts [string cat hel lo]; puts [string cat wor ld]`}, nil)

	checkKeys := func(m map[string]any) {
		t.Helper()
		for k := range m {
			if strings.Contains(k, "cursor") && k != "resume_cursor" {
				t.Errorf("cursor field %q besides resume_cursor: %v", k, m)
			}
		}
		if _, ok := m["resume_cursor"]; !ok {
			t.Errorf("no resume_cursor: %v", m)
		}
	}
	var w1, w2, w3 WaitForOutput
	// As in seed 000, 8.1: the first wait starts at 0 (a fresh session has no "hello" before).
	checkKeys(call(t, cs, "wait_for", map[string]any{"pattern": "hello", "from_cursor": 0}, &w1))
	if !w1.Matched || w1.MatchText != "hello" || w1.MatchSpan == nil || w1.ResumeCursor != w1.MatchSpan.End || w1.MatchSpan.Start < c0 {
		t.Fatalf("%+v", w1)
	}
	checkKeys(call(t, cs, "wait_for", map[string]any{"pattern": "world", "from_cursor": w1.ResumeCursor}, &w2))
	if !w2.Matched || w2.MatchSpan.Start < w1.ResumeCursor || w2.ResumeCursor != w2.MatchSpan.End {
		t.Fatalf("%+v", w2)
	}
	spool, _ := os.ReadFile(filepath.Join(dir, protocol.FileSpool))
	if string(spool[w2.MatchSpan.Start:w2.MatchSpan.End]) != "world" {
		t.Fatalf("span %+v is %q in the spool", w2.MatchSpan, spool[w2.MatchSpan.Start:w2.MatchSpan.End])
	}
	// Nothing more: timeout, resume_cursor = the spool size.
	checkKeys(call(t, cs, "wait_for", map[string]any{"pattern": "world", "from_cursor": w2.ResumeCursor, "wait_timeout_s": 0.3}, &w3))
	fi, err := os.Stat(filepath.Join(dir, protocol.FileSpool))
	if err != nil {
		t.Fatal(err)
	}
	if w3.Matched || w3.Error != "timeout" || w3.ResumeCursor != fi.Size() || w3.MatchSpan != nil {
		t.Fatalf("timeout %+v, spool size %d", w3, fi.Size())
	}

	// Several matches: each call returns the next one, none is skipped.
	var sub SubmitOutput
	call(t, cs, "submit", map[string]any{"payload": `foreach i {1 2 3} {puts [string cat A $i]}`}, &sub)
	cur := sub.ResumeCursor
	for _, want := range []string{"A1", "A2", "A3"} {
		var w WaitForOutput
		call(t, cs, "wait_for", map[string]any{"pattern": `A[0-9]`, "from_cursor": cur}, &w)
		if !w.Matched || w.MatchText != want || w.ResumeCursor < cur {
			t.Fatalf("want %s: %+v", want, w)
		}
		cur = w.ResumeCursor
	}
	// A match printed after the call began is found.
	call(t, cs, "submit", map[string]any{"payload": `after 300; puts [string cat LA TE]`}, &sub)
	var late WaitForOutput
	call(t, cs, "wait_for", map[string]any{"pattern": "LATE", "from_cursor": sub.ResumeCursor}, &late)
	if !late.Matched {
		t.Fatalf("%+v", late)
	}
	// Monotonic: a cursor beyond the spool's end never moves back.
	var far WaitForOutput
	call(t, cs, "wait_for", map[string]any{"pattern": "x", "from_cursor": late.ResumeCursor + 1000, "wait_timeout_s": 0.1}, &far)
	if far.Matched || far.ResumeCursor < late.ResumeCursor+1000 {
		t.Fatalf("%+v", far)
	}
	if msg := callErr(t, cs, "wait_for", map[string]any{"pattern": "(", "from_cursor": 0}); !strings.Contains(msg, "pattern") {
		t.Errorf("bad pattern: %s", msg)
	}

	// tail reads the same raw bytes by range.
	var tl TailOutput
	call(t, cs, "tail", map[string]any{"from_cursor": w1.MatchSpan.Start, "max_bytes": 5}, &tl)
	if tl.Data != "hello" || tl.ResumeCursor != w1.MatchSpan.End || tl.Offset != w1.MatchSpan.Start {
		t.Fatalf("%+v", tl)
	}
	call(t, cs, "tail", map[string]any{"from_cursor": -3}, &tl)
	if tl.ResumeCursor != tl.SpoolSize || tl.Offset != tl.SpoolSize-3 {
		t.Fatalf("%+v", tl)
	}
}

// waitRunning polls status until cmdID is the running command ("": none).
func waitRunning(t *testing.T, cs *mcp.ClientSession, cmdID string) {
	t.Helper()
	ctx := testCtx(t)
	for ctx.Err() == nil {
		var st StatusOutput
		call(t, cs, "status", nil, &st)
		if st.Sessions[0].CurrentCmdID == cmdID {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s never ran", cmdID)
}

func TestCancel(t *testing.T) {
	_, cs := newSession(t)
	var long, queued SubmitOutput
	call(t, cs, "submit", map[string]any{"payload": "after 600000"}, &long)
	call(t, cs, "submit", map[string]any{"payload": "expr 1"}, &queued)
	waitRunning(t, cs, long.CmdID)

	var c CancelOutput
	call(t, cs, "cancel", map[string]any{"cmd_id": queued.CmdID, "wait_timeout_s": longWait.Seconds()}, &c)
	if c.Outcome != "cancelled_queued" || c.Result == nil || c.Result.Status != "cancelled" {
		t.Fatalf("queued: %+v", c)
	}
	call(t, cs, "cancel", map[string]any{"wait_timeout_s": longWait.Seconds()}, &c)
	if c.Outcome != "cancelled_running" || c.CmdID != long.CmdID || c.Result.Status != "cancelled" {
		t.Fatalf("running: %+v", c)
	}
	call(t, cs, "cancel", map[string]any{"cmd_id": long.CmdID}, &c)
	if c.Outcome != "already_finished" {
		t.Fatalf("again: %+v", c)
	}
	waitRunning(t, cs, "") // state.json may say busy a moment after the result.
	c = CancelOutput{}
	call(t, cs, "cancel", nil, &c)
	if c.Outcome != "idle" || c.CmdID != "" {
		t.Fatalf("idle: %+v", c)
	}
	// The session still works.
	var r CommandResult
	call(t, cs, "run", map[string]any{"payload": "expr {6*7}"}, &r)
	if r.Value != "42" {
		t.Fatalf("%+v", r)
	}
}

// A call never blocks longer than the server's ceiling: run of a long
// command comes back not done, and the command continues.
func TestCallCeiling(t *testing.T) {
	_, cs := newSession(t, func(c *Config) { c.MaxWait = 200 * time.Millisecond })
	var r CommandResult
	call(t, cs, "run", map[string]any{"payload": "puts [string cat sta rted]; flush stdout; after 600000", "wait_timeout_s": 3600}, &r)
	if r.Done || (r.State != "running" && r.State != "queued") || r.Note == "" || r.Status != "" {
		t.Fatalf("%+v", r)
	}
	// Cancelled while still queued, it would never print: wait until it
	// has (each wait_for is bounded by the ceiling too, so again until it
	// matches). The payload does not hold the word it prints.
	for ctx := testCtx(t); ; {
		var wf WaitForOutput
		call(t, cs, "wait_for", map[string]any{"pattern": "started", "from_cursor": 0}, &wf)
		if wf.Matched {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("never printed: %+v", wf)
		}
	}
	var c CancelOutput
	call(t, cs, "cancel", map[string]any{"cmd_id": r.CmdID}, &c)
	// The ceiling also bounds cancel's and wait's waits: wait again until done.
	for ctx := testCtx(t); !r.Done && ctx.Err() == nil; {
		call(t, cs, "wait", map[string]any{"cmd_id": r.CmdID}, &r)
	}
	if !r.Done || r.Status != "cancelled" || r.Output.Head != "started\n" {
		t.Fatalf("%+v", r)
	}
}

func TestDenyAllow(t *testing.T) {
	dir, cs := newSession(t, func(c *Config) {
		c.Deny = []*regexp.Regexp{regexp.MustCompile(`\bexit\b`), regexp.MustCompile(`file\s+delete`)}
	})
	for _, p := range []string{"exit", "puts a; exit 3", "file  delete /tmp/x"} {
		if msg := callErr(t, cs, "run", map[string]any{"payload": p}); !strings.Contains(msg, "refused") || !strings.Contains(msg, "--deny") {
			t.Errorf("%q: %s", p, msg)
		}
		if msg := callErr(t, cs, "submit", map[string]any{"payload": p}); !strings.Contains(msg, "--deny") {
			t.Errorf("%q: %s", p, msg)
		}
	}
	var r CommandResult
	call(t, cs, "run", map[string]any{"payload": "expr 1+1"}, &r)
	if r.Value != "2" {
		t.Fatalf("%+v", r)
	}
	// Nothing refused reached the session.
	names, _ := os.ReadDir(filepath.Join(dir, protocol.DirResult))
	if len(names) != 1 {
		t.Fatalf("%d results, want 1", len(names))
	}

	_, cs = newSession(t, func(c *Config) { c.Allow = []*regexp.Regexp{regexp.MustCompile(`^expr `)} })
	if msg := callErr(t, cs, "run", map[string]any{"payload": "puts hi"}); !strings.Contains(msg, "--allow") {
		t.Errorf("allow: %s", msg)
	}
	call(t, cs, "run", map[string]any{"payload": "expr 2+2"}, &r)
	if r.Value != "4" {
		t.Fatalf("%+v", r)
	}
}

func TestReadOnly(t *testing.T) {
	dir, cs := newSession(t, func(c *Config) { c.ReadOnly = true })
	if got := sortedKeys(toolNames(t, cs)); !slices.Equal(got, []string{"read_output", "status", "tail", "wait_for"}) {
		t.Fatalf("read-only tools %v", got)
	}
	for _, name := range []string{"run", "submit", "cancel", "wait", "send"} {
		msg := callErr(t, cs, name, map[string]any{"payload": "expr 1", "cmd_id": "x"})
		if !strings.Contains(msg, "refused") || !strings.Contains(msg, "--read-only") {
			t.Errorf("%s: %s", name, msg)
		}
	}
	if names, _ := os.ReadDir(filepath.Join(dir, protocol.DirQueue)); len(names) != 0 {
		t.Fatalf("queue not empty: %v", names)
	}
	var st StatusOutput
	call(t, cs, "status", nil, &st)
	if len(st.Sessions) != 1 || !st.Sessions[0].Alive {
		t.Fatalf("%+v", st)
	}
}

// send answers a prompt of the running command: expect waits for it, the
// answer reaches the command, and a second send to the finished command is
// refused with its state; --deny rules apply to the text; a secret leaves
// nothing in the session's files.
func TestSendAnswersPrompt(t *testing.T) {
	dir, cs := newSession(t, func(c *Config) { c.Deny = []*regexp.Regexp{regexp.MustCompile(`\bexit\b`)} })
	var sub SubmitOutput
	call(t, cs, "submit", map[string]any{"payload": `puts -nonewline "File top.v exists. Overwrite? (y/n) "; flush stdout; gets stdin a; ` +
		`puts -nonewline "Password: "; flush stdout; gets stdin pw; puts "answer $a, [string length $pw] characters"`}, &sub)
	var out SendOutput
	call(t, cs, "send", map[string]any{"cmd_id": sub.CmdID, "text": "y", "expect": `Overwrite\? \(y/n\) $`}, &out)
	if out.Outcome != "delivered" || out.Bytes != 2 || out.MatchEnd == nil || *out.MatchEnd != 36 || out.ResumeCursor == 0 {
		t.Fatalf("%+v", out)
	}
	if msg := callErr(t, cs, "send", map[string]any{"cmd_id": sub.CmdID, "text": "exit"}); !strings.Contains(msg, "--deny") {
		t.Fatalf("deny: %s", msg)
	}
	call(t, cs, "send", map[string]any{"cmd_id": sub.CmdID, "text": "MCP-Secret-7", "expect": "Password: ", "secret": true}, &out)
	if out.Outcome != "delivered" {
		t.Fatalf("%+v", out)
	}
	var r CommandResult
	call(t, cs, "wait", map[string]any{"cmd_id": sub.CmdID, "wait_timeout_s": longWait.Seconds()}, &r)
	if r.Status != "ok" || r.Output.Head != "File top.v exists. Overwrite? (y/n) Password: answer y, 12 characters\n" {
		t.Fatalf("%+v", r)
	}
	call(t, cs, "send", map[string]any{"cmd_id": sub.CmdID, "text": "n"}, &out)
	if out.Outcome != "not_running" || out.CmdState != "finished" {
		t.Fatalf("after the end: %+v", out)
	}
	call(t, cs, "send", map[string]any{"cmd_id": "nosuch", "text": "n"}, &out)
	if out.Outcome != "not_running" || out.CmdState != "unknown" {
		t.Fatalf("unknown: %+v", out)
	}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if b, _ := os.ReadFile(p); strings.Contains(string(b), "MCP-Secret-7") {
				t.Errorf("%s holds the secret", p)
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// --deny sees the line the tool will read, not just one send's text: a
// denied word typed in two pieces (the first without a newline) is refused
// and nothing of the second piece reaches the tool. After a
// newline the next line starts afresh.
func TestDenySplitSend(t *testing.T) {
	dir, cs := newSession(t, func(c *Config) { c.Deny = []*regexp.Regexp{regexp.MustCompile(`exec`)} })
	marker := filepath.Join(t.TempDir(), "F")
	var sub SubmitOutput
	call(t, cs, "submit", map[string]any{"payload": `puts -nonewline "> "; flush stdout; set l [gets stdin]; puts "line1=$l"; ` +
		`puts -nonewline "> "; flush stdout; set l2 [gets stdin]; puts "line2=$l2"`}, &sub)
	var out SendOutput
	call(t, cs, "send", map[string]any{"cmd_id": sub.CmdID, "text": "ex", "no_newline": true, "expect": "> $"}, &out)
	if out.Outcome != "delivered" {
		t.Fatalf("%+v", out)
	}
	if msg := callErr(t, cs, "send", map[string]any{"cmd_id": sub.CmdID, "text": "ec touch " + marker}); !strings.Contains(msg, "--deny") {
		t.Fatalf("the second piece completes a denied line, want refused: %s", msg)
	}
	call(t, cs, "send", map[string]any{"cmd_id": sub.CmdID, "text": "tra"}, &out) // "extra\n": allowed
	if out.Outcome != "delivered" {
		t.Fatalf("%+v", out)
	}
	call(t, cs, "send", map[string]any{"cmd_id": sub.CmdID, "text": "ec", "expect": "> $"}, &out) // a new line: "ec" alone
	if out.Outcome != "delivered" {
		t.Fatalf("%+v", out)
	}
	var r CommandResult
	call(t, cs, "wait", map[string]any{"cmd_id": sub.CmdID, "wait_timeout_s": longWait.Seconds()}, &r)
	if r.Status != "ok" || !strings.Contains(r.Output.Head, "line1=extra\n") || !strings.Contains(r.Output.Head, "line2=ec\n") {
		t.Fatalf("%+v", r)
	}
	if _, err := os.Lstat(marker); err == nil {
		t.Fatal("the denied line ran")
	}
	_ = dir
}

// The same surface from every door: MCP offers
// signal and resize as the other masters do (PROTOCOL.md 9.8), and run and
// submit take a command's max_output_bytes. Real tclsh.
func TestSignalResizeAndBudget(t *testing.T) {
	_, cs := newSession(t)
	var r CommandResult
	call(t, cs, "run", map[string]any{"payload": "while 1 {puts xxxxxxxxx}", "max_output_bytes": 100}, &r)
	if r.Status != "error" || r.Error == nil || r.Error.Code != protocol.CodeOutputLimit || r.Output.Size != 100 {
		t.Fatalf("max_output_bytes: %+v %+v", r, r.Error)
	}
	var rs ControlOutput
	call(t, cs, "resize", map[string]any{"cols": 200, "rows": 50}, &rs)
	if rs.Outcome != "delivered" {
		t.Fatalf("resize: %+v", rs)
	}
	if msg := callErr(t, cs, "resize", map[string]any{"cols": 0, "rows": 50}); !strings.Contains(msg, "resize") {
		t.Errorf("resize 0 columns: %s", msg)
	}
	call(t, cs, "run", map[string]any{"payload": "expr 1"}, &r) // The tool restarted after the Ctrl-C: it is back.
	var sub SubmitOutput
	call(t, cs, "submit", map[string]any{"payload": `puts ready; flush stdout; after 60000`}, &sub)
	var w WaitForOutput
	call(t, cs, "wait_for", map[string]any{"pattern": "ready", "from_cursor": sub.ResumeCursor}, &w)
	var sg ControlOutput
	call(t, cs, "signal", map[string]any{"cmd_id": sub.CmdID, "signal": "sigterm"}, &sg)
	if sg.Outcome != "delivered" || sg.CmdID != sub.CmdID {
		t.Fatalf("signal: %+v", sg)
	}
	call(t, cs, "wait", map[string]any{"cmd_id": sub.CmdID, "wait_timeout_s": longWait.Seconds()}, &r)
	if r.Status != "error" || r.Error == nil || r.Error.Code != protocol.CodeToolDied {
		t.Errorf("after SIGTERM: %+v %+v", r, r.Error)
	}
	call(t, cs, "signal", map[string]any{"cmd_id": sub.CmdID, "signal": "INT"}, &sg)
	if sg.Outcome != "not_running" || sg.CmdState != "finished" {
		t.Errorf("signal to a finished command: %+v", sg)
	}
	if msg := callErr(t, cs, "signal", map[string]any{"cmd_id": sub.CmdID, "signal": "STOP"}); !strings.Contains(msg, "STOP") {
		t.Errorf("signal STOP: %s", msg)
	}
}

package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/skillpilot/skillpilot/internal/testenv"
	"github.com/skillpilot/skillpilot/internal/version"
	"github.com/skillpilot/skillpilot/master"
)

// startRunnerProc runs the built runner binary on dir; the test stops it
// (SIGTERM, then SIGKILL) at the end if it still runs, then checks the
// session's invariants.
func startRunnerProc(t *testing.T, dir string) *testenv.RunnerProcess {
	t.Helper()
	r := testenv.StartRunner(t, testenv.RunnerOptions{Dir: dir, Flags: []string{"--heartbeat", "100ms", "--kill-grace", "1s"}})
	if _, err := master.WaitReady(testCtx(t), dir, master.WaitOptions{}); err != nil {
		t.Fatal(err)
	}
	return r
}

// The server keeps working when the runner under it is killed and a new one
// starts on the same session: the interrupted command gets its result
// (runner_restarted), new calls run, wait_for keeps its cursor.
func TestRunnerRestartUnderServer(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sess")
	r1 := startRunnerProc(t, dir)
	cs := connect(t, Config{Session: dir})

	var r CommandResult
	call(t, cs, "run", map[string]any{"payload": "expr 1+1"}, &r)
	if r.Value != "2" {
		t.Fatalf("%+v", r)
	}
	var st StatusOutput
	call(t, cs, "status", nil, &st)
	sid := st.Sessions[0].SessionID
	var long SubmitOutput
	call(t, cs, "submit", map[string]any{"payload": "after 600000"}, &long)
	waitRunning(t, cs, long.CmdID)

	// A wait that spans the crash and the restart.
	waited := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(testCtx(t), &mcp.CallToolParams{Name: "wait",
			Arguments: map[string]any{"cmd_id": long.CmdID, "wait_timeout_s": longWait.Seconds()}})
		if err != nil {
			res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
		}
		waited <- res
	}()
	r1.Kill() // A crash: no cleanup at all.
	for ctx := testCtx(t); ctx.Err() == nil; time.Sleep(50 * time.Millisecond) {
		call(t, cs, "status", nil, &st)
		if !st.Sessions[0].Alive {
			break
		}
	}
	if st.Sessions[0].Alive {
		t.Fatal("the killed runner still looks alive")
	}
	startRunnerProc(t, dir)

	res := <-waited
	if res.IsError {
		t.Fatalf("wait across the restart: %s", textOf(res))
	}
	var w CommandResult
	remarshal(t, res.StructuredContent, &w)
	if !w.Done || w.Status != "error" || w.ExitReason != "runner_restarted" {
		t.Fatalf("interrupted command: %+v", w)
	}
	var sub SubmitOutput
	call(t, cs, "submit", map[string]any{"payload": "puts [string cat AF TER]; expr {6*7}"}, &sub)
	call(t, cs, "wait", map[string]any{"cmd_id": sub.CmdID, "wait_timeout_s": longWait.Seconds()}, &w)
	if w.Value != "42" || w.Output.Head != "AFTER\n" {
		t.Fatalf("%+v", w)
	}
	var wf WaitForOutput
	call(t, cs, "wait_for", map[string]any{"pattern": "AFTER", "from_cursor": sub.ResumeCursor}, &wf)
	if !wf.Matched {
		t.Fatalf("%+v", wf)
	}
	call(t, cs, "status", nil, &st)
	if !st.Sessions[0].Alive || st.Sessions[0].SessionID == sid {
		t.Fatalf("after restart: %+v (old session_id %s)", st.Sessions[0], sid)
	}
}

// The built binary over a real stdio pipe: `master mcp --session DIR`.
func TestStdioBinary(t *testing.T) {
	masterBin := testenv.MasterWithMCP(t)
	dir := filepath.Join(t.TempDir(), "sess")
	startRunner(t, dir)
	// The command line of the client configuration in docs/mcp.md.
	cmd := exec.Command(masterBin, "mcp", "--session", dir, "--deny", `\bexit\b`, "--preview-bytes", "64")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "stdio-test", Version: "0"}, nil)
	cs, err := client.Connect(testCtx(t), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools := toolNames(t, cs)
	if got := sortedKeys(tools); strings.Join(got, " ") != strings.Join(allTools, " ") {
		t.Fatalf("tools %v", got)
	}
	if tools["run"].InputSchema == nil || tools["run"].OutputSchema == nil {
		t.Fatal("run has no schemas")
	}
	var r CommandResult
	call(t, cs, "run", map[string]any{"payload": "expr {6*7}"}, &r)
	if r.Value != "42" || r.Status != "ok" {
		t.Fatalf("%+v", r)
	}
	call(t, cs, "run", map[string]any{"payload": "puts -nonewline [string repeat 0123456789 100]"}, &r)
	if !r.Output.Truncated || len(r.Output.Head)+len(r.Output.Tail) > 64 || r.Output.Size != 1000 {
		t.Fatalf("%+v", r.Output)
	}
	var ro ReadOutputOutput
	call(t, cs, "read_output", map[string]any{"cmd_id": r.CmdID, "offset": 503, "length": 4}, &ro)
	if ro.Data != "3456" {
		t.Fatalf("%+v", ro)
	}
	if msg := callErr(t, cs, "run", map[string]any{"payload": "exit 1"}); !strings.Contains(msg, `--deny rule "\\bexit\\b"`) {
		t.Errorf("deny: %s", msg)
	}
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	// Closing stdin ends the server: exit 0, one log line per call.
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 0 {
		t.Fatalf("server exit %v; stderr:\n%s", cmd.ProcessState, stderr.String())
	}
	if n := strings.Count(stderr.String(), `msg="tool call"`); n != 4 {
		t.Errorf("%d tool call log lines, want 4:\n%s", n, stderr.String())
	}
}

// SIGTERM ends a server that is waiting for its client: exit 143.
func TestStdioSignal(t *testing.T) {
	masterBin := testenv.MasterWithMCP(t)
	dir := filepath.Join(t.TempDir(), "sess")
	startRunner(t, dir)
	cmd := exec.Command(masterBin, "mcp", "--session", dir)
	stdin, err := cmd.StdinPipe() // Kept open: the server waits for requests.
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Once it answers, its signal handler is in place.
	stdin.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"0"}}}` + "\n"))
	buf := make([]byte, 4096)
	if n, err := out.Read(buf); err != nil || !bytes.Contains(buf[:n], []byte(`"id":1`)) {
		t.Fatalf("%q %v", buf[:n], err)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(longWait):
		cmd.Process.Kill()
		t.Fatal("server did not end on SIGTERM")
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 143 {
		t.Fatalf("exit %v, want 143", err)
	}
}

// Usage errors and a missing session are answered with the CLI's exit
// codes before any MCP traffic.
func TestMainExitCodes(t *testing.T) {
	t.Setenv("SP_SESSION_DIR", "")
	ctx := context.Background()
	for _, tc := range []struct {
		args []string
		want int
	}{
		{nil, master.ExitUsage},
		{[]string{"--session", "a", "--pool", "b"}, master.ExitUsage},
		{[]string{"--session", "a", "extra"}, master.ExitUsage},
		{[]string{"--session", "a", "--deny", "("}, master.ExitUsage},
		{[]string{"--session", filepath.Join(t.TempDir(), "none")}, master.ExitNoRunner},
		{[]string{"--pool", filepath.Join(t.TempDir(), "none")}, master.ExitNoRunner},
	} {
		var stderr bytes.Buffer
		if got := Main(ctx, tc.args, strings.NewReader(""), &bytes.Buffer{}, &stderr); got != tc.want {
			t.Errorf("%v: exit %d, want %d (%s)", tc.args, got, tc.want, stderr.String())
		}
	}
	// `master mcp` is listed by `master help` once registered.
	out, _ := exec.Command(testenv.BuildBinary(t, testenv.Master), "help").CombinedOutput()
	if !strings.Contains(string(out), "  mcp --session DIR") {
		t.Errorf("help:\n%s", out)
	}
}

// TestMainHelp: --help prints the flags on stdout and exits 0, as every
// master command does (docs/shell.md); a bad flag still goes to stderr.
func TestMainHelp(t *testing.T) {
	for _, arg := range []string{"--help", "-h"} {
		var stdout, stderr bytes.Buffer
		if got := Main(context.Background(), []string{arg}, strings.NewReader(""), &stdout, &stderr); got != master.ExitOK {
			t.Errorf("%s: exit %d, want 0", arg, got)
		}
		if !strings.Contains(stdout.String(), "-read-only") || stderr.Len() != 0 {
			t.Errorf("%s: stdout %q, stderr %q", arg, stdout.String(), stderr.String())
		}
	}
	var stdout, stderr bytes.Buffer
	if got := Main(context.Background(), []string{"--bogus"}, strings.NewReader(""), &stdout, &stderr); got != master.ExitUsage ||
		stdout.Len() != 0 || !strings.Contains(stderr.String(), "-bogus") {
		t.Errorf("--bogus: exit %d, stdout %q, stderr %q", got, stdout.String(), stderr.String())
	}
}

// A client that writes its requests and closes stdin at once (a shell
// pipe) still gets every answer, including one for a call that takes a
// while: the server ends only once the requests it read are answered.
func TestStdinClosedEarlyAnswersAll(t *testing.T) {
	masterBin := testenv.MasterWithMCP(t)
	dir := filepath.Join(t.TempDir(), "sess")
	startRunner(t, dir)
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"sh","version":"0"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run","arguments":{"payload":"after 500; expr 6*7"}}}`,
		`not json`, // Answered with a parse error; the session goes on.
		`{"jsonrpc":"2.0","id":"three","method":"tools/list"}`,
	}, "\n") + "\n"
	cmd := exec.Command(masterBin, "mcp", "--session", dir, "--quiet")
	cmd.Stdin = strings.NewReader(in)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	got, errs := map[string]string{}, map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		got[string(m.ID)] = string(m.Result)
		errs[string(m.ID)] = string(m.Error)
	}
	if len(got) != 4 || !strings.Contains(got["2"], `\"value\":\"42\"`) || !strings.Contains(got[`"three"`], `"run"`) || !strings.Contains(errs["null"], "-32700") {
		t.Fatalf("answers: %v", got)
	}
}

// Lines the MCP SDK would end the whole session on are answered with their
// JSON-RPC error, and the session goes on: a batch (each request in it
// answered under its own id), an id that is an object, a message that is
// not JSON-RPC 2.0, and a line over MaxLine (a 17 MiB submit), whose id is
// still found. Every answer owed before stdin ends arrives.
func TestBadLinesAnsweredSessionGoesOn(t *testing.T) {
	masterBin := testenv.MasterWithMCP(t)
	dir := filepath.Join(t.TempDir(), "sess")
	startRunner(t, dir)
	huge := `{"jsonrpc":"2.0","id":"big","method":"tools/call","params":{"name":"submit","arguments":{"payload":"puts ` +
		strings.Repeat("x", MaxLine+1<<20) + `"}}}`
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"sh","version":"0"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`[{"jsonrpc":"2.0","id":10,"method":"tools/list"},{"jsonrpc":"2.0","id":"eleven","method":"tools/list"},{"jsonrpc":"2.0","method":"notifications/initialized"}]`,
		`{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}`,
		`{"jsonrpc":"1.0","id":12,"method":"tools/list"}`,
		`[]`,
		huge,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run","arguments":{"payload":"expr 6*7"}}}`,
	}, "\n") + "\n"
	cmd := exec.Command(masterBin, "mcp", "--session", dir, "--quiet")
	cmd.Stdin = strings.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("master mcp: %v (it must not end on a bad line)\nstderr: %s", err, stderr.String())
	}
	type answer struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	var answers []answer
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.HasPrefix(line, "[") {
			var batch []answer
			if err := json.Unmarshal([]byte(line), &batch); err != nil {
				t.Fatalf("%v: %s", err, line)
			}
			if len(batch) != 2 || string(batch[0].ID) != "10" || string(batch[1].ID) != `"eleven"` {
				t.Errorf("batch answer: %s", line)
			}
			answers = append(answers, batch...)
			continue
		}
		var a answer
		if err := json.Unmarshal([]byte(line), &a); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		answers = append(answers, a)
	}
	byID := map[string][]answer{}
	for _, a := range answers {
		byID[string(a.ID)] = append(byID[string(a.ID)], a)
	}
	wantErr := func(id, msg string) {
		t.Helper()
		as := byID[id]
		if len(as) == 0 {
			t.Errorf("no answer for id %s", id)
			return
		}
		for _, a := range as {
			if a.Error != nil && a.Error.Code == -32600 && strings.Contains(a.Error.Message, msg) {
				return
			}
		}
		t.Errorf("id %s: no -32600 error saying %q in %+v", id, msg, as)
	}
	wantErr("10", "batches are not supported")
	wantErr(`"eleven"`, "batches are not supported")
	wantErr(`"big"`, "over the 16777216-byte (16 MiB) limit")
	wantErr("null", "invalid ID type")           // the object id
	wantErr("12", "invalid message version tag") // jsonrpc 1.0
	if r := byID["2"]; len(r) != 1 || !strings.Contains(string(r[0].Result), `\"value\":\"42\"`) {
		t.Errorf("the call after the bad lines: %+v", r)
	}
	if nulls := len(byID["null"]); nulls != 2 { // the object id and the empty batch
		t.Errorf("%d answers with id null, want 2: %+v", nulls, byID["null"])
	}
}

func TestTopLevelID(t *testing.T) {
	for in, want := range map[string]string{
		`{"jsonrpc":"2.0","id":7,"method":"x"}`:                     `7`,
		`{"params":{"id":3,"a":[1,{"id":4}]},"id":"s\"x","m":1}`:    `"s\"x"`,
		`{"id" : {"a":1} ,"method":"x"}`:                            `{"a":1}`,
		`{"params":{"payload":"\"id\":9"},"method":"x"}`:            ``,
		`{"method":"x","params":{"p":"xxxx` + "\n" + `xx"},"id":5}`: `5`,
	} {
		if got := string(topLevelID([]byte(in))); got != want {
			t.Errorf("topLevelID(%s) = %q, want %q", in, got, want)
		}
	}
}

// master-mcp --version prints the version every binary prints (it
// exited 2 with "did you mean --session?").
func TestMainVersion(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if got := Main(context.Background(), []string{"--version"}, strings.NewReader(""), &stdout, &stderr); got != master.ExitOK {
		t.Fatalf("exit %d, stderr %q", got, stderr.String())
	}
	if want := "master-mcp (SkillPilot) " + version.Release() + " (build "; !strings.HasPrefix(stdout.String(), want) {
		t.Errorf("stdout %q, want prefix %q", stdout.String(), want)
	}
}

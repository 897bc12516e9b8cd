package realtools

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/internal/doctest"
	"github.com/skillpilot/skillpilot/internal/testenv"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
)

// endCase is a command whose end the runner must find whatever it
// printed, with its true status.
type endCase struct {
	name    string
	payload string
	status  protocol.Status
	out     string // exact output; "*" for any
	errHas  string // a part of error.message when status is error
}

// pyDriver writes docs/drivers.md's Python REPL driver (its JSON block, so
// that the document's own example is what is tested), with blank_line as
// given and extra keys added.
func pyDriver(t *testing.T, blank bool, extra string) string {
	t.Helper()
	body := strings.TrimSpace(doctest.Get(t, "driver-pyrepl").Text)
	if !strings.HasPrefix(body, `{"kind": "pyrepl"`) || !strings.HasSuffix(body, `"blank_line": true}`) {
		t.Fatalf("docs/drivers.md's Python driver with blank_line not found:\n%s", body)
	}
	if !blank {
		body = strings.Replace(body, `, "blank_line": true`, "", 1)
	}
	body = strings.TrimSuffix(body, "}") + extra + "}"
	p := filepath.Join(t.TempDir(), "py.json")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestEndsWhateverPrinted: on every kind, a command that prints no final
// newline, an empty or huge last line, changes the prompt, leaves a
// statement unfinished, or whose file command fails, ends with its true
// status and exact output, and the tool serves the next command (a
// probe after each case).
func TestEndsWhateverPrinted(t *testing.T) {
	testenv.Slow(t, "real shells")
	huge := strings.Repeat("x", 100000)
	kinds := []struct {
		name, cmd, pkg  string
		flags           []string
		argv            []string
		probe, probeOut string
		cases           []endCase
	}{
		{name: "tcl", cmd: "tclsh", pkg: "tcl", probe: "puts probe", probeOut: "probe\n", cases: []endCase{
			{"no final newline", "puts -nonewline abc", protocol.StatusOK, "abc", ""},
			{"empty last line", "puts {}", protocol.StatusOK, "\n", ""},
			{"huge last line without newline", "puts -nonewline [string repeat x 100000]", protocol.StatusOK, huge, ""},
			{"changes its prompt", "set tcl_prompt1 {puts -nonewline {new% }}", protocol.StatusOK, "", ""},
			{"unfinished statement", "proc f {} {\n  puts x", protocol.StatusError, "", "missing close-brace"},
		}},
		{name: "sh", cmd: "bash", pkg: "bash", flags: []string{"--kind", "sh"}, probe: "echo probe", probeOut: "probe\n", cases: []endCase{
			{"no final newline", "printf abc", protocol.StatusOK, "abc", ""},
			{"changes its prompt", "PS1='new$ '", protocol.StatusOK, "", ""},
			{"unfinished statement", "if true; then\n  echo x", protocol.StatusError, "*", "return code 2"},
		}},
		{name: "yosys", cmd: "yosys", pkg: "yosys", flags: []string{"--kind", "yosys"}, probe: "log probe", probeOut: "probe\n", cases: []endCase{
			{"no final newline", "log -n x", protocol.StatusOK, "x", ""},
			{"two without newline", "log -n x\nlog -n y", protocol.StatusOK, "xy", ""},
			{"empty last line", "log", protocol.StatusOK, "\n", ""},
			{"an ERROR: line Yosys did not raise", "log ERROR: only a message\nlog after", protocol.StatusOK, "ERROR: only a message\nafter\n", ""},
			{"an error in the middle stops the payload", "log a\nnosuchcmd\nlog b", protocol.StatusError,
				"a\nERROR: No such command: nosuchcmd (type 'help' for a command overview)\n", "ERROR: No such command: nosuchcmd"},
		}},
		{name: "ngspice", cmd: "ngspice", pkg: "ngspice", flags: []string{"--kind", "ngspice"}, probe: "echo probe", probeOut: "probe\n", cases: []endCase{
			{"no final newline", "shell printf abc", protocol.StatusOK, "abc", ""},
			{"changes its prompt", "set prompt = \"spice# \"", protocol.StatusOK, "", ""},
			{"after the prompt changed", "echo a\necho b\nshell printf c", protocol.StatusOK, "a\nb\nc", ""},
		}},
		{name: "python driver", cmd: "python3", pkg: "python3", probe: "print('probe')", probeOut: "probe\n", cases: []endCase{
			{"no final newline", "print('abc', end='')", protocol.StatusOK, "abc", ""},
			// The end line, typed inside the block, is Python's syntax error:
			// its own words are the message.
			{"an indented block without a blank line", "for i in range(2):\n    print(i)", protocol.StatusError, "*", "SyntaxError"},
			{"an unterminated string", "x = \"\"\"abc", protocol.StatusError, "*", "unfinished"},
			{"an open bracket", "print(1,", protocol.StatusError, "*", "unfinished"},
			{"a Python error", "1/0", protocol.StatusError, "*", "Traceback"},
			{"a syntax error (no Traceback line)", "x = = 1", protocol.StatusError, "*", "SyntaxError"},
		}},
		{name: "python driver with blank_line", cmd: "python3", pkg: "python3", probe: "print('probe')", probeOut: "probe\n", cases: []endCase{
			{"an indented block", "for i in range(2):\n    print(i)", protocol.StatusOK, "0\n1\n", ""},
		}},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			testenv.NeedTool(t, k.cmd, k.pkg)
			flags := k.flags
			switch k.name {
			case "python driver":
				flags = []string{"--driver", pyDriver(t, false, "")}
			case "python driver with blank_line":
				flags = []string{"--driver", pyDriver(t, true, "")}
			}
			_, s := session(t, flags, k.argv...)
			for _, c := range k.cases {
				res, out := run(t, s, c.payload, master.SubmitOptions{})
				if res.Status != c.status || (c.out != "*" && out != c.out) {
					t.Fatalf("%s: status %s (%+v) output %q, want %s %q", c.name, res.Status, res.Error, out, c.status, c.out)
				}
				if c.errHas != "" && (res.Error == nil || !strings.Contains(res.Error.Message, c.errHas)) {
					t.Fatalf("%s: error %+v, want a message with %q", c.name, res.Error, c.errHas)
				}
				res, out = run(t, s, k.probe, master.SubmitOptions{})
				must(t, "the next command after "+c.name, res, out, protocol.StatusOK, k.probeOut)
			}
		})
	}
}

// TestDriverFileCommandFails: a driver whose file command fails in the
// tool (Python's FileNotFoundError) prints the done line without the
// begin line: the command is an error quoting the tool, at once.
func TestDriverFileCommandFails(t *testing.T) {
	testenv.Slow(t, "python3")
	testenv.NeedTool(t, "python3", "python3")
	drv := pyDriver(t, true, `, "source": "exec(open('/nonexistent' + {}).read())", "quote": "c"`)
	_, s := session(t, []string{"--driver", drv})
	res, _ := run(t, s, "print(1)", master.SubmitOptions{})
	if res.Status != protocol.StatusError || res.Error == nil || !strings.Contains(res.Error.Message, "FileNotFoundError") ||
		!strings.Contains(res.Error.Message, "did not run the payload file") {
		t.Fatalf("%s %+v, want an error that the file command failed, quoting FileNotFoundError", res.Status, res.Error)
	}
}

// TestDriverLearnsPrompt: a driver without a prompt key on a tool that
// prints ">>> " before each answer starts (the start-up's marker follows
// the prompt) and gives output without the prompt.
func TestDriverLearnsPrompt(t *testing.T) {
	testenv.Slow(t, "python3")
	testenv.NeedTool(t, "python3", "python3")
	p := filepath.Join(t.TempDir(), "py.json")
	if err := os.WriteFile(p, []byte(`{"kind": "pyrepl", "argv": ["python3", "-i", "-q", "-u"], "print": "print('{}')"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, s := session(t, []string{"--driver", p})
	res, out := run(t, s, "print('a')\nx = 2\nx\nprint('b')", master.SubmitOptions{})
	must(t, "learned prompt", res, out, protocol.StatusOK, "a\n2\nb\n")
}

// TestDriverRefused: a driver file the runner cannot serve is refused at
// start with exit 2 and the reason, before the session is made.
func TestDriverRefused(t *testing.T) {
	testenv.Slow(t, "runner binary")
	bin := testenv.BuildBinary(t, testenv.Runner)
	for body, want := range map[string]string{
		`{"kind": "x", "argv": ["python3"], "print": "print('{}')", "prompt": ".*"}`:                   "matches an empty line",
		`{"kind": "x", "argv": ["python3"], "print": "print('{}')"} garbage`:                           "more than one JSON object",
		`{"kind": "x", "argv": ["python3"], "print": "print('{}')\u0003"}`:                             "control character 0x03 (^C)",
		`{"kind": "x", "argv": ["python3"], "print": "print('` + strings.Repeat("x", 60000) + `{}')"}`: "at most 256",
	} {
		p := filepath.Join(t.TempDir(), "d.json")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(t.TempDir(), "sess")
		cmd := exec.Command(bin, "--session", dir, "--driver", p)
		b, err := cmd.CombinedOutput()
		out, code := string(b), cmd.ProcessState.ExitCode()
		if err != nil && cmd.ProcessState == nil {
			t.Fatal(err)
		}
		if code != 2 || !strings.Contains(out, want) {
			t.Errorf("driver %.60s: exit %d %q, want 2 and %q", body, code, out, want)
		}
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("driver %.60s: the session was made", body)
		}
	}
}

// TestQuotedPaths: nothing the runner types is parsed by accident. A
// session whose path holds a space serves Yosys (whose script command
// takes no quotes: the runner types a path through its own descriptor),
// and a driver whose source quotes by sh serves a session named
// "s;touch X;x" without running touch.
func TestQuotedPaths(t *testing.T) {
	testenv.Slow(t, "yosys, bash")
	t.Run("yosys", func(t *testing.T) {
		testenv.NeedTool(t, "yosys", "yosys")
		dir := filepath.Join(t.TempDir(), "my project", "sp")
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			t.Fatal(err)
		}
		rp := testenv.StartRunner(t, testenv.RunnerOptions{Dir: dir, WorkDir: t.TempDir(), Args: []string{"--kind", "yosys", "--"}})
		s, err := master.Open(rp.Dir)
		if err != nil {
			t.Fatal(err)
		}
		res, out := run(t, s, "log in a path with a space", master.SubmitOptions{})
		must(t, "yosys in a path with a space", res, out, protocol.StatusOK, "in a path with a space\n")
	})
	t.Run("sh driver", func(t *testing.T) {
		testenv.NeedTool(t, "bash", "bash")
		work := t.TempDir()
		p := filepath.Join(t.TempDir(), "sh.json")
		if err := os.WriteFile(p, []byte(`{"kind": "shdrv", "argv": ["bash", "--norc", "--noprofile", "-i"], "print": "echo {}", "source": ". {}", "quote": "sh"}`), 0o644); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(t.TempDir(), "s;touch X;x")
		rp := testenv.StartRunner(t, testenv.RunnerOptions{Dir: dir, WorkDir: work, Args: []string{"--driver", p, "--"}})
		s, err := master.Open(rp.Dir)
		if err != nil {
			t.Fatal(err)
		}
		res, out := run(t, s, "echo quoted", master.SubmitOptions{})
		must(t, "sh driver in a path with ;", res, out, protocol.StatusOK, "quoted\n")
		if _, err := os.Stat(filepath.Join(work, "X")); err == nil {
			t.Fatal("the session's path was typed unquoted: touch X ran")
		}
	})
}

// TestControlBytesRefused: a payload typed line by line (ngspice) holding
// ^Z is refused with invalid_request naming the byte and its offset, and
// the tool is untouched; --pass-control-bytes lets such bytes through.
func TestControlBytesRefused(t *testing.T) {
	testenv.Slow(t, "ngspice")
	testenv.NeedTool(t, "ngspice", "ngspice")
	_, s := session(t, []string{"--kind", "ngspice"})
	res, _ := run(t, s, "echo a\x1a\necho b", master.SubmitOptions{})
	if res.Status != protocol.StatusError || res.ExitReason != protocol.ReasonInvalidRequest || res.Error == nil ||
		res.Error.Code != protocol.CodeInvalidRequest || !strings.Contains(res.Error.Message, "0x1a (^Z) at byte 6") {
		t.Fatalf("%s %+v, want invalid_request naming 0x1a (^Z) at byte 6", res.Status, res.Error)
	}
	res, out := run(t, s, "echo still here", master.SubmitOptions{})
	must(t, "after the refusal", res, out, protocol.StatusOK, "still here\n")
	st, err := s.ReadState()
	if err != nil || st.ToolStarts != 1 {
		t.Fatalf("tool_starts %d (%v): the tool was touched", st.ToolStarts, err)
	}
}

// TestCancelEndsWholePayload: ngspice, cancelled during a transient
// analysis of a three-line payload: no later line runs (the third sets a
// vector), and ngspice keeps its state (docs/drivers.md's table).
func TestCancelEndsWholePayload(t *testing.T) {
	testenv.Slow(t, "ngspice")
	testenv.NeedTool(t, "ngspice", "ngspice")
	rp, s := session(t, []string{"--kind", "ngspice"})
	_ = rp
	deck := repoFile(t, "testdata/flow/rc.cir")
	res, _ := run(t, s, "let kept = 7", master.SubmitOptions{})
	must(t, "set a vector", res, "", protocol.StatusOK, "")
	ctx, cancel := context.WithTimeout(context.Background(), testenv.LongWait)
	defer cancel()
	c, err := s.Submit(ctx, "source "+deck+"\ntran 1n 100m\nlet after_cancel = 1", master.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitOutput(t, c, "Reference value")
	if _, err := s.Cancel(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	res, err = c.Wait(ctx, master.WaitOptions{})
	if res == nil || res.Status != protocol.StatusCancelled {
		t.Fatalf("cancel: %+v %v, want cancelled", res, err)
	}
	_, out := run(t, s, "print kept\nprint after_cancel", master.SubmitOptions{})
	if !strings.Contains(out, "kept = 7") || strings.Contains(out, "after_cancel = 1") {
		t.Fatalf("after the cancel: %q: want kept (ngspice keeps its state) and no after_cancel (the line after the cancel never ran)", out)
	}
}

// waitOutput waits until c's output holds s.
func waitOutput(t *testing.T, c *master.Command, s string) {
	t.Helper()
	for deadline := time.Now().Add(testenv.LongWait); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if b, err := c.Output(0, -1); err == nil && strings.Contains(string(b), s) {
			return
		}
	}
	t.Fatalf("%q never appeared in the output", s)
}

// TestDeathInTheGap: a tool that dies between the claim of a command and
// its begin line (here: stopped, the command typed, then killed) never
// ran it: the restarted tool runs it, and its result is OpenSTA's answer,
// not tool_died.
func TestDeathInTheGap(t *testing.T) {
	testenv.Slow(t, "OpenSTA")
	testenv.NeedTool(t, "sta", "opensta")
	_, s := session(t, nil, "sta", "-no_splash")
	st, err := s.ReadState()
	if err != nil || st.ToolPGID == 0 {
		t.Fatalf("no tool pid: %+v %v", st, err)
	}
	pid := st.ToolPGID
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testenv.LongWait)
	defer cancel()
	c, err := s.Submit(ctx, "puts ran; expr 40+2", master.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(testenv.LongWait); ; time.Sleep(10 * time.Millisecond) {
		st, err := s.ReadState()
		if err == nil && st.CurrentCmdID != nil && *st.CurrentCmdID == c.ID {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the command was never claimed")
		}
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	res, err := c.Wait(ctx, master.WaitOptions{})
	if err != nil {
		t.Fatalf("%+v %v", res, err)
	}
	out, _ := c.Output(0, -1)
	must(t, "the command the dead tool never began", res, string(out), protocol.StatusOK, "ran\n")
	if value(res) != "42" || res.ToolRestarted {
		t.Fatalf("value %q tool_restarted %v, want 42 from the restarted tool", value(res), res.ToolRestarted)
	}
}

// TestNeverBegunBound: a tool that dies on every command line before the
// command begins gets the command put back twice, then answered with its
// death, never run and never lost.
func TestNeverBegunBound(t *testing.T) {
	testenv.Slow(t, "tclsh")
	testenv.NeedTool(t, "tclsh", "tcl")
	script := filepath.Join(t.TempDir(), "dies.tcl")
	// Evaluates what it reads, but exits at the runner's command line.
	if err := os.WriteFile(script, []byte(`fconfigure stdout -buffering none
set cmd ""
while {[gets stdin line] >= 0} {
    if {[string match "::__sp::ev *" $line] || [string match "::__sp::src *" $line]} { exit 3 }
    append cmd $line "\n"
    if {[info complete $cmd]} { catch {uplevel #0 $cmd}; set cmd "" }
}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, s := session(t, []string{"--max-restarts", "10"}, "tclsh", script)
	res, _ := run(t, s, "puts never", master.SubmitOptions{})
	if res.Status != protocol.StatusError || res.ExitReason != protocol.ReasonToolExit || res.Error == nil ||
		!strings.Contains(res.Error.Message, "before this command began (3 times)") {
		t.Fatalf("%s %s %+v, want tool_exit after 3 deaths before it began", res.Status, res.ExitReason, res.Error)
	}
}

// TestYosysFatalError: a fatal ERROR ends Yosys (a Verilog syntax error,
// a script file that cannot be read): the result says the tool ended and
// its message is Yosys's ERROR line; the restarted Yosys serves.
func TestYosysFatalError(t *testing.T) {
	testenv.Slow(t, "yosys")
	testenv.NeedTool(t, "yosys", "yosys")
	bad := filepath.Join(t.TempDir(), "bad.v")
	if err := os.WriteFile(bad, []byte("module m(input a; endmodule\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, s := session(t, []string{"--kind", "yosys"})
	for payload, want := range map[string]string{
		"read_verilog " + bad:    "ERROR: syntax error",
		"script /nonexistent.ys": "ERROR: Can't open script file `/nonexistent.ys' for reading",
	} {
		res, _ := run(t, s, payload, master.SubmitOptions{})
		if res.Status != protocol.StatusError || res.ExitReason != protocol.ReasonToolExit || res.Error == nil ||
			!strings.Contains(res.Error.Message, want) || !strings.Contains(res.Error.Message, "the tool exited with code 1") {
			t.Fatalf("%s: %s %s %+v, want tool_exit with %q and how the tool ended", payload, res.Status, res.ExitReason, res.Error, want)
		}
		res, out := run(t, s, "log served", master.SubmitOptions{})
		must(t, "after a fatal error", res, out, protocol.StatusOK, "served\n")
	}
}

// TestDriverInit: --init with a driver that has a file command (Yosys) runs
// the script after every start and judges it by whether it ran to its end:
// one that stops at an error fails the start, quoting Yosys's line.
func TestDriverInit(t *testing.T) {
	testenv.Slow(t, "yosys")
	testenv.NeedTool(t, "yosys", "yosys")
	dir := t.TempDir()
	good := filepath.Join(dir, "good.ys")
	bad := filepath.Join(dir, "bad.ys")
	if err := os.WriteFile(good, []byte("log -n init-ran\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("log before\nnosuchcmd\nlog after\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rp, s := session(t, []string{"--kind", "yosys", "--init", good})
	res, out := run(t, s, "log served", master.SubmitOptions{})
	must(t, "after a good --init", res, out, protocol.StatusOK, "served\n")
	b, err := os.ReadFile(filepath.Join(rp.Dir, protocol.FileMeta))
	if err != nil || !strings.Contains(string(b), `"output":"init-ran"`) {
		t.Fatalf("init_end lacks the script's output %q (%v)", "init-ran", err)
	}
	rp2 := testenv.StartRunner(t, testenv.RunnerOptions{NoWait: true, WorkDir: t.TempDir(),
		Args: []string{"--max-restarts", "0", "--kind", "yosys", "--init", bad, "--"}})
	if err := rp2.Wait(); err == nil {
		t.Fatal("a runner whose --init stops at an error started")
	}
	st, err := testenv.ReadState(rp2.Dir)
	if err != nil || !strings.Contains(st.Reason, "stopped before its end: ERROR: No such command: nosuchcmd") {
		t.Fatalf("reason %q (%v): want the init script's error line", st.Reason, err)
	}
}

// TestStuckOnlyWhenWaiting: a line shell that reads ahead (every typed
// line in one read: testdata/tools/readahead.tcl) leaves the terminal's
// input queue empty while its lines wait to run. A command that prints
// half a line and then computes for longer than the stuck rule's quiet
// second is not stuck: its tool runs (PROTOCOL.md 11.1, rule 6), and the
// command ends ok with all its output. An unfinished statement in the same
// shell, which took the end and done lines and waits at its "...> "
// prompt, is still found stuck, and the shell serves the next command.
func TestStuckOnlyWhenWaiting(t *testing.T) {
	testenv.Slow(t, "tclsh")
	testenv.NeedTool(t, "tclsh", "tcl")
	drv := filepath.Join(t.TempDir(), "ra.json")
	if err := os.WriteFile(drv, []byte(`{"kind": "ra", "print": "puts \"{}\"", "prompt": "(?:RA|\\.\\.\\.)> "}`), 0o644); err != nil {
		t.Fatal(err)
	}
	// At nice 19: its 2.5 s of computing must not starve tests beside it.
	_, s := session(t, []string{"--driver", drv}, "nice", "-n", "19", "tclsh", repoFile(t, "testdata/tools/readahead.tcl"))
	res, out := run(t, s, `puts -nonewline "computing... "; set t [clock milliseconds]; while {[clock milliseconds] - $t < 2500} {}; puts done`, master.SubmitOptions{})
	must(t, "half a line, then 2.5 s of work", res, out, protocol.StatusOK, "computing... done\n")
	res, _ = run(t, s, "proc f {} {\n  puts x", master.SubmitOptions{})
	if res.Status != protocol.StatusError || res.Error == nil || !strings.Contains(res.Error.Message, "unfinished") {
		t.Fatalf("an unfinished statement: %s %+v, want an error that the statement is unfinished", res.Status, res.Error)
	}
	res, out = run(t, s, "puts probe", master.SubmitOptions{})
	must(t, "the next command", res, out, protocol.StatusOK, "probe\n")
}

// TestStuckBesideABusyThread: a Python REPL whose payload left a helper
// thread computing for ever, then an unfinished statement. The REPL's
// main thread waits at its "... " prompt: the command is stuck although
// the process keeps a CPU busy, and the REPL serves the next command.
// (A rule that took any busy thread for work hung here until a timeout.)
func TestStuckBesideABusyThread(t *testing.T) {
	testenv.Slow(t, "python3")
	// The interpreter itself, at nice 19: its busy thread must not starve
	// tests beside it (a version manager's shim would start slowly there).
	python := testenv.NeedTool(t, "python3", "python3")
	_, s := session(t, []string{"--driver", pyDriver(t, true, "")}, "nice", "-n", "19", python, "-i", "-q", "-u")
	res, out := run(t, s, "import threading; threading.Thread(target=lambda: [None for _ in iter(int, 1)], daemon=True).start(); print('started')", master.SubmitOptions{})
	must(t, "a thread that computes for ever", res, out, protocol.StatusOK, "started\n")
	res, _ = run(t, s, "print(1,", master.SubmitOptions{Timeout: time.Minute})
	if res.Status != protocol.StatusError || res.Error == nil || !strings.Contains(res.Error.Message, "unfinished") {
		t.Fatalf("an unfinished statement beside a busy thread: %s %+v, want an error that the statement is unfinished", res.Status, res.Error)
	}
	res, out = run(t, s, "print('probe')", master.SubmitOptions{})
	must(t, "the next command", res, out, protocol.StatusOK, "probe\n")
}

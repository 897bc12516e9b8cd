package realtools

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/internal/testenv"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
)

// step is one command of a driver scenario and what it must give.
type step struct {
	payload string
	status  protocol.Status
	out     string
	errMsg  string // error.message when status is error
}

// driverScenario runs steps on a session and checks each; it returns the
// results' outputs for comparison across sessions.
func driverScenario(t *testing.T, s *master.Session, steps []step) []string {
	t.Helper()
	var outs []string
	for _, st := range steps {
		res, out := run(t, s, st.payload, master.SubmitOptions{})
		must(t, st.payload, res, out, st.status, st.out)
		if st.errMsg != "" && (res.Error == nil || res.Error.Message != st.errMsg) {
			t.Fatalf("%q: error %+v, want message %q", st.payload, res.Error, st.errMsg)
		}
		if res.Value != nil {
			t.Fatalf("%q: a driver kind has no value, got %q", st.payload, *res.Value)
		}
		outs = append(outs, string(res.Status)+"\x00"+out)
	}
	return outs
}

func yosysSteps() []step {
	return []step{
		{payload: "log hello\nlog -n x\nlog bad", status: protocol.StatusOK, out: "hello\nxbad\n"},
		{payload: "foo\nlog never", status: protocol.StatusError, out: "ERROR: No such command: foo (type 'help' for a command overview)\n",
			errMsg: "ERROR: No such command: foo (type 'help' for a command overview)"},
		{payload: "log after the error", status: protocol.StatusOK, out: "after the error\n"},
		{payload: "", status: protocol.StatusOK, out: ""},
	}
}

func ngspiceSteps() []step {
	return []step{
		{payload: "echo hello\nlet a = 2*3\nprint a", status: protocol.StatusOK, out: "hello\na = 6.000000e+00\n"},
		{payload: "foo\necho after", status: protocol.StatusError, out: "foo: no such command available in ngspice\nafter\n",
			errMsg: "foo: no such command available in ngspice"},
		// Text like the prompt is output unless it begins a line (what
		// begins a line as the prompt does is taken for one: docs/drivers.md).
		{payload: "echo \"at ngspice 3 -> mid-line\"", status: protocol.StatusOK, out: "at ngspice 3 -> mid-line\n"},
	}
}

// TestDriverPresets runs Yosys and ngspice under their presets: exact
// output without prompts or the file command's banner, the error pattern
// as the status with the matching line as message, no value. The same
// commands under `--driver FILE` of the preset's file give the same
// results (the preset is that file).
func TestDriverPresets(t *testing.T) {
	for _, tc := range []struct {
		kind, cmd string
		steps     []step
	}{
		{"yosys", "yosys", yosysSteps()},
		{"ngspice", "ngspice", ngspiceSteps()},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			testenv.NeedTool(t, tc.cmd, tc.cmd)
			_, s := session(t, []string{"--kind", tc.kind})
			st, err := s.ReadState()
			if err != nil || string(st.Kind) != tc.kind {
				t.Fatalf("state.json kind %q (%v), want %s", st.Kind, err, tc.kind)
			}
			a := driverScenario(t, s, tc.steps)
			_, s2 := session(t, []string{"--driver", repoFile(t, "runner/drivers/"+tc.kind+".json")})
			b := driverScenario(t, s2, tc.steps)
			if strings.Join(a, "\x01") != strings.Join(b, "\x01") {
				t.Fatalf("--driver of the preset's file differs from --kind %s:\n%q\n%q", tc.kind, a, b)
			}
		})
	}
}

// TestDriverFile drives a REPL no preset knows (Python's interactive
// interpreter) from a driver file written here: print, no source (the
// payload is typed line by line), an error pattern and a prompt.
func TestDriverFile(t *testing.T) {
	testenv.Slow(t, "real EDA shells")
	py := testenv.NeedTool(t, "python3", "python3")
	drv := filepath.Join(t.TempDir(), "py.json")
	if err := os.WriteFile(drv, []byte(`{"kind": "pyrepl", "print": "print('{}')", "error": "^Traceback ", "prompt": "(?:>>>|\\.\\.\\.) "}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, s := session(t, []string{"--driver", drv}, py, "-i", "-q", "-u")
	driverScenario(t, s, []step{
		{payload: "x = 6*7\nprint(x)", status: protocol.StatusOK, out: "42\n"},
		{payload: "1/0", status: protocol.StatusError, out: "Traceback (most recent call last):\n  File \"<stdin>\", line 1, in <module>\nZeroDivisionError: division by zero\n",
			errMsg: "Traceback (most recent call last):"},
		{payload: "print(x+1)", status: protocol.StatusOK, out: "43\n"},
	})
	// A payload larger than a typed one may be says so.
	res, _ := run(t, s, strings.Repeat("x = 1\n", 1000), master.SubmitOptions{})
	if res.Status != protocol.StatusError || res.Error == nil || !strings.Contains(res.Error.Message, "typed line by line") {
		t.Fatalf("a 6000-byte typed payload: %s %+v", res.Status, res.Error)
	}
}

// TestDriverCtrlC: what Ctrl-C does to each driver tool, as docs/drivers.md's
// table says: ngspice stops the analysis and keeps its state, Yosys dies
// and is started again.
func TestDriverCtrlC(t *testing.T) {
	testenv.Slow(t, "real EDA shells")
	for _, tc := range []struct {
		kind, long, after, afterOut string
		restarts                    bool
	}{
		{"ngspice", "let keep = 5\nshell sleep 60", "print keep", "keep = 5.000000e+00\n", false},
		{"yosys", "tee -q exec -- sleep 60", "log alive", "alive\n", true},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			testenv.NeedTool(t, tc.kind, tc.kind)
			_, s := session(t, []string{"--kind", tc.kind})
			res, _ := run(t, s, tc.long, master.SubmitOptions{Timeout: time.Second})
			if res.Status != protocol.StatusTimeout || res.ToolRestarted != tc.restarts {
				t.Fatalf("Ctrl-C: %s restarted=%v, want timeout restarted=%v", res.Status, res.ToolRestarted, tc.restarts)
			}
			res, out := run(t, s, tc.after, master.SubmitOptions{})
			must(t, "after Ctrl-C", res, out, protocol.StatusOK, tc.afterOut)
		})
	}
}

// TestYosysNestedShell: Yosys's `shell` opens an interactive shell of its
// own, "(2) yosys> " after an empty line, and waits there: the command
// runs on, that question is in its output at once (a send's expect finds
// it; an empty line before it was held back as a possible prompt, so the
// expect never matched), and the answers typed there run. Once the nested
// shell exits, the payload goes on and the command ends ok with every
// level's output.
func TestYosysNestedShell(t *testing.T) {
	testenv.NeedTool(t, "yosys", "yosys")
	_, s := session(t, []string{"--kind", "yosys"})
	ctx, cancel := context.WithTimeout(context.Background(), testenv.LongWait)
	defer cancel()
	res, got := run(t, s, "log warm", master.SubmitOptions{})
	must(t, "a first command", res, got, protocol.StatusOK, "warm\n")
	c, err := s.Submit(ctx, "log before\nshell\nlog after", master.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, answer := range []string{"log inner", "exit"} {
		if _, err := s.Send(ctx, c.ID, []byte(answer+"\n"), master.SendOptions{Expect: `\(2\) yosys> $`, ExpectTimeout: testenv.LongWait}); err != nil {
			t.Fatalf("send %q at the nested prompt: %v", answer, err)
		}
	}
	res, err = c.Wait(ctx, master.WaitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.Output(0, -1)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != protocol.StatusOK || !strings.HasPrefix(string(out), "before\n") ||
		!strings.Contains(string(out), "inner\n") || !strings.HasSuffix(string(out), "after\n") {
		t.Fatalf("a nested shell answered and left: %s %+v, output %q; want ok, before, inner and after", res.Status, res.Error, out)
	}
	res, got = run(t, s, "log next", master.SubmitOptions{})
	must(t, "the command after", res, got, protocol.StatusOK, "next\n")
}

// TestYosysModulePrompt: after `cd` Yosys's prompt names the module
// ("yosys [top]> "), and with a partial selection it has a star. Both are
// its prompt: a payload that changes it and then fails ends as an error
// with the error line (its done line was typed once Yosys was back at that
// prompt; before, the runner waited for "yosys> " for ever), the prompt
// is not in any output, and a nested shell there is answered at its own
// prompt.
func TestYosysModulePrompt(t *testing.T) {
	testenv.NeedTool(t, "yosys", "yosys")
	dir := t.TempDir()
	v := filepath.Join(dir, "top.v")
	if err := os.WriteFile(v, []byte("module top(input a, output y); assign y = a; endmodule\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, s := session(t, []string{"--kind", "yosys"})
	res, out := run(t, s, "read_verilog "+v, master.SubmitOptions{Timeout: testenv.LongWait})
	if res.Status != protocol.StatusOK {
		t.Fatalf("read_verilog: %s %+v: %q", res.Status, res.Error, out)
	}
	for _, p := range []string{"cd top", "select w:a"} {
		res, _ = run(t, s, p+"\nbogus_cmd", master.SubmitOptions{Timeout: testenv.LongWait})
		if res.Status != protocol.StatusError || res.Error == nil || !strings.Contains(res.Error.Message, "bogus_cmd") {
			t.Fatalf("%q then an unknown command: %s %+v, want an error naming bogus_cmd", p, res.Status, res.Error)
		}
		res, out = run(t, s, "log -n x", master.SubmitOptions{Timeout: testenv.LongWait})
		must(t, "output without a newline at the prompt after "+p, res, out, protocol.StatusOK, "x")
	}
}

// TestNgspiceQuestionEndingWithPrompt: a question that ends with the
// prompt's text ("Q ngspice 4 -> ") is held back as a possible prompt, and
// output once ngspice has been quiet for a second, whatever the heartbeat
// (30 s here): an expect for it matches while the command still runs.
func TestNgspiceQuestionEndingWithPrompt(t *testing.T) {
	testenv.NeedTool(t, "ngspice", "ngspice")
	_, s := session(t, []string{"--kind", "ngspice", "--heartbeat", "30s"})
	ctx, cancel := context.WithTimeout(context.Background(), testenv.LongWait)
	defer cancel()
	q := filepath.Join(t.TempDir(), "q.sh") // ngspice's shell has quoting rules of its own.
	if err := os.WriteFile(q, []byte("printf 'Q ngspice 4 -> '; sleep 10; echo done\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := s.Submit(ctx, "shell sh "+q, master.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Send(ctx, c.ID, []byte("\n"), master.SendOptions{Expect: `Q ngspice 4 -> $`, ExpectTimeout: testenv.LongWait}); err != nil {
		t.Fatalf("an expect for a question ending with the prompt's text: %v", err)
	}
	res, err := c.Wait(ctx, master.WaitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := c.Output(0, -1)
	must(t, "the question's command", res, string(out), protocol.StatusOK, "Q ngspice 4 -> done\n")
}

package realtools

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/internal/testenv"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
)

// tclTool is a Tcl shell the runner drives as kind tcl.
type tclTool struct {
	name string
	cmd  string // program that must be on PATH
	pkg  string // its Debian package
	argv []string
	// stdin is how a payload reads a line `master send` types: Magic's
	// interpreter has no stdin channel (its own design), so it reads the
	// terminal channel the runner opens for it.
	stdin string
	// ctrlCRestarts says what Ctrl-C does to it: true when it dies of
	// SIGINT (the runner starts it again and runs --init again).
	ctrlCRestarts bool
	// exitDeferred: its exit command takes effect once the typed line
	// is done (OpenSTA), so the command that calls it ends ok and the
	// tool exits right after.
	exitDeferred bool
}

func repoFile(t *testing.T, rel string) string {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	p := filepath.Join(filepath.Dir(here), "..", "..", rel)
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
	return p
}

func tclTools(t *testing.T) []tclTool {
	return []tclTool{
		{name: "opensta", cmd: "sta", pkg: "opensta", argv: []string{"sta", "-no_splash"}, stdin: "stdin", ctrlCRestarts: true, exitDeferred: true},
		{name: "magic", cmd: "magic", pkg: "magic", argv: []string{"magic", "-dnull", "-noconsole"}, stdin: "$::__sp::in", ctrlCRestarts: true},
		{name: "netgen", cmd: "netgen-lvs", pkg: "netgen-lvs", argv: []string{"netgen-lvs", "-noconsole"}, stdin: "stdin", ctrlCRestarts: true},
		{name: "linewise", cmd: "tclsh", pkg: "tcl", argv: []string{"tclsh", repoFile(t, "testdata/tools/linewise.tcl")}, stdin: "stdin", ctrlCRestarts: true},
	}
}

// session starts a runner with flags and argv and opens it.
func session(t *testing.T, flags []string, argv ...string) (*testenv.RunnerProcess, *master.Session) {
	t.Helper()
	args := append(append([]string{}, flags...), "--")
	// The tool works in a directory of its own: what a payload writes
	// (ngspice's "echo a > b" writes b) stays out of the repository.
	rp := testenv.StartRunner(t, testenv.RunnerOptions{WorkDir: t.TempDir(), Args: append(args, argv...)})
	s, err := master.Open(rp.Dir)
	if err != nil {
		t.Fatal(err)
	}
	return rp, s
}

// run runs payload and returns its result and output; a failed command
// is a result, not an error.
func run(t *testing.T, s *master.Session, payload string, opts master.SubmitOptions) (*protocol.Result, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.LongWait)
	defer cancel()
	c, err := s.Submit(ctx, payload, opts)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Wait(ctx, master.WaitOptions{})
	if err != nil && !errors.Is(err, master.ErrCommandFailed) && !errors.Is(err, master.ErrCommandTimeout) && !errors.Is(err, master.ErrCancelled) {
		t.Fatalf("%.60q: %v", payload, err)
	}
	if res.OutputPath == "" {
		return res, "" // Ended before it ran: no output file.
	}
	out, err := c.Output(0, -1)
	if err != nil {
		t.Fatalf("output of %.60q: %v", payload, err)
	}
	return res, string(out)
}

func value(r *protocol.Result) string {
	if r.Value == nil {
		return "<none>"
	}
	return *r.Value
}

func must(t *testing.T, what string, res *protocol.Result, out string, wantStatus protocol.Status, wantOut string) {
	t.Helper()
	if res.Status != wantStatus || out != wantOut {
		msg := ""
		if res.Error != nil {
			msg = res.Error.Message
		}
		t.Fatalf("%s: status %s (%s) output %q, want %s %q", what, res.Status, msg, out, wantStatus, wantOut)
	}
}

// TestTclShells runs every promise tclsh keeps on the real Tcl shells and
// on a shell that evaluates each line alone and echoes its input: exact
// output and value, a Tcl error with its message, a multi-line proc,
// thousands of lines and an 80 KB line, send to a read of the terminal,
// --init after every start, Ctrl-C (a restart on these: they die of
// SIGINT) and a restart after the tool exits.
func TestTclShells(t *testing.T) {
	testenv.Slow(t, "real EDA shells")
	for _, tool := range tclTools(t) {
		t.Run(tool.name, func(t *testing.T) {
			testenv.NeedTool(t, tool.cmd, tool.pkg)
			init := filepath.Join(t.TempDir(), "init.tcl")
			if err := os.WriteFile(init, []byte("set ::inited [expr {[info exists ::inited] ? $::inited + 1 : 1}]\nproc twice {x} {\n  return [expr {2*$x}]\n}\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			_, s := session(t, []string{"--init", init}, tool.argv...)
			o := master.SubmitOptions{}

			// The start-up leaves nothing at the global level a payload
			// could collide with (a global v broke "gets stdin v($q)").
			res, _ := run(t, s, "expr {[info exists ::v] || [info exists ::c] || [info exists ::l]}", o)
			if value(res) != "0" {
				t.Fatalf("the start-up left a global variable: %q", value(res))
			}
			res, out := run(t, s, "puts hello; expr 6*7", o)
			must(t, "puts and value", res, out, protocol.StatusOK, "hello\n")
			if value(res) != "42" {
				t.Fatalf("value %q, want 42", value(res))
			}
			res, out = run(t, s, "puts [twice 21]\nproc f {a} {\n  # a comment\n  return \"<$a>\"\n}\nputs [f x]", o)
			must(t, "multi-line proc and --init", res, out, protocol.StatusOK, "42\n<x>\n")
			res, out = run(t, s, "puts before\nerror {boom: it broke}", o)
			must(t, "Tcl error", res, out, protocol.StatusError, "before\n")
			if res.Error == nil || res.Error.Message != "boom: it broke" {
				t.Fatalf("error %+v, want boom: it broke", res.Error)
			}

			var b strings.Builder
			var want strings.Builder
			for i := range 3000 {
				b.WriteString("puts \"line " + itoa(i) + "\"\n")
				want.WriteString("line " + itoa(i) + "\n")
			}
			res, out = run(t, s, b.String(), o)
			must(t, "3000 lines", res, out, protocol.StatusOK, want.String())
			long := strings.Repeat("0123456789abcdef", 80<<10/16)
			res, out = run(t, s, "set long \""+long+"\"\nputs [string length $long]; puts [string range $long end-5 end]", o)
			must(t, "an 80 KB line", res, out, protocol.StatusOK, "81920\nabcdef\n")

			// send: a payload reads a line from the terminal.
			ctx, cancel := context.WithTimeout(context.Background(), testenv.LongWait)
			defer cancel()
			c, err := s.Submit(ctx, "puts -nonewline {name? }; flush stdout; set a [gets "+tool.stdin+"]; puts \"got <$a>\"", o)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Send(ctx, c.ID, []byte("fifty two\n"), master.SendOptions{Expect: "name\\? $"}); err != nil {
				t.Fatalf("send: %v", err)
			}
			res, err = c.Wait(ctx, master.WaitOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got, _ := c.Output(0, -1)
			must(t, "send", res, string(got), protocol.StatusOK, "name? got <fifty two>\n")

			// Ctrl-C through a timeout, then the tool serves again with --init.
			res, _ = run(t, s, "puts started; after 60000", master.SubmitOptions{Timeout: time.Second})
			if res.Status != protocol.StatusTimeout {
				t.Fatalf("after Ctrl-C: %s, want timeout", res.Status)
			}
			if res.ToolRestarted != tool.ctrlCRestarts {
				t.Fatalf("tool_restarted %v after Ctrl-C, want %v (docs/drivers.md's table says what Ctrl-C does to %s)", res.ToolRestarted, tool.ctrlCRestarts, tool.name)
			}
			res, out = run(t, s, "puts [twice $::inited]", o)
			// A restarted tool ran --init again (twice exists, ::inited is 1).
			must(t, "after Ctrl-C", res, out, protocol.StatusOK, "2\n")

			// The tool exits: the command says so, and a new one serves.
			st, err := s.ReadState()
			if err != nil {
				t.Fatal(err)
			}
			res, _ = run(t, s, "exit 3", o)
			switch {
			case tool.exitDeferred:
				if res.Status != protocol.StatusOK {
					t.Fatalf("exit (deferred): %s %s, want ok", res.Status, res.ExitReason)
				}
				waitStarts(t, s, st.ToolStarts+1)
			case res.Status != protocol.StatusError || res.ExitReason != protocol.ReasonToolExit:
				t.Fatalf("exit: %s %s, want error tool_exit", res.Status, res.ExitReason)
			}
			res, out = run(t, s, "puts [twice 2]", o)
			must(t, "after exit", res, out, protocol.StatusOK, "4\n")
		})
	}
}

func itoa(i int) string {
	const d = "0123456789"
	if i < 10 {
		return d[i : i+1]
	}
	return itoa(i/10) + d[i%10:i%10+1]
}

// waitStarts waits until the runner has started the tool n times and
// serves again.
func waitStarts(t *testing.T, s *master.Session, n int64) {
	t.Helper()
	deadline := time.Now().Add(testenv.LongWait)
	for time.Now().Before(deadline) {
		st, err := s.ReadState()
		if err == nil && st.ToolStarts >= n && st.Phase == protocol.PhaseIdle {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("the tool was not started %d times", n)
}

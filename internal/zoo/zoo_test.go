package zoo

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/internal/conformance"
	"github.com/skillpilot/skillpilot/internal/testenv"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
)

func TestMain(m *testing.M) {
	conformance.Main() // This binary also serves as the runner, the master CLI and the Go adapter.
	flag.Parse()
	// The scenarios mostly wait: four at a time, not GOMAXPROCS (as
	// internal/conformance does).
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", "4")
	}
	os.Exit(m.Run())
}

// scenarios are the core conformance scenarios every zoo shell runs with
// the Go master: submit, output and value (submit_wait_run), an error, a
// timeout and a cancel (outcomes, cancel), send to a read (interactive),
// a restart that runs --init again (restart_init), a stop.
var scenarios = []string{"submit_wait_run", "outcomes", "cancel", "interactive", "restart_init", "stop"}

func shell(t *testing.T, name string) Tool {
	t.Helper()
	for _, s := range Shells {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no zoo shell %q", name)
	return Tool{}
}

// TestZooConformance runs the core scenarios with the Go master on every
// zoo shell that serves. A scenario a shell's behaviour prevents on
// purpose is named in its Replaced, with why, and a test below shows what
// happens instead; nothing else is left out.
func TestZooConformance(t *testing.T) {
	testenv.Slow(t, "the core scenarios on every zoo shell")
	env := newScenarioEnv(t)
	for _, z := range Shells {
		if !z.Serves {
			continue
		}
		t.Run(strings.ReplaceAll(z.Name, " ", "_"), func(t *testing.T) {
			t.Parallel()
			testenv.NeedTool(t, z.Program, z.Package)
			work := t.TempDir()
			// After the scenarios, which run in parallel subtests.
			t.Cleanup(func() { killJobServers(t, filepath.Join(work, "jobserver.pids")) })
			env.run(t, z, "ZOO_LOG="+filepath.Join(work, "zoo.log"), "ZOO_JOBSERVER_PIDFILE="+filepath.Join(work, "jobserver.pids"))
		})
	}
}

// scenarioEnv runs the core scenarios on a tool (internal/conformance).
type scenarioEnv struct{ repo, self, bin string }

func newScenarioEnv(t *testing.T) scenarioEnv {
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return scenarioEnv{repo: repo, self: self, bin: conformance.MakeBin(t)}
}

// run runs the core scenarios with the Go master on tool, given the
// environment env; those its Replaced names are logged with why, not run.
func (e scenarioEnv) run(t *testing.T, tool Tool, env ...string) {
	var only []string
	for _, sc := range scenarios {
		if why, ok := tool.Replaced[sc]; ok {
			t.Logf("%s: not run, the behaviour prevents it (%s); a test of its own shows what happens", sc, why)
			continue
		}
		only = append(only, sc)
	}
	conformance.Run(t, conformance.Env{Repo: e.repo, Bin: e.bin, Self: e.self, RunnerRoot: t.TempDir(), ParallelScenarios: true,
		Masters: []string{"go"}, Only: only, Tool: tool.Command(env...)})
}

// killJobServers ends the job servers the jobserver shell left (they left
// its session: no runner can find them).
func killJobServers(t *testing.T, pidfile string) {
	data, err := os.ReadFile(pidfile)
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// start starts a runner on a zoo shell in a working directory of its own
// and opens the session.
func start(t *testing.T, z Tool, flags []string, extraEnv ...string) (*testenv.RunnerProcess, *master.Session, string) {
	t.Helper()
	testenv.NeedTool(t, z.Program, z.Package)
	work := t.TempDir()
	args := append(append(append([]string{}, z.Flags...), flags...), "--")
	rp := testenv.StartRunner(t, testenv.RunnerOptions{WorkDir: work, Args: append(args, z.Command(extraEnv...)...)})
	s, err := master.Open(rp.Dir)
	if err != nil {
		t.Fatal(err)
	}
	return rp, s, work
}

// run runs payload and returns its result and output.
func run(t *testing.T, s *master.Session, payload string, opts master.SubmitOptions) (*protocol.Result, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.LongWait)
	defer cancel()
	c, err := s.Submit(ctx, payload, opts)
	if err != nil {
		t.Fatal(err)
	}
	return wait(t, c)
}

func wait(t *testing.T, c *master.Command) (*protocol.Result, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.LongWait)
	defer cancel()
	res, err := c.Wait(ctx, master.WaitOptions{})
	if err != nil && !errors.Is(err, master.ErrCommandFailed) && !errors.Is(err, master.ErrCommandTimeout) && !errors.Is(err, master.ErrCancelled) {
		t.Fatalf("%s: %v", c.ID, err)
	}
	if res.OutputPath == "" {
		return res, ""
	}
	out, err := c.Output(0, -1)
	if err != nil {
		t.Fatal(err)
	}
	return res, string(out)
}

func must(t *testing.T, what string, res *protocol.Result, out string, status protocol.Status, want string) {
	t.Helper()
	if res.Status != status || out != want {
		msg := ""
		if res.Error != nil {
			msg = res.Error.Message
		}
		t.Fatalf("%s: %s (%s) output %s, want %s %s", what, res.Status, msg, short(out), status, short(want))
	}
}

// short quotes s, cut in its middle when long.
func short(s string) string {
	if len(s) <= 400 {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:200]) + fmt.Sprintf(" ... (%d bytes) ... ", len(s)) + strconv.Quote(s[len(s)-200:])
}

func value(r *protocol.Result) string {
	if r.Value == nil {
		return "<none>"
	}
	return *r.Value
}

// submitPrinted submits payload and waits until its output holds text.
func submitPrinted(t *testing.T, s *master.Session, payload, text string, opts master.SubmitOptions) *master.Command {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.LongWait)
	defer cancel()
	c, err := s.Submit(ctx, payload, opts)
	if err != nil {
		t.Fatal(err)
	}
	for {
		if out, err := c.Output(0, -1); err == nil && strings.Contains(string(out), text) {
			return c
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s never printed %q", c.ID, text)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func spool(t *testing.T, s *master.Session) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.Dir(), protocol.FileSpool))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// bigPayload is a payload of about 5 KB (more than a Tcl payload carried
// on the typed line) that prints a numbered line per command, with an
// error at line errAt (0: none), ending with the command "set ::big_last".
func bigPayload(lines, errAt int) (payload, before string) {
	var p, w strings.Builder
	for i := 1; i <= lines; i++ {
		if i == errAt {
			p.WriteString("error \"zoo: the error in the middle\"\n")
			continue
		}
		line := "puts \"payload line " + strconv.Itoa(i) + " of a few kilobytes\"\n"
		p.WriteString(line)
		if errAt == 0 || i < errAt {
			w.WriteString("payload line " + strconv.Itoa(i) + " of a few kilobytes\n")
		}
	}
	p.WriteString("set ::big_last " + strconv.Itoa(lines))
	return p.String(), w.String()
}

// TestPrompts: numbered prompts, changing prompts and a prompt printed
// right after output without a newline never reach a command's output,
// and a command that changes the prompt is followed by commands that
// serve as before.
func TestPrompts(t *testing.T) {
	testenv.Slow(t, "zoo shells")
	for _, name := range []string{"zoo innovus", "zoo pt_shell", "zoo vivado", "zoo prompt_changes"} {
		t.Run(strings.Fields(name)[1], func(t *testing.T) {
			t.Parallel()
			_, s, _ := start(t, shell(t, name), nil)
			o := master.SubmitOptions{}
			for i := range 3 {
				res, out := run(t, s, "puts -nonewline no-newline-"+strconv.Itoa(i), o)
				must(t, "output without a newline", res, out, protocol.StatusOK, "no-newline-"+strconv.Itoa(i))
			}
			res, out := run(t, s, "set tcl_prompt1 {puts -nonewline \"changed [incr ::zoo::n]% \"}; puts set", o)
			must(t, "a payload that changes the prompt", res, out, protocol.StatusOK, "set\n")
			res, out = run(t, s, "puts -nonewline after; expr 6*7", o)
			must(t, "after the prompt changed", res, out, protocol.StatusOK, "after")
			if value(res) != "42" {
				t.Fatalf("value %q after the prompt changed", value(res))
			}
			if sp := spool(t, s); !strings.Contains(sp, "changed ") {
				t.Fatalf("the changed prompt is not in the spool:\n%s", sp)
			}
		})
	}
}

// TestSourceEcho: a shell whose source is the vendor's (-echo -verbose,
// returns nothing, goes on after an error, refuses -encoding) serves
// payloads of every size with Tcl's own evaluation: a 5 KB payload with an
// error in its middle stops there with that error, and one without an
// error has its last command's value (issue 41, goal 1).
func TestSourceEcho(t *testing.T) {
	testenv.Slow(t, "zoo shells")
	_, s, _ := start(t, shell(t, "zoo source_echo"), nil)
	o := master.SubmitOptions{}
	p, want := bigPayload(120, 0)
	res, out := run(t, s, p, o)
	must(t, "a 5 KB payload", res, out, protocol.StatusOK, want)
	if value(res) != "120" {
		t.Fatalf("value %q, want the last command's, 120", value(res))
	}
	p, want = bigPayload(120, 60)
	res, out = run(t, s, p, o)
	must(t, "a 5 KB payload with an error at line 60", res, out, protocol.StatusError, want)
	if res.Error == nil || res.Error.Message != "zoo: the error in the middle" {
		t.Fatalf("error %+v, want the payload's own", res.Error)
	}
	// The shell's own source still works for the user.
	f := filepath.Join(t.TempDir(), "s.tcl")
	if err := os.WriteFile(f, []byte("set a 1\nputs [expr {$a + 1}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, out = run(t, s, "source "+f, o)
	must(t, "the vendor's source", res, out, protocol.StatusOK, "set a 1\n1\nputs [expr {$a + 1}]\n2\n")
}

// TestPutsTee: puts redefined to write a log file as well as the terminal
// prints each line once in the output, and the log has it too.
func TestPutsTee(t *testing.T) {
	testenv.Slow(t, "zoo shells")
	work := t.TempDir()
	log := filepath.Join(work, "tee.log")
	_, s, _ := start(t, shell(t, "zoo puts_tee"), nil, "ZOO_LOG="+log)
	res, out := run(t, s, "puts teed; puts -nonewline also; expr 1", master.SubmitOptions{})
	must(t, "puts teed", res, out, protocol.StatusOK, "teed\nalso")
	p, want := bigPayload(120, 0)
	res, out = run(t, s, p, master.SubmitOptions{})
	must(t, "a 5 KB payload through the teeing puts", res, out, protocol.StatusOK, want)
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "teed\nalso") || !strings.Contains(string(data), "payload line 120 of a few kilobytes") {
		t.Fatalf("the tool's log lacks what the payloads printed:\n%s", data)
	}
}

// TestExitConfirm: a payload's exit asks its question and waits; master
// send answers it and the command ends with the tool's exit, after which
// a restarted tool serves. exit -force does not ask.
func TestExitConfirm(t *testing.T) {
	testenv.Slow(t, "zoo shells")
	_, s, _ := start(t, shell(t, "zoo exit_confirm"), nil)
	ctx, cancel := context.WithTimeout(context.Background(), testenv.LongWait)
	defer cancel()
	c, err := s.Submit(ctx, "puts leaving; exit 3", master.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Send(ctx, c.ID, []byte("n\n"), master.SendOptions{Expect: `exit\? \(y/n\) $`}); err != nil {
		t.Fatalf("send n: %v", err)
	}
	res, out := wait(t, c)
	must(t, "exit answered n", res, out, protocol.StatusOK, "leaving\nDo you really want to exit? (y/n) Exit cancelled.\n")
	c, err = s.Submit(ctx, "exit 3", master.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Send(ctx, c.ID, []byte("y\n"), master.SendOptions{Expect: `exit\? \(y/n\) $`}); err != nil {
		t.Fatalf("send y: %v", err)
	}
	res, _ = wait(t, c)
	if res.Status != protocol.StatusError || res.ExitReason != protocol.ReasonToolExit || res.ExitCode == nil || *res.ExitCode != 3 {
		t.Fatalf("exit answered y: %s %s %v, want error tool_exit code 3", res.Status, res.ExitReason, res.ExitCode)
	}
	res, out = run(t, s, "puts served", master.SubmitOptions{})
	must(t, "after the exit", res, out, protocol.StatusOK, "served\n")
	res, _ = run(t, s, "exit -force 4", master.SubmitOptions{})
	if res.ExitReason != protocol.ReasonToolExit || res.ExitCode == nil || *res.ExitCode != 4 {
		t.Fatalf("exit -force: %s %s %v, want tool_exit code 4", res.Status, res.ExitReason, res.ExitCode)
	}
}

// TestLicenceWait: a licence checkout that prints a line without a
// newline and then waits, with dots or in silence, is a start-up still
// under way, not a tool that rejects the start-up: the first command is
// served by the first start (issue 41, goal 3).
func TestLicenceWait(t *testing.T) {
	testenv.Slow(t, "zoo shells, a licence wait of up to 12 s")
	for _, name := range []string{"zoo licence dots", "zoo licence silent"} {
		t.Run(strings.Fields(name)[2], func(t *testing.T) {
			t.Parallel()
			_, s, _ := start(t, shell(t, name), nil)
			res, out := run(t, s, "puts ready", master.SubmitOptions{})
			must(t, "first command", res, out, protocol.StatusOK, "ready\n")
			st, err := s.ReadState()
			if err != nil || st.ToolStarts != 1 {
				t.Fatalf("tool_starts %d (%v), want 1: the licence wait was taken for a failed start", st.ToolStarts, err)
			}
			if sp := spool(t, s); !strings.Contains(sp, "checked out after") {
				t.Fatalf("no banner in the spool:\n%.2000s", sp)
			}
		})
	}
}

// TestLicenceFails: a checkout that fails ends the tool; the runner gives
// up (exit 4) and its reason quotes the tool's own words.
func TestLicenceFails(t *testing.T) {
	testenv.Slow(t, "zoo shells")
	z := shell(t, "zoo licence fails")
	testenv.NeedTool(t, z.Program, z.Package)
	rp := testenv.StartRunner(t, testenv.RunnerOptions{NoWait: true, WorkDir: t.TempDir(),
		Args: append([]string{"--max-restarts", "1", "--"}, z.Command()...)})
	if code := rp.ExitCode(); code != 4 {
		t.Fatalf("runner exit %d, want 4 (gave up)", code)
	}
	st, err := testenv.ReadState(rp.Dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Failed to check out license 'Zoo_Impl_System'", "queued", "exited with code 1"} {
		if !strings.Contains(st.Reason, want) {
			t.Errorf("reason %q lacks %q", st.Reason, want)
		}
	}
}

// TestBanner: 10,000 lines before the first prompt are the start-up's:
// in the spool, in no command's output.
func TestBanner(t *testing.T) {
	testenv.Slow(t, "zoo shells")
	_, s, _ := start(t, shell(t, "zoo banner"), nil)
	res, out := run(t, s, "puts first", master.SubmitOptions{})
	must(t, "first command", res, out, protocol.StatusOK, "first\n")
	if n := strings.Count(spool(t, s), "Information: banner line "); n != 10000 {
		t.Fatalf("%d banner lines in the spool, want 10000", n)
	}
}

// TestStderr: what a command prints on stdout and stderr is its output,
// in the order it was printed.
func TestStderr(t *testing.T) {
	testenv.Slow(t, "zoo shells")
	_, s, _ := start(t, shell(t, "zoo stderr"), nil)
	var p, want strings.Builder
	for i := range 50 {
		ch := []string{"stdout", "stderr"}[i%2]
		p.WriteString("puts " + ch + " \"" + ch + " " + strconv.Itoa(i) + "\"\n")
		want.WriteString(ch + " " + strconv.Itoa(i) + "\n")
	}
	p.WriteString("puts -nonewline stderr last")
	want.WriteString("last")
	res, out := run(t, s, p.String(), master.SubmitOptions{})
	must(t, "stdout and stderr interleaved", res, out, protocol.StatusOK, want.String())
	res, out = run(t, s, "puts stderr warned; error failed", master.SubmitOptions{})
	must(t, "an error after stderr", res, out, protocol.StatusError, "warned\n")
}

// TestEchoes: a tool that prints what it reads, and one that turns the
// terminal's echo back on before each prompt: neither echo reaches a
// command's output, and a line master send types is read once.
func TestEchoes(t *testing.T) {
	testenv.Slow(t, "zoo shells")
	for _, name := range []string{"zoo echo_input", "zoo echo_on"} {
		t.Run(strings.Fields(name)[1], func(t *testing.T) {
			t.Parallel()
			_, s, _ := start(t, shell(t, name), nil)
			for range 3 {
				res, out := run(t, s, "puts hello; expr 6*7", master.SubmitOptions{})
				must(t, "echoed input", res, out, protocol.StatusOK, "hello\n")
			}
			c := submitPrinted(t, s, "puts -nonewline {name? }; flush stdout; gets stdin a; puts \"got <$a>\"", "name? ", master.SubmitOptions{})
			ctx, cancel := context.WithTimeout(context.Background(), testenv.LongWait)
			defer cancel()
			if _, err := s.Send(ctx, c.ID, []byte("zoo\n"), master.SendOptions{}); err != nil {
				t.Fatal(err)
			}
			res, out := wait(t, c)
			must(t, "send", res, out, protocol.StatusOK, "name? got <zoo>\n")
		})
	}
}

// TestCtrlCAsks: on a tool whose Ctrl-C asks "abort the current command?
// (y/n)" and waits, a Ctrl-C cancel ends cancelled, but the runner's
// resync lines are read as answers: the tool is terminated after
// --resync-wait and restarted (its state gone), and the output keeps the
// question. cancel_policy terminate_tool ends it the same way at once with
// the exact output; master signal INT and master send y abort the command
// and keep the tool's state.
func TestCtrlCAsks(t *testing.T) {
	testenv.Slow(t, "zoo shells; a resync wait of 2 s")
	_, s, _ := start(t, shell(t, "zoo ctrlc_ask"), []string{"--resync-wait", "2s", "--kill-grace", "1s"})
	ctx, cancel := context.WithTimeout(context.Background(), testenv.LongWait)
	defer cancel()
	long := "puts going; flush stdout; while 1 {after 20}"

	run(t, s, "set kept 1", master.SubmitOptions{})
	c := submitPrinted(t, s, long, "going", master.SubmitOptions{})
	if _, err := s.Cancel(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	res, out := wait(t, c)
	if res.Status != protocol.StatusCancelled || !res.ToolRestarted ||
		!strings.HasPrefix(out, "going\n") || !strings.Contains(out, "Interrupt: abort the current command? (y/n) ") {
		t.Fatalf("a Ctrl-C cancel: %s restarted=%v output %q, want cancelled, restarted, the question kept", res.Status, res.ToolRestarted, out)
	}
	res, _ = run(t, s, "info exists kept", master.SubmitOptions{})
	if value(res) != "0" {
		t.Fatalf("the tool kept its state (%q) although it was restarted", value(res))
	}

	run(t, s, "set kept 1", master.SubmitOptions{})
	c = submitPrinted(t, s, long, "going", master.SubmitOptions{CancelPolicy: protocol.PolicyTerminateTool})
	if _, err := s.Cancel(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	res, out = wait(t, c)
	must(t, "a terminate_tool cancel", res, out, protocol.StatusCancelled, "going\n")

	run(t, s, "set kept 1", master.SubmitOptions{})
	c = submitPrinted(t, s, long, "going", master.SubmitOptions{})
	if _, err := s.Signal(ctx, c.ID, "INT"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Send(ctx, c.ID, []byte("y\n"), master.SendOptions{Expect: `\(y/n\) $`}); err != nil {
		t.Fatal(err)
	}
	res, out = wait(t, c)
	must(t, "INT answered y", res, out, protocol.StatusError, "going\n\nInterrupt: abort the current command? (y/n) ")
	if res.Error == nil || !strings.Contains(res.Error.Message, "aborted by the user") || res.ToolRestarted {
		t.Fatalf("INT answered y: error %+v restarted %v, want the tool's abort and no restart", res.Error, res.ToolRestarted)
	}
	res, _ = run(t, s, "info exists kept", master.SubmitOptions{})
	if value(res) != "1" {
		t.Fatalf("after INT and y the tool lost its state (%q)", value(res))
	}
}

// TestJobServer: a tool whose child (a job server in a session of its
// own) keeps the terminal open after the tool exits: the exit ends its
// command at once with the tool's exit code, a restarted tool serves, and
// the runner stops. The job server is out of the runner's reach (it left
// the tool's session), as PROTOCOL.md section 11 says; the test ends it.
func TestJobServer(t *testing.T) {
	testenv.Slow(t, "zoo shells")
	pids := filepath.Join(t.TempDir(), "jobserver.pids")
	t.Cleanup(func() { killJobServers(t, pids) })
	rp, s, _ := start(t, shell(t, "zoo jobserver"), nil, "ZOO_JOBSERVER_PIDFILE="+pids)
	res, out := run(t, s, "puts -nonewline bye; exit 3", master.SubmitOptions{Timeout: time.Minute})
	if res.Status != protocol.StatusError || res.ExitReason != protocol.ReasonToolExit || out != "bye" {
		t.Fatalf("exit: %s %s output %q, want error tool_exit \"bye\"", res.Status, res.ExitReason, out)
	}
	res, out = run(t, s, "puts served", master.SubmitOptions{Timeout: time.Minute})
	must(t, "after the exit", res, out, protocol.StatusOK, "served\n")
	rp.Stop()
	data, _ := os.ReadFile(pids)
	alive := 0
	for _, f := range strings.Fields(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil && syscall.Kill(pid, 0) == nil {
			alive++
		}
	}
	if alive != 2 {
		t.Fatalf("%d of the job servers (%q) outlived the runner, want both: if the runner now ends them, say so in the tool matrix (docs/drivers.md)", alive, data)
	}
}

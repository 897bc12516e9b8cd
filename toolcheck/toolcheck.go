// Package toolcheck is `runner check`: it starts a tool under the runner
// in a temporary session and runs a battery of commands on it, in order —
// the start-up, exact output, the value, an error, a 5 KB payload with an
// error in its middle, UTF-8, output without a final newline, a cancel and
// what the tool kept, send to a read, a kill of the tool and a restart
// with --init, a stop — then says which of the runner's guarantees hold on
// that tool, why not where they do not (in the tool's own words), and the
// flags to run it with.
//
// The battery speaks the kind's language: Tcl, sh, and the Yosys and
// ngspice presets; for another driver only what its print command and
// error pattern allow (the rest is not applicable, and says so).
package toolcheck

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
	"github.com/skillpilot/skillpilot/runner"
)

// Options say what to check and how.
type Options struct {
	Tool       []string // the tool's command line ("": the kind's default)
	Kind       protocol.Kind
	Driver     *runner.DriverSpec // a --driver file's (or nil)
	DriverFile string             // its path, for the recommended command line
	Init       []string           // --init scripts, run after every start
	// StartTimeout bounds the start-up (default 10 minutes: a licence
	// queue); StepTimeout each command of the battery (default 60 s).
	StartTimeout, StepTimeout time.Duration
	// TempDir is where the temporary session is made (default the
	// system's).
	TempDir string
	// Keep keeps the session even when every check holds.
	Keep bool
	// ResyncWait, KillGrace and InitTimeout are the runner's (defaults
	// 5 s, 3 s and 10 minutes).
	ResyncWait, KillGrace, InitTimeout time.Duration
}

// Run runs the battery and returns its report. An error is a check that
// could not be made at all (no temporary directory); what the tool does
// wrong is in the report.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.StartTimeout <= 0 {
		o.StartTimeout = 10 * time.Minute
	}
	if o.StepTimeout <= 0 {
		o.StepTimeout = time.Minute
	}
	if o.ResyncWait <= 0 {
		o.ResyncWait = 5 * time.Second
	}
	if o.InitTimeout <= 0 {
		o.InitTimeout = 10 * time.Minute
	}
	if o.KillGrace <= 0 {
		o.KillGrace = 3 * time.Second
	}
	if o.Kind == "" {
		o.Kind = protocol.KindTcl
	}
	drv := o.Driver
	if drv == nil && o.Kind != protocol.KindTcl && o.Kind != protocol.KindSh {
		d, ok := runner.Preset(string(o.Kind))
		if !ok {
			return nil, fmt.Errorf("unknown kind %q (want tcl, sh, %s, or --driver FILE)", o.Kind, strings.Join(runner.Presets(), ", "))
		}
		drv = d
	}
	if drv != nil {
		o.Kind = protocol.Kind(drv.Kind)
	}
	base, err := os.MkdirTemp(o.TempDir, "runner-check-")
	if err != nil {
		return nil, err
	}
	files := filepath.Join(base, "files")
	if err := os.Mkdir(files, 0o700); err != nil {
		return nil, err
	}
	l, err := langFor(o.Kind, drv, files)
	if err != nil {
		return nil, err
	}
	tool := o.Tool
	if len(tool) == 0 {
		switch {
		case drv != nil:
			tool = drv.Argv
		case o.Kind == protocol.KindSh:
			tool = []string{"bash", "--noprofile", "--norc", "-i"}
		default:
			tool = []string{"tclsh"}
		}
	}
	rep := &Report{Tool: tool, Kind: string(o.Kind), Driver: o.DriverFile, Init: o.Init}
	c := &checker{o: o, l: l, drv: drv, rep: rep, base: base, files: files}
	c.run(ctx)
	rep.OK = true
	for _, ch := range rep.Checks {
		if ch.Status == Fails {
			rep.OK = false
		}
	}
	rep.Recommend = c.recommend()
	if rep.OK && !o.Keep {
		_ = os.RemoveAll(base)
	} else {
		rep.Session = filepath.Join(base, "sess")
	}
	return rep, nil
}

// gaveUpRE is the runner's preamble to why it gave up.
var gaveUpRE = regexp.MustCompile(`^the runner gave up: gave up after .*?\(--max-restarts -?[0-9]+\): `)

// checker runs one battery.
type checker struct {
	o     Options
	l     *lang
	drv   *runner.DriverSpec
	rep   *Report
	base  string
	files string

	sess    *master.Session
	stop    func(force bool) error // stops the runner; nil once stopped
	done    chan error             // the runner's Run returned
	started time.Duration          // the start-up's length
	ownInit string                 // the check's own --init script ("" if none)
	// initTrouble says why the check's own --init made the start fail
	// (the tool was then checked without it).
	initTrouble string
	cancelHow   string // what the cancel did: "kept", "died", "terminated"
}

func (c *checker) add(ch Check) {
	ch.Title = title(ch.Name)
	if why, ok := c.l.notApplicable[ch.Name]; ok && ch.Status == "" {
		ch.Status, ch.Detail = NotApplicable, why
	}
	c.rep.Checks = append(c.rep.Checks, ch)
}

func (c *checker) run(ctx context.Context) {
	var inits []string
	if c.l.ownInit != "" {
		c.ownInit = filepath.Join(c.files, "check_init"+c.l.ownInitExt)
		if err := os.WriteFile(c.ownInit, []byte(c.l.ownInit), 0o644); err != nil {
			c.add(Check{Name: "start", Status: Fails, Detail: err.Error()})
			c.notRun("the check could not write its --init script")
			return
		}
		inits = append(append(inits, c.o.Init...), c.ownInit)
	}
	start := c.start(ctx, inits)
	if start.Status != Holds && c.ownInit != "" && strings.Contains(start.Detail, c.ownInit) {
		// The check's own --init failed: say so in the restart row, and
		// check the rest without it.
		c.initTrouble = gaveUpRE.ReplaceAllString(start.Detail, "")
		c.ownInit = ""
		if err := os.RemoveAll(filepath.Join(c.base, "sess")); err == nil {
			start = c.start(ctx, c.o.Init)
		}
	}
	c.add(start)
	if start.Status != Holds {
		c.notRun("the tool did not start")
		return
	}
	defer c.shutdown()
	c.exact("output", c.l.output, c.l.outputWant)
	c.checkValue()
	c.checkError()
	c.checkBig()
	c.exact("utf8", c.l.utf8, c.l.utf8Want)
	c.exact("no_newline", c.l.noNL, c.l.noNLWant)
	c.checkCancel()
	c.checkSend()
	c.checkRestart()
	c.checkStop()
}

func (c *checker) notRun(why string) {
	for _, t := range Titles[len(c.rep.Checks):] {
		c.add(Check{Name: t.Name, Status: NotRun, Detail: why})
	}
}

// start starts a runner on a new session with inits, and waits until it
// serves or gives up.
func (c *checker) start(ctx context.Context, inits []string) Check {
	dir := filepath.Join(c.base, "sess")
	logf, err := os.OpenFile(filepath.Join(c.base, "runner.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return Check{Name: "start", Status: Fails, Detail: err.Error()}
	}
	cfg := runner.Config{Session: dir, Kind: c.o.Kind, Driver: c.drv, Tool: c.rep.Tool, Init: inits,
		Heartbeat: 250 * time.Millisecond, StartTimeout: c.o.StartTimeout, ResyncWait: c.o.ResyncWait, KillGrace: c.o.KillGrace,
		InitTimeout: c.o.InitTimeout,
		// No retry of a failed start: the check reports the first.
		MaxRestarts: -1,
		Logger:      slog.New(slog.NewTextHandler(logf, nil))}
	r, err := runner.Open(cfg)
	if err != nil {
		logf.Close()
		return Check{Name: "start", Status: Fails, Detail: err.Error()}
	}
	sigs := make(chan os.Signal, 2)
	done := make(chan error, 1)
	began := time.Now()
	go func() {
		err := r.Run(context.Background(), sigs)
		logf.Close()
		done <- err
	}()
	c.done = done
	c.stop = func(force bool) error {
		sigs <- syscall.SIGTERM
		if force {
			sigs <- syscall.SIGTERM
		}
		return nil
	}
	s, err := master.Open(dir)
	if err != nil {
		return Check{Name: "start", Status: Fails, Detail: err.Error()}
	}
	c.sess = s
	bound := time.After(c.o.StartTimeout + time.Duration(len(inits))*c.o.InitTimeout + time.Minute)
	for {
		st, err := s.ReadState()
		if err == nil && st.Phase == protocol.PhaseIdle {
			c.started = time.Since(began)
			return Check{Name: "start", Status: Holds, TookMS: c.started.Milliseconds(), Detail: c.startDetail()}
		}
		select {
		case err := <-done:
			c.stop, c.done = nil, nil
			st, _ := s.ReadState()
			why := st.Reason
			if why == "" && err != nil {
				why = err.Error()
			}
			return Check{Name: "start", Status: Fails, TookMS: time.Since(began).Milliseconds(), Detail: "the runner gave up: " + why}
		case <-bound:
			c.shutdown()
			return Check{Name: "start", Status: Fails, Detail: fmt.Sprintf("not ready within --start-timeout %s", c.o.StartTimeout)}
		case <-ctx.Done():
			c.shutdown()
			return Check{Name: "start", Status: Fails, Detail: "interrupted"}
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// startDetail says what the tool printed before it first answered the
// runner: how many lines, and the last of them.
func (c *checker) startDetail() string {
	b, _ := os.ReadFile(filepath.Join(c.sess.Dir(), protocol.FileSpool))
	if i := bytes.Index(bytes.ToUpper(b), []byte("__SP")); i >= 0 {
		b = b[:i]
	}
	lines := nonEmptyLines(string(b))
	switch len(lines) {
	case 0:
		return "ready; the tool printed nothing before it answered"
	case 1:
		return fmt.Sprintf("ready; the tool printed 1 line before it answered: %s", quote(lines[0]))
	}
	return fmt.Sprintf("ready; the tool printed %d lines before it answered, the last: %s", len(lines), quote(lines[len(lines)-1]))
}

// shutdown stops the runner if it still runs: graceful, then forced.
func (c *checker) shutdown() {
	if c.stop == nil {
		return
	}
	_ = c.stop(false)
	select {
	case <-c.done:
	case <-time.After(c.o.KillGrace + 30*time.Second):
		_ = c.stop(true)
		<-c.done
	}
	c.stop = nil
}

// submit runs payload, bounded by the step timeout, and returns its
// result and output; err is what kept it from ending at all.
func (c *checker) submit(payload string, opts master.SubmitOptions) (*master.Command, *protocol.Result, string, error) {
	if opts.Timeout == 0 {
		opts.Timeout = c.o.StepTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), opts.Timeout+c.o.ResyncWait+c.o.KillGrace+30*time.Second)
	defer cancel()
	cmd, err := c.sess.Submit(ctx, payload, opts)
	if err != nil {
		return nil, nil, "", err
	}
	res, out, err := c.wait(ctx, cmd)
	return cmd, res, out, err
}

func (c *checker) wait(ctx context.Context, cmd *master.Command) (*protocol.Result, string, error) {
	res, err := cmd.Wait(ctx, master.WaitOptions{})
	if res == nil {
		return nil, "", err
	}
	out := ""
	if res.OutputPath != "" {
		b, err := cmd.Output(0, -1)
		if err != nil {
			return res, "", err
		}
		out = string(b)
	}
	return res, out, nil
}

// ended says why a command did not end as a command that ran to its end:
// a timeout (the runner never found its end), the tool's exit.
func (c *checker) ended(res *protocol.Result, out string) string {
	msg := ""
	if res.Error != nil {
		msg = res.Error.Message
	}
	switch {
	case res.Status == protocol.StatusTimeout:
		return fmt.Sprintf("the command did not end within %s (the runner never found its end); it printed %s", c.o.StepTimeout, quote(out))
	case res.ExitReason == protocol.ReasonToolExit || res.ExitReason == protocol.ReasonToolDied:
		return fmt.Sprintf("%s; it printed %s", msg, quote(out))
	case msg != "":
		return fmt.Sprintf("%s (%s); it printed %s", res.Status, msg, quote(out))
	}
	return fmt.Sprintf("%s; it printed %s", res.Status, quote(out))
}

// exact: the payload's output is exactly want.
func (c *checker) exact(name, payload, want string) {
	if payload == "" {
		c.add(Check{Name: name})
		return
	}
	_, res, out, err := c.submit(payload, master.SubmitOptions{})
	switch {
	case err != nil:
		c.add(Check{Name: name, Status: Fails, Detail: err.Error()})
	case res.Status != protocol.StatusOK:
		c.add(Check{Name: name, Status: Fails, Detail: c.ended(res, out)})
	case out != want:
		c.add(Check{Name: name, Status: Fails, Detail: fmt.Sprintf("printed %s, want %s", quote(out), quote(want))})
	default:
		c.add(Check{Name: name, Status: Holds, Detail: quote(out)})
	}
}

func (c *checker) checkValue() {
	if c.l.value == "" {
		c.add(Check{Name: "value"})
		return
	}
	_, res, out, err := c.submit(c.l.value, master.SubmitOptions{})
	switch {
	case err != nil:
		c.add(Check{Name: "value", Status: Fails, Detail: err.Error()})
	case res.Status != protocol.StatusOK:
		c.add(Check{Name: "value", Status: Fails, Detail: c.ended(res, out)})
	case res.Value == nil || *res.Value != c.l.valueWant:
		c.add(Check{Name: "value", Status: Fails, Detail: fmt.Sprintf("value %s, want %q", valueOf(res), c.l.valueWant)})
	default:
		c.add(Check{Name: "value", Status: Holds, Detail: fmt.Sprintf("%q", *res.Value)})
	}
}

func valueOf(res *protocol.Result) string {
	if res.Value == nil {
		return "none"
	}
	return quote(*res.Value)
}

func (c *checker) checkError() {
	if c.l.errPayload == "" {
		c.add(Check{Name: "error"})
		return
	}
	_, res, out, err := c.submit(c.l.errPayload, master.SubmitOptions{})
	switch {
	case err != nil:
		c.add(Check{Name: "error", Status: Fails, Detail: err.Error()})
	case res.Status != protocol.StatusError || res.ExitReason == protocol.ReasonToolExit || res.ExitReason == protocol.ReasonToolDied:
		c.add(Check{Name: "error", Status: Fails, Detail: "a failing command ended " + c.ended(res, out)})
	case res.Error == nil || !strings.Contains(res.Error.Message, c.l.errMsg):
		c.add(Check{Name: "error", Status: Fails, Detail: fmt.Sprintf("error %s, want one naming %q", quote(errMessage(res)), c.l.errMsg)})
	case strings.Contains(out, "after"):
		c.add(Check{Name: "error", Status: Fails, Detail: "the command went on after its error: " + quote(out)})
	default:
		c.add(Check{Name: "error", Status: Holds, Detail: "error " + quote(errMessage(res))})
	}
}

func errMessage(res *protocol.Result) string {
	if res.Error == nil {
		return ""
	}
	return res.Error.Message
}

func (c *checker) checkBig() {
	if c.l.big == "" {
		c.add(Check{Name: "big_error"})
		return
	}
	_, res, out, err := c.submit(c.l.big, master.SubmitOptions{})
	if err != nil {
		c.add(Check{Name: "big_error", Status: Fails, Detail: err.Error()})
		return
	}
	var missing, ran []string
	for _, l := range c.l.bigBefore {
		if !strings.Contains(out, l+"\n") {
			missing = append(missing, l)
		}
	}
	for _, l := range c.l.bigAfter {
		if strings.Contains(out, l+"\n") {
			ran = append(ran, l)
		}
	}
	size := fmt.Sprintf("%d bytes", len(c.l.big))
	switch {
	case res.Status != protocol.StatusError || res.ExitReason == protocol.ReasonToolExit || res.ExitReason == protocol.ReasonToolDied:
		c.add(Check{Name: "big_error", Status: Fails, Detail: fmt.Sprintf("%s with an error at line %d ended %s", size, c.l.bigErrAt, c.ended(res, cut(out)))})
	case res.Error == nil || !strings.Contains(res.Error.Message, c.l.bigMsg):
		c.add(Check{Name: "big_error", Status: Fails, Detail: fmt.Sprintf("%s: error %s, want the payload's own (%q)", size, quote(errMessage(res)), c.l.bigMsg)})
	case len(ran) > 0:
		c.add(Check{Name: "big_error", Status: Fails, Detail: fmt.Sprintf("%s: %d lines after the error ran (%q...)", size, len(ran), ran[0])})
	case len(missing) > 0:
		c.add(Check{Name: "big_error", Status: Fails, Detail: fmt.Sprintf("%s: %d lines before the error are not in the output (%q...)", size, len(missing), missing[0])})
	default:
		c.add(Check{Name: "big_error", Status: Holds, Detail: fmt.Sprintf("%s: stopped at line %d, error %s", size, c.l.bigErrAt, quote(errMessage(res)))})
	}
}

// state says whether the state the battery set is still in the tool.
func (c *checker) state(payload, want string) (bool, error) {
	_, res, out, err := c.submit(payload, master.SubmitOptions{})
	if err != nil {
		return false, err
	}
	if c.l.byValue {
		return res.Value != nil && *res.Value == want, nil
	}
	return strings.TrimSpace(out) == want, nil
}

// waitPrinted submits payload and waits until it has printed text.
func (c *checker) waitPrinted(payload, text string, opts master.SubmitOptions) (*master.Command, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.o.StepTimeout)
	defer cancel()
	cmd, err := c.sess.Submit(ctx, payload, opts)
	if err != nil {
		return nil, err
	}
	for {
		if b, err := cmd.Output(0, -1); err == nil && bytes.Contains(b, []byte(text)) {
			return cmd, nil
		}
		if res, err := cmd.Result(); err == nil && res != nil {
			return cmd, fmt.Errorf("it ended %s before it printed %q", res.Status, text)
		}
		select {
		case <-ctx.Done():
			return cmd, fmt.Errorf("it did not print %q within %s", text, c.o.StepTimeout)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (c *checker) checkCancel() {
	if c.l.long == "" {
		c.add(Check{Name: "cancel"})
		return
	}
	fail := func(format string, args ...any) {
		c.add(Check{Name: "cancel", Status: Fails, Detail: fmt.Sprintf(format, args...)})
	}
	if _, res, out, err := c.submit(c.l.setState, master.SubmitOptions{}); err != nil || res.Status != protocol.StatusOK {
		if err != nil {
			fail("setting a variable first: %v", err)
		} else {
			fail("setting a variable first: %s", c.ended(res, out))
		}
		return
	}
	cmd, err := c.waitPrinted(c.l.long, c.l.longStarted, master.SubmitOptions{})
	if err != nil {
		fail("a long command: %v", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.o.StepTimeout+c.o.ResyncWait+c.o.KillGrace+30*time.Second)
	defer cancel()
	t0 := time.Now()
	if _, err := c.sess.Cancel(ctx, cmd.ID); err != nil {
		fail("cancel request: %v", err)
		return
	}
	res, out, err := c.wait(ctx, cmd)
	took := time.Since(t0)
	if err != nil {
		fail("%v", err)
		return
	}
	if res.Status != protocol.StatusCancelled {
		fail("a cancelled command ended %s", c.ended(res, out))
		return
	}
	kept, err := c.state(c.l.getState, c.l.stateWant)
	if err != nil {
		fail("after the cancel: %v", err)
		return
	}
	restarted := res.ToolRestarted
	ch := Check{Name: "cancel", Status: Holds, TookMS: took.Milliseconds(), KeptState: &kept, ToolRestarted: &restarted}
	after := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(out), c.l.longStarted))
	said := ""
	if after != "" {
		said = " (it printed " + quote(after) + ")"
	}
	switch {
	case !restarted && kept:
		c.cancelHow = "kept"
		ch.Detail = "Ctrl-C: the tool returned to its prompt and kept its state" + said
	case !restarted:
		ch.Status = Fails
		ch.Detail = "Ctrl-C: the tool was not restarted, yet a variable set before the cancel is gone" + said
	case res.Signal == "SIGINT":
		c.cancelHow = "died"
		ch.Detail = "Ctrl-C: the tool died of it and was restarted; its state is gone" + c.initsAgain() + said
	default:
		c.cancelHow = "terminated"
		ch.Detail = fmt.Sprintf("Ctrl-C did not bring the tool back to its prompt within --resync-wait (%s)%s: it was terminated (%s) and restarted; its state is gone%s",
			c.o.ResyncWait, said, res.Signal, c.initsAgain())
	}
	if kept && restarted {
		ch.Status = Fails
		ch.Detail = "the tool was restarted, yet a variable set before the cancel is still there"
	}
	c.add(ch)
}

func (c *checker) checkSend() {
	if c.l.read == "" {
		c.add(Check{Name: "send"})
		return
	}
	fail := func(format string, args ...any) {
		c.add(Check{Name: "send", Status: Fails, Detail: fmt.Sprintf(format, args...)})
	}
	cmd, err := c.waitPrinted(c.l.read, "name? ", master.SubmitOptions{})
	if err != nil {
		fail("a command that asks: %v", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.o.StepTimeout+c.o.ResyncWait+c.o.KillGrace+30*time.Second)
	defer cancel()
	if _, err := c.sess.Send(ctx, cmd.ID, []byte(readText+"\n"), master.SendOptions{Expect: `name\? $`, ExpectTimeout: c.o.StepTimeout}); err != nil {
		_, _ = c.sess.Cancel(ctx, cmd.ID)
		_, out, _ := c.wait(ctx, cmd)
		fail("%v; the command printed %s", err, quote(out))
		return
	}
	res, out, err := c.wait(ctx, cmd)
	switch {
	case err != nil:
		fail("%v", err)
	case res.Status != protocol.StatusOK:
		fail("the command that read ended %s", c.ended(res, out))
	case !strings.Contains(out, c.l.readWant):
		fail("it printed %s, want %s", quote(out), quote(c.l.readWant))
	default:
		c.add(Check{Name: "send", Status: Holds, Detail: "read " + quote(readText) + " as typed"})
	}
}

// checkRestart kills the tool (SIGKILL) while a command runs: the command
// ends tool_died, the runner starts the tool again and runs every --init
// again before the next command.
func (c *checker) checkRestart() {
	fail := func(format string, args ...any) {
		c.add(Check{Name: "restart", Status: Fails, Detail: fmt.Sprintf(format, args...)})
	}
	// A driver the check does not know has no long command: its tool is
	// killed at its prompt.
	long, started := c.l.long, c.l.longStarted
	if c.ownInit != "" {
		ran, err := c.state(c.l.initSeen, c.l.initWant)
		switch {
		case err != nil:
			fail("asking whether the check's --init ran: %v", err)
			return
		case !ran:
			fail("the check's --init did not take effect at the first start: --init scripts do not run on this tool")
			return
		}
	}
	st, err := c.sess.ReadState()
	if err != nil {
		fail("%v", err)
		return
	}
	var cmd *master.Command
	if long != "" {
		if cmd, err = c.waitPrinted(long, started, master.SubmitOptions{}); err != nil {
			fail("a long command: %v", err)
			return
		}
		if st, err = c.sess.ReadState(); err != nil {
			fail("%v", err)
			return
		}
	}
	if st.ToolPID <= 1 {
		fail("state.json names no tool pid")
		return
	}
	t0 := time.Now()
	if err := syscall.Kill(st.ToolPID, syscall.SIGKILL); err != nil {
		fail("kill %d: %v", st.ToolPID, err)
		return
	}
	detail := "killed (SIGKILL) at its prompt"
	if cmd != nil {
		ctx, cancel := context.WithTimeout(context.Background(), c.o.StepTimeout)
		res, out, err := c.wait(ctx, cmd)
		cancel()
		switch {
		case err != nil:
			fail("the command the kill ended: %v", err)
			return
		case res.ExitReason != protocol.ReasonToolDied || !res.ToolRestarted:
			fail("the command the kill ended: %s", c.ended(res, out))
			return
		}
		detail = "killed (SIGKILL) while a command ran: it ended tool_died"
	}
	// The next command waits for the restarted tool.
	if c.ownInit != "" {
		ran, err := c.state(c.l.initSeen, c.l.initWant)
		switch {
		case err != nil:
			fail("%s; after it: %v", detail, err)
			return
		case !ran:
			fail("%s; the restarted tool did not run the check's --init again", detail)
			return
		}
	} else if _, res, out, err := c.submit(c.l.output, master.SubmitOptions{}); err != nil || res.Status != protocol.StatusOK {
		if err != nil {
			fail("%s; after it: %v", detail, err)
		} else {
			fail("%s; after it a command ended %s", detail, c.ended(res, out))
		}
		return
	}
	took := time.Since(t0)
	now, err := c.sess.ReadState()
	if err != nil || now.ToolStarts != st.ToolStarts+1 {
		fail("%s; tool_starts %d, want %d", detail, now.ToolStarts, st.ToolStarts+1)
		return
	}
	if c.initTrouble != "" {
		fail("%s; restarted, but the check's own --init failed at start: %s", detail, c.initTrouble)
		return
	}
	inits := "the check's --init ran again"
	switch n := len(c.o.Init); {
	case c.ownInit == "":
		inits = "it serves again (the check has no --init of its own in this tool's language)"
	case n > 0:
		inits = fmt.Sprintf("your %d --init script%s and the check's ran again", n, plural(n))
	}
	c.add(Check{Name: "restart", Status: Holds, TookMS: took.Milliseconds(), Detail: detail + "; restarted, " + inits})
}

func (c *checker) checkStop() {
	if c.stop == nil {
		c.add(Check{Name: "stop", Status: Fails, Detail: "the runner had already stopped"})
		return
	}
	st, _ := c.sess.ReadState()
	ctx, cancel := context.WithTimeout(context.Background(), c.o.KillGrace+30*time.Second)
	defer cancel()
	t0 := time.Now()
	p, err := c.sess.Stop(ctx, protocol.StopGraceful)
	if err == nil {
		_, err = p.Wait(ctx)
	}
	var runErr error
	select {
	case runErr = <-c.done:
		c.stop = nil
	case <-ctx.Done():
		c.add(Check{Name: "stop", Status: Fails, Detail: fmt.Sprintf("the runner did not stop within %s (%v)", c.o.KillGrace+30*time.Second, err)})
		return
	}
	took := time.Since(t0)
	switch {
	case runErr != nil:
		c.add(Check{Name: "stop", Status: Fails, Detail: runErr.Error()})
	case st.ToolPID > 1 && syscall.Kill(st.ToolPID, 0) == nil:
		c.add(Check{Name: "stop", Status: Fails, Detail: fmt.Sprintf("the tool (pid %d) outlived the runner", st.ToolPID)})
	default:
		c.add(Check{Name: "stop", Status: Holds, TookMS: took.Milliseconds(), Detail: "the runner stopped, and the tool with it"})
	}
}

// shortDuration is d as a flag takes it, without zero seconds: 4m, 1h30m.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	return strings.TrimSuffix(s, "h0m")
}

// initsAgain is ", --init ran again" when a restart runs any.
func (c *checker) initsAgain() string {
	if c.ownInit == "" && len(c.o.Init) == 0 {
		return ""
	}
	return ", --init ran again"
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// recommend says how to run the runner on the tool, from what the battery
// found.
func (c *checker) recommend() Recommendation {
	r := Recommendation{Command: []string{"runner", "--session", "DIR"}}
	switch {
	case c.o.DriverFile != "":
		r.Command = append(r.Command, "--driver", c.o.DriverFile)
	case c.o.Kind != protocol.KindTcl:
		r.Command = append(r.Command, "--kind", string(c.o.Kind))
	}
	for _, i := range c.o.Init {
		r.Command = append(r.Command, "--init", i)
	}
	const defStart = time.Minute
	r.StartTimeout, r.StartWhy = "1m", "the default"
	switch start := c.rep.Checks[0]; {
	case start.Status != Holds && strings.Contains(start.Detail, "--start-timeout"):
		r.StartTimeout, r.StartWhy = shortDuration(2*c.o.StartTimeout), "the tool was not ready within the check's bound: give it more, or see why in the check's session"
		r.Command = append(r.Command, "--start-timeout", r.StartTimeout)
	case start.Status != Holds:
		r.StartWhy = "the tool did not start: see the start-up row"
	case c.started > defStart/2:
		d := (2 * c.started).Round(time.Minute)
		if d < 2*c.started {
			d += time.Minute
		}
		r.StartTimeout = shortDuration(d)
		r.StartWhy = fmt.Sprintf("the start-up took %s here; a licence queue or a loaded host takes longer", FormatDuration(c.started))
		r.Command = append(r.Command, "--start-timeout", r.StartTimeout)
	default:
		r.StartWhy = fmt.Sprintf("the default is enough: the start-up took %s", FormatDuration(c.started))
	}
	r.Command = append(append(r.Command, "--"), c.rep.Tool...)
	switch c.cancelHow {
	case "kept":
		r.CancelPolicy, r.CancelWhy = "ctrl_c", "the default: Ctrl-C brings the tool back to its prompt with its state"
	case "died":
		r.CancelPolicy, r.CancelWhy = "ctrl_c", "the default: the tool dies of Ctrl-C, so a cancel restarts it (its state is lost, --init runs again)"
	case "terminated":
		r.CancelPolicy = "terminate_tool"
		r.CancelWhy = fmt.Sprintf("Ctrl-C leaves the tool busy until --resync-wait (%s) ends it; terminate_tool ends it at once, with the same loss of state", c.o.ResyncWait)
	default:
		r.CancelPolicy, r.CancelWhy = "ctrl_c", "the default (the check could not tell what Ctrl-C does to this tool)"
	}
	if c.initTrouble != "" {
		r.Notes = append(r.Notes, "--init scripts fail on this tool today: "+c.initTrouble)
	}
	return r
}

// WriteJSON writes the report as one indented JSON document.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(r)
}

// nonEmptyLines splits s into its non-empty lines, control bytes removed.
func nonEmptyLines(s string) []string {
	var out []string
	for _, l := range strings.Split(strings.ReplaceAll(s, "\r", "\n"), "\n") {
		l = strings.Map(func(r rune) rune {
			if r < 0x20 && r != '\t' || r == 0x7f {
				return -1
			}
			return r
		}, l)
		if strings.TrimSpace(l) != "" {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return out
}

// quote quotes s for the table, cut to 160 bytes in its middle.
func quote(s string) string {
	return fmt.Sprintf("%q", cut(s))
}

func cut(s string) string {
	const max = 160
	if len(s) <= max {
		return s
	}
	head, tail := s[:max/2], s[len(s)-max/2:]
	return strings.ToValidUTF8(head, "") + fmt.Sprintf(" ... (%d bytes) ... ", len(s)) + strings.ToValidUTF8(tail, "")
}

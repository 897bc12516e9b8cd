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
	"sync"
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
// Compiled when first needed: this package is linked into the runner,
// whose start it would slow (issue 44, goal 3).
var gaveUpRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^the runner gave up: gave up after .*?\(--max-restarts -?[0-9]+\): `)
})

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
		c.initTrouble = gaveUpRE().ReplaceAllString(start.Detail, "")
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

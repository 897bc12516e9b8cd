package master

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
)

const cliUsage = `usage: master COMMAND --session DIR [flags] [args]

Commands:
  submit [--timeout DUR] [--cancel-policy P] [--id ID] [--kind K] [--wait] [--wait-timeout DUR] [--json] [PAYLOAD | -f FILE | -]
          queue a command (no payload: read stdin); prints its cmd_id, or with
          --wait streams its output and exits with its status
  wait    [--wait-timeout DUR] [--json] CMD_ID    wait for a result; print the output
  result  CMD_ID                                  print the result JSON (exit 5 style codes)
  output  [--offset N] [--length N] CMD_ID        print a command's output (a byte range)
  cancel  [CMD_ID]                                cancel CMD_ID, or the running command
  stop    [--force] [--wait] [--wait-timeout DUR] stop the runner (graceful by default);
          on a launched session: stop request, then after --grace (30s) the
          scheduler's cancel, then its kill, until the job is gone
  status  [--json]                                phase, current command, queue, liveness
  lease   --ttl DUR [--keep]                      write the lease (and keep renewing it)
  tail    [-f] [--from CURSOR]                    print log/session.out from a byte cursor
  ready   [--wait-timeout DUR]                    wait until a runner serves the session (idle or busy)
  waitfor [--from CURSOR] [--wait-timeout DUR] [--json] REGEXP   wait for output in the spool
` + reportUsage + standinUsage + farmUsage + `
Exit codes: 0 ok, 1 command failed, 2 usage, 3 timeout, 4 cancelled,
5 session missing or runner not alive, 10 I/O or internal error.
With --json, stdout holds only JSON (with protocol_version); errors are
{"error":{"code","message"}}; diagnostics go to stderr.
`

type cli struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	json           bool
}

// Main runs the master command line and returns its exit code.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := &cli{stdin: stdin, stdout: stdout, stderr: stderr}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, cliUsage, subcommandUsage())
		if len(args) == 0 {
			return ExitUsage
		}
		return ExitOK
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if sc, ok := lookupSubcommand(args[0]); ok { // See RegisterSubcommand.
		return sc.run(ctx, args[1:], stdin, stdout, stderr)
	}
	err := c.run(ctx, args[0], args[1:])
	if err == nil {
		return ExitOK
	}
	return c.fail(err)
}

// fail reports err once: as JSON on stdout with --json, always on stderr.
func (c *cli) fail(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return ExitOK
	}
	code, exit := Classify(err)
	var eo exitOnly
	if errors.As(err, &eo) {
		return exit
	}
	var re *ResultError
	if errors.As(err, &re) {
		if c.json {
			c.printJSON(re.Result)
		}
		fmt.Fprintf(c.stderr, "master: %s\n", strings.TrimPrefix(err.Error(), "master: "))
		return exit
	}
	if c.json {
		c.printJSON(map[string]any{"protocol_version": protocol.Version, "error": map[string]string{"code": code, "message": err.Error()}})
	}
	fmt.Fprintf(c.stderr, "master: %s\n", strings.TrimPrefix(err.Error(), "master: "))
	return exit
}

func (c *cli) printJSON(v any) {
	enc := json.NewEncoder(c.stdout)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v) // Writing to stdout; nothing better to do on failure.
}

func (c *cli) flags(name string) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet("master "+name, flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	session := fs.String("session", os.Getenv("SP_SESSION_DIR"), "session directory (default $SP_SESSION_DIR)")
	fs.BoolVar(&c.json, "json", false, "print JSON only on stdout")
	return fs, session
}

func (c *cli) parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageErr("%v", err)
	}
	return nil
}

func (c *cli) open(dir string) (*Session, error) {
	if dir == "" {
		return nil, usageErr("--session is required")
	}
	return Open(dir)
}

func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}

func (c *cli) run(ctx context.Context, cmd string, args []string) error {
	switch cmd {
	case "submit":
		return c.submit(ctx, args)
	case "wait":
		return c.wait(ctx, args)
	case "result":
		return c.result(args)
	case "output":
		return c.output(args)
	case "cancel":
		return c.cancel(ctx, args)
	case "stop":
		if handled, err := c.stopLaunched(ctx, args); handled { // launch_cli.go
			return err
		}
		return c.stop(ctx, args)
	case "launch":
		return c.launch(ctx, args)
	case "pool":
		return c.pool(ctx, args)
	case "status":
		return c.status(ctx, args)
	case "lease":
		return c.lease(ctx, args)
	case "tail":
		return c.tail(ctx, args)
	case "waitfor":
		return c.waitfor(ctx, args)
	case "ready":
		return c.ready(ctx, args)
	case "report":
		return c.report(args)
	case "standin":
		return c.standin(args)
	case "diff":
		return c.diff(args)
	}
	fmt.Fprint(c.stderr, cliUsage)
	return usageErr("unknown command %q", cmd)
}

func (c *cli) submit(ctx context.Context, args []string) error {
	fs, dir := c.flags("submit")
	timeout := fs.Duration("timeout", 0, "command timeout (timeout_s); 0: the runner's default")
	policy := fs.String("cancel-policy", "", "ctrl_c, terminate_tool or terminate_session")
	id := fs.String("id", "", "cmd_id (default: a new UUIDv7)")
	kind := fs.String("kind", "tcl", "tcl or sh")
	file := fs.String("f", "", "read the payload from FILE ('-': stdin)")
	wait := fs.Bool("wait", false, "wait for the result, stream the output, exit with the command's status")
	waitTimeout := fs.Duration("wait-timeout", 0, "with --wait, how long to wait (0: forever); exit 3 when exceeded")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	payload, err := c.payload(fs.Args(), *file)
	if err != nil {
		return err
	}
	s, err := c.open(*dir)
	if err != nil {
		return err
	}
	cmd, err := s.Submit(ctx, payload, SubmitOptions{Kind: protocol.Kind(*kind), Timeout: *timeout,
		CancelPolicy: protocol.CancelPolicy(*policy), CmdID: *id})
	if err != nil {
		return err
	}
	if !*wait {
		if c.json {
			c.printJSON(map[string]any{"protocol_version": protocol.Version, "cmd_id": cmd.ID, "seq": cmd.Seq, "file": protocol.DirQueue + "/" + cmd.Name})
		} else {
			fmt.Fprintln(c.stdout, cmd.ID)
		}
		return nil
	}
	return c.waitCmd(ctx, s, cmd, *waitTimeout)
}

func (c *cli) payload(args []string, file string) (string, error) {
	switch {
	case file == "-" || (file == "" && len(args) == 1 && args[0] == "-") || (file == "" && len(args) == 0):
		b, err := io.ReadAll(c.stdin)
		return string(b), err
	case file != "":
		if len(args) > 0 {
			return "", usageErr("give either -f FILE or a payload, not both")
		}
		b, err := os.ReadFile(file)
		return string(b), err
	case len(args) == 1:
		return args[0], nil
	}
	return "", usageErr("one payload argument expected (quote it), got %d", len(args))
}

// waitCmd streams output (unless --json), waits, and maps the status.
func (c *cli) waitCmd(ctx context.Context, s *Session, cmd *Command, timeout time.Duration) error {
	ctx, cancel := withTimeout(ctx, timeout)
	defer cancel()
	progress := c.progress(s, cmd)
	if !c.json {
		fctx, fcancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			t := time.NewTicker(5 * time.Second)
			defer t.Stop()
			for {
				select {
				case <-fctx.Done():
					return
				case <-t.C:
					progress()
				}
			}
		}()
		_, err := cmd.Follow(ctx, c.stdout, 0)
		fcancel()
		<-done
		if err != nil {
			return err
		}
	}
	res, err := cmd.Wait(ctx)
	if c.json && err == nil {
		c.printJSON(res)
	}
	return err
}

// progress reports a long wait on stderr when it is a terminal.
func (c *cli) progress(s *Session, cmd *Command) func() {
	f, ok := c.stderr.(*os.File)
	tty := false
	if ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	start := time.Now()
	return func() {
		if !tty {
			return
		}
		st, err := s.Status(context.Background())
		if err != nil {
			return
		}
		where := "queued"
		if st.CurrentCmdID == cmd.ID {
			where = fmt.Sprintf("running for %v, %d bytes of output", st.CurrentElapsed.Round(time.Second), st.CurrentOutBytes)
		}
		fmt.Fprintf(c.stderr, "master: waiting %v for %s: %s (runner %s)\n", time.Since(start).Round(time.Second), cmd.ID, where, st.Phase)
	}
}

func (c *cli) wait(ctx context.Context, args []string) error {
	fs, dir := c.flags("wait")
	timeout := fs.Duration("wait-timeout", 0, "how long to wait (0: forever); exit 3 when exceeded")
	fs.DurationVar(timeout, "timeout", 0, "same as --wait-timeout")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	s, cmd, err := c.lookup(*dir, fs.Args())
	if err != nil {
		return err
	}
	return c.waitCmd(ctx, s, cmd, *timeout)
}

func (c *cli) lookup(dir string, args []string) (*Session, *Command, error) {
	if len(args) != 1 {
		return nil, nil, usageErr("one CMD_ID expected")
	}
	s, err := c.open(dir)
	if err != nil {
		return nil, nil, err
	}
	cmd, err := s.Command(args[0])
	return s, cmd, err
}

func (c *cli) result(args []string) error {
	fs, dir := c.flags("result")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	_, cmd, err := c.lookup(*dir, fs.Args())
	if err != nil {
		return err
	}
	res, err := cmd.Result()
	if err != nil {
		return err
	}
	if res == nil {
		return fmt.Errorf("no result yet for %s: %w", cmd.ID, ErrWaitTimeout)
	}
	c.printJSON(res)
	if res.Status != protocol.StatusOK {
		c.json = false // Already printed.
		_, exit := Classify(&ResultError{Result: res})
		return exitOnly(exit)
	}
	return nil
}

// exitOnly carries an exit code for an outcome already reported.
type exitOnly int

func (e exitOnly) Error() string { return fmt.Sprintf("exit %d", int(e)) }

func (c *cli) output(args []string) error {
	fs, dir := c.flags("output")
	off := fs.Int64("offset", 0, "first byte")
	n := fs.Int64("length", 0, "bytes to print (0: to the end)")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	_, cmd, err := c.lookup(*dir, fs.Args())
	if err != nil {
		return err
	}
	b, err := cmd.Output(*off, *n)
	if err != nil {
		return err
	}
	_, err = c.stdout.Write(b)
	return err
}

func (c *cli) cancel(ctx context.Context, args []string) error {
	fs, dir := c.flags("cancel")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	s, err := c.open(*dir)
	if err != nil {
		return err
	}
	var rep *protocol.ControlReply
	switch len(fs.Args()) {
	case 0:
		rep, err = s.CancelCurrent(ctx)
	case 1:
		rep, err = s.Cancel(ctx, fs.Arg(0))
	default:
		return usageErr("at most one CMD_ID")
	}
	if rep != nil {
		fmt.Fprintf(c.stderr, "master: %s\n", rep.Message)
	}
	return err
}

func (c *cli) stop(ctx context.Context, args []string) error {
	fs, dir := c.flags("stop")
	force := fs.Bool("force", false, "end the current command at once")
	wait := fs.Bool("wait", false, "wait until the runner has stopped")
	timeout := fs.Duration("wait-timeout", 0, "with --wait, how long to wait (0: forever)")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	s, err := c.open(*dir)
	if err != nil {
		return err
	}
	mode := protocol.StopGraceful
	if *force {
		mode = protocol.StopForce
	}
	ctx, cancel := withTimeout(ctx, *timeout)
	defer cancel()
	_, err = s.Stop(ctx, mode, *wait)
	return err
}

func (c *cli) status(ctx context.Context, args []string) error {
	fs, dir := c.flags("status")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	s, err := c.open(*dir)
	if err != nil {
		return err
	}
	st, err := s.Status(ctx)
	if err != nil {
		return err
	}
	st.Launch = launchStatus(ctx, s) // launch_stop.go: the scheduler's view, if launched
	if c.json {
		c.printJSON(st)
	} else {
		c.printStatus(st)
		c.printLaunch(st.Launch)
	}
	if !st.Alive {
		return exitOnly(ExitNoRunner)
	}
	return nil
}

func (c *cli) printStatus(st Status) {
	w := c.stdout
	alive := "alive"
	if !st.Alive {
		alive = "NOT ALIVE"
	}
	fmt.Fprintf(w, "runner:    %s (%s), pid %d on %s\n", alive, st.AliveReason, st.RunnerPID, st.RunnerHost)
	phase := string(st.Phase)
	if st.Reason != "" {
		phase += " (" + st.Reason + ")"
	}
	fmt.Fprintf(w, "phase:     %s\n", phase)
	if st.CurrentCmdID != "" {
		fmt.Fprintf(w, "running:   %s for %v, %d bytes of output so far\n", st.CurrentCmdID, st.CurrentElapsed, st.CurrentOutBytes)
	} else {
		fmt.Fprintf(w, "running:   nothing\n")
	}
	fmt.Fprintf(w, "queue:     %d waiting\n", st.QueueDepth)
	fmt.Fprintf(w, "done:      %d commands\n", st.CommandsDone)
	fmt.Fprintf(w, "heartbeat: #%d, written %v ago\n", st.HeartbeatCount, st.HeartbeatAge)
}

func (c *cli) lease(ctx context.Context, args []string) error {
	fs, dir := c.flags("lease")
	ttl := fs.Duration("ttl", 0, "lease time to live (required)")
	keep := fs.Bool("keep", false, "keep renewing every ttl/3 until interrupted")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if *ttl <= 0 {
		return usageErr("--ttl is required")
	}
	s, err := c.open(*dir)
	if err != nil {
		return err
	}
	if !*keep {
		return s.WriteLease("lease-"+NewCmdID(), *ttl)
	}
	for err := range s.KeepLease(ctx, *ttl) {
		fmt.Fprintf(c.stderr, "master: %s\n", strings.TrimPrefix(err.Error(), "master: "))
	}
	return nil
}

func (c *cli) tail(ctx context.Context, args []string) error {
	fs, dir := c.flags("tail")
	follow := fs.Bool("f", false, "keep printing new output until interrupted")
	from := fs.Int64("from", 0, "byte cursor to start at (negative: that many bytes before the end)")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	s, err := c.open(*dir)
	if err != nil {
		return err
	}
	if *from < 0 {
		size, _ := s.SpoolSize()
		*from = max(size+*from, 0)
	}
	cur, err := s.Tail(ctx, c.stdout, *from, *follow)
	fmt.Fprintf(c.stderr, "master: cursor %d\n", cur)
	return err
}

func (c *cli) waitfor(ctx context.Context, args []string) error {
	fs, dir := c.flags("waitfor")
	from := fs.Int64("from", 0, "byte cursor to start at")
	timeout := fs.Duration("wait-timeout", 0, "how long to wait (0: forever); exit 3 when exceeded")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErr("one REGEXP expected")
	}
	re, err := regexp.Compile(fs.Arg(0))
	if err != nil {
		return usageErr("%v", err)
	}
	s, err := c.open(*dir)
	if err != nil {
		return err
	}
	ctx, cancel := withTimeout(ctx, *timeout)
	defer cancel()
	m, err := s.WaitFor(ctx, re, *from)
	if c.json {
		c.printJSON(map[string]any{"protocol_version": protocol.Version, "matched": err == nil, "match": m.Text,
			"start": m.Start, "end": m.End, "resume_cursor": m.ResumeCursor})
		if err != nil {
			c.json = false
		}
	} else {
		fmt.Fprintf(c.stdout, "%d %s\n", m.ResumeCursor, strings.TrimSpace(m.Text))
	}
	return err
}

func (c *cli) ready(ctx context.Context, args []string) error {
	fs, dir := c.flags("ready")
	timeout := fs.Duration("wait-timeout", time.Minute, "how long to wait; exit 3 when exceeded")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if *dir == "" {
		return usageErr("--session is required")
	}
	ctx, cancel := withTimeout(ctx, *timeout)
	defer cancel()
	st, err := WaitReady(ctx, *dir)
	if c.json && err == nil {
		c.printJSON(st)
	}
	return err
}

package cli

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/skillpilot/skillpilot/internal/sessionio"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
)

func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}

// commandFlags defines the flags of a command's own options (the command
// file's fields) on every door that queues one, master submit and master
// pool submit: one table, so a pool door has every option a session door
// has (PROTOCOL.md 15.5, 4.13). The function returned gives them once the
// flags are parsed.
func commandFlags(cmd *command) func() master.SubmitOptions {
	var timeout time.Duration
	cmd.Duration(&timeout, "timeout", 0, "command timeout (timeout_s) in seconds or as a duration; 0: the runner's default")
	policy := cmd.String("cancel-policy", "", "ctrl_c (default), terminate_tool or terminate_session")
	id := cmd.String("id", "", "cmd_id (default: a new UUIDv7)")
	kind := cmd.String("kind", "", "tcl, sh or a driver's kind such as yosys (default: the session's kind from state.json, else tcl)")
	traceID := cmd.String("trace-id", "", "trace_id carried into the result, events, status and report (1-128 printable ASCII, no spaces)")
	labels := labelFlag{}
	cmd.Var(labels, "label", "`KEY=VALUE` carried with trace_id (repeatable, at most 16; KEY of [a-z0-9_])")
	maxOutput := cmd.Decimal64("max-output-bytes", 0, "the command's output budget in `BYTES`: past it the command is stopped by its cancel policy and its result says output_limit (0: the runner's --max-output-bytes)")
	return func() master.SubmitOptions {
		return master.SubmitOptions{Kind: protocol.Kind(*kind), Timeout: timeout, CancelPolicy: protocol.CancelPolicy(*policy),
			CmdID: *id, TraceID: *traceID, Labels: labels.orNil(), MaxOutputBytes: *maxOutput}
	}
}

func submitFlags(cmd *command) runFunc {
	var waitTimeout time.Duration
	options := commandFlags(cmd)
	file := cmd.String("f", "", "read the payload from `FILE` ('-': stdin)")
	wait := cmd.Bool("wait", false, "wait for the result, stream the output, exit with the command's status")
	cmd.Duration(&waitTimeout, "wait-timeout", 0, "with --wait, how long to wait (0: forever); exit 3 when exceeded")
	noValue := cmd.Bool("no-value", false, "with --wait, do not print the command's value after its output")
	cancelOnInt := cmd.Bool("cancel-on-interrupt", false, "with --wait, cancel the command when interrupted (Ctrl-C), then exit 130")
	return func(ctx context.Context, pos []string) error {
		c := cmd.c
		payload, err := c.payload(pos, *file)
		if err != nil {
			return err
		}
		s, err := cmd.open()
		if err != nil {
			return err
		}
		c.armed() // Before the command is queued: from here an interrupt says what became of it.
		command, err := s.Submit(ctx, payload, options())
		if err != nil {
			return err
		}
		if !*wait {
			if c.json {
				c.printJSON(map[string]any{"protocol_version": protocol.Version, "cmd_id": command.ID, "seq": command.Seq, "file": protocol.DirQueue + "/" + command.Name,
					"resume_cursor": command.ResumeCursor})
			} else {
				fmt.Fprintln(c.stdout, command.ID)
			}
			if why := s.NoRunnerHint(command.Seq); why != "" {
				c.diag("warning: no runner serves %s (%s); %s stays queued until one starts", s.Dir(), why, command.ID)
			}
			return nil
		}
		return c.waitCmd(ctx, s, command, waitTimeout, !*noValue, false, *cancelOnInt)
	}
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

// waitCmd streams output (unless --json), waits, prints the value (unless
// noValue) and maps the status to the exit code. With announce, a result
// that is already there is said to be so on stderr. Interrupted (SIGINT,
// SIGTERM), it says on stderr what becomes of the command, or with
// cancelOnInt cancels it first.
func (c *cli) waitCmd(ctx context.Context, s *master.Session, cmd *master.Command, timeout time.Duration, value, announce, cancelOnInt bool) error {
	err := c.waitCmdOnce(ctx, s, cmd, timeout, value, announce)
	var ie *sessionio.InterruptedError
	if err != nil && errors.As(context.Cause(ctx), &ie) {
		if !c.json && c.stdout.partial() {
			// End the output's partial last line, as a finished wait does
			// before its value: the shell's prompt (or the next line of a
			// log) does not start in the middle of it.
			fmt.Fprintln(c.stdout)
		}
		c.interrupted(s, cmd, cancelOnInt)
	}
	return c.noRunnerHint(s, cmd, err) // cli_withdraw.go
}

// interrupted tells what becomes of cmd when its wait was interrupted: it
// goes on (queued or running) unless cancel, which cancels it.
func (c *cli) interrupted(s *master.Session, cmd *master.Command, cancel bool) {
	where := commandWhere(s, cmd)
	if where == "" {
		return // It has a result: nothing goes on.
	}
	if where == "gone" {
		c.diag("%s gets no result: its session %s is gone (the directory was deleted)", cmd.ID, s.Dir())
		return
	}
	howto := fmt.Sprintf("master cancel %s --session %s", cmd.ID, s.Dir())
	if !cancel {
		c.diag("%s is still %s; %s", cmd.ID, where, howto)
		return
	}
	ctx, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	rep, err := s.Cancel(ctx, cmd.ID)
	if rep == nil || (err != nil && !errors.Is(err, master.ErrAlreadyFinished)) {
		c.diag("%s was %s and could not be cancelled (%s); %s", cmd.ID, where, errText(err), howto)
		return
	}
	c.diag("cancelled on interrupt: %s: %s", rep.Outcome, rep.Message)
}

// commandWhere says where cmd is: "queued", "running", "gone" (the
// session directory was deleted), or "" once it has a result.
func commandWhere(s *master.Session, cmd *master.Command) string {
	if r, _ := cmd.Result(); r != nil {
		return ""
	}
	if _, err := os.Lstat(s.Dir()); errors.Is(err, os.ErrNotExist) {
		return "gone"
	}
	if _, err := os.Lstat(filepath.Join(s.Dir(), protocol.DirInflight, cmd.Name)); err == nil {
		return "running"
	}
	return "queued"
}

func (c *cli) waitCmdOnce(ctx context.Context, s *master.Session, cmd *master.Command, timeout time.Duration, value, announce bool) error {
	ctx, cancel := withTimeout(ctx, timeout)
	defer cancel()
	// Say so when waits degrade to polling (never a silent slowdown), but
	// only once the wait outlasts its quick poll: asking earlier would
	// start the watcher for every short wait, and an inotify instance costs
	// a millisecond to create and stalls the exit to tear down.
	warn := time.AfterFunc(s.QuickPoll, func() {
		if why := s.WatchDegraded(); why != "" {
			c.diag("%s", why)
		}
	})
	defer warn.Stop()
	if announce {
		if r, _ := cmd.Result(); r != nil {
			c.diag("%s already done (%s at %s)", cmd.ID, r.Status, r.EndTS.UTC().Format(time.RFC3339))
		}
	}
	if !c.json {
		stopProgress := func() {}
		if isTerminal(c.stderr) { // Else progress says nothing: no goroutine for it (issue 44).
			pctx, pcancel := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() {
				defer close(done)
				c.progress(pctx, s, cmd)
			}()
			stopProgress = func() { pcancel(); <-done }
		}
		_, err := cmd.Follow(ctx, c.stdout, 0)
		stopProgress()
		if err != nil {
			return err
		}
	}
	res, err := cmd.Wait(ctx, master.WaitOptions{})
	if res == nil {
		return err
	}
	if c.json {
		if _, raw, rerr := cmd.RawResult(); rerr == nil && raw != nil {
			c.printRawJSON(raw)
		}
		return err
	}
	if value {
		c.printValue(res)
	}
	return err
}

// printValue prints an ok command's value (the Tcl result, as interactive
// tclsh does) on a line of its own after its output.
func (c *cli) printValue(res *protocol.Result) {
	if res.Status != protocol.StatusOK || res.Value == nil || *res.Value == "" {
		return
	}
	if c.stdout.partial() {
		fmt.Fprintln(c.stdout)
	}
	fmt.Fprintln(c.stdout, *res.Value)
	if res.ValueTruncated {
		c.diag("the value of %s was cut at 64 KiB (the full value is not kept)", res.CmdID)
	}
}

// progress reports a long wait on stderr every 5 s, each message on a line
// of its own; waitCmdOnce runs it when stderr is a terminal.
func (c *cli) progress(ctx context.Context, s *master.Session, cmd *master.Command) {
	start := time.Now()
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		st, err := s.Status(ctx)
		if err != nil {
			continue
		}
		where := "queued"
		if st.CurrentCmdID == cmd.ID {
			where = fmt.Sprintf("running for %v, %d bytes of output", st.CurrentElapsed.Round(time.Second), st.CurrentOutBytes)
		}
		c.diag("waiting %v for %s: %s (runner %s)", time.Since(start).Round(time.Second), cmd.ID, where, st.Phase)
	}
}

func waitFlags(cmd *command) runFunc {
	var timeout time.Duration
	cmd.Duration(&timeout, "wait-timeout", 0, "how long to wait (0: forever); exit 3 when exceeded")
	cmd.Duration(&timeout, "timeout", 0, "same as --wait-timeout")
	noValue := cmd.Bool("no-value", false, "do not print the command's value after its output")
	cancelOnInt := cmd.Bool("cancel-on-interrupt", false, "cancel the command when interrupted (Ctrl-C), then exit 130")
	return func(ctx context.Context, pos []string) error {
		c := cmd.c
		s, command, err := c.lookup(cmd, pos)
		if err != nil {
			return err
		}
		return c.waitCmd(ctx, s, command, timeout, !*noValue, true, *cancelOnInt)
	}
}

func (c *cli) lookup(cmd *command, args []string) (*master.Session, *master.Command, error) {
	if len(args) != 1 {
		return nil, nil, usageErr("one CMD_ID expected")
	}
	s, err := cmd.open()
	if err != nil {
		return nil, nil, err
	}
	command, err := s.Command(args[0]) // A cmd_id, cmd_<seq>_<id>.json or queue/cmd_<seq>_<id>.json.
	return s, command, err
}

func resultFlags(cmd *command) runFunc {
	return func(_ context.Context, pos []string) error {
		c := cmd.c
		_, command, err := c.lookup(cmd, pos)
		if err != nil {
			return err
		}
		res, raw, err := command.RawResult()
		if err != nil {
			return err
		}
		if res == nil {
			return fmt.Errorf("no result yet for %s: %w", command.ID, master.ErrWaitTimeout)
		}
		c.printRawJSON(raw)
		if res.Status != protocol.StatusOK {
			_, exit := master.Classify(&master.ResultError{Result: res})
			return exitOnly(exit)
		}
		return nil
	}
}

func outputFlags(cmd *command) runFunc {
	off := cmd.Int64("offset", 0, "first byte")
	n := cmd.Int64("length", 0, "bytes to print (0: to the end)")
	return func(_ context.Context, pos []string) error {
		c := cmd.c
		_, command, err := c.lookup(cmd, pos)
		if err != nil {
			return err
		}
		if *off < 0 || *n < 0 {
			return usageErr("--offset and --length must not be negative")
		}
		b, err := command.Output(*off, *n)
		if errors.Is(err, os.ErrNotExist) {
			b, err = nil, nil // Queued, or answered without running: no output.
		}
		if err != nil {
			return err
		}
		if !c.json {
			_, err = c.stdout.Write(b)
			return err
		}
		res, _ := command.Result()
		doc := textDoc(b)
		// resume_cursor: the one cursor name of every reply (PROTOCOL.md section 19, "Cursors").
		doc["cmd_id"], doc["offset"], doc["resume_cursor"], doc["complete"] = command.ID, *off, *off+int64(len(b)), res != nil
		c.printJSON(doc)
		return nil
	}
}

// textDoc starts a JSON document carrying bytes: "text" (invalid UTF-8
// replaced), and "data_b64" with the exact bytes when they are not UTF-8.
func textDoc(b []byte) map[string]any {
	doc := map[string]any{"protocol_version": protocol.Version, "text": string(b)}
	if !utf8.Valid(b) {
		doc["data_b64"] = base64.StdEncoding.EncodeToString(b)
	}
	return doc
}

// labelFlag is --label KEY=VALUE, repeatable.
type labelFlag map[string]string

func (l labelFlag) String() string { return fmt.Sprint(map[string]string(l)) }

func (l labelFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q: want KEY=VALUE", v)
	}
	if _, dup := l[k]; dup {
		return fmt.Errorf("%q: label %s given twice", v, k)
	}
	l[k] = val
	return nil
}

func (l labelFlag) orNil() map[string]string {
	if len(l) == 0 {
		return nil
	}
	return l
}

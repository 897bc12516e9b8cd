package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/skillpilot/skillpilot/internal/sessionio"
	"github.com/skillpilot/skillpilot/internal/version"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
)

type cli struct {
	stdin  io.Reader
	stdout *trackWriter
	stderr io.Writer
	json   bool
	// verb is the command being run ("submit", "pool grow"), set by the
	// dispatch: its flag set's name and help name it.
	verb string
	// signals returns once SIGINT and SIGTERM are caught
	// (interruptContext); nil when nothing catches them (a test's cli).
	signals func()
}

// armed returns once SIGINT and SIGTERM are caught, if Main catches them.
func (c *cli) armed() {
	if c.signals != nil {
		c.signals()
	}
}

// Main runs the master command line and returns its exit code. SIGINT and
// SIGTERM end it with 130 and 143 (code interrupted).
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := &cli{stdin: stdin, stdout: &trackWriter{w: stdout}, stderr: stderr}
	if len(args) > 0 && (args[0] == "--version" || args[0] == "-version" || args[0] == "version") {
		io.WriteString(stdout, versionLine()+"\n") // Before the table is built: a version is all it takes.
		return master.ExitOK
	}
	loadVerbs()
	args = commandFirst(args)
	if len(args) == 0 {
		fmt.Fprint(stderr, cliUsage(), moreUsage())
		return master.ExitUsage
	}
	switch args[0] {
	case "-h", "--help", "-help", "help":
		if len(args) > 1 && args[0] == "help" && isHelpWord(args[1]) { // master help help: what help does.
			fmt.Fprint(stdout, helpUsage)
			return master.ExitOK
		}
		if len(args) > 1 && args[0] == "help" { // master help COMMAND [SUBCOMMAND]: its --help.
			args = append(args[1:], "--help")
			break
		}
		fmt.Fprint(stdout, cliUsage(), moreUsage())
		return master.ExitOK
	case "--version", "-version", "version":
		fmt.Fprintln(stdout, versionLine())
		return master.ExitOK
	}
	ctx, armed, stop := interruptContext()
	defer stop()
	c.signals = armed
	err := c.run(ctx, args[0], args[1:])
	if errors.Is(err, master.ErrUsage) && args[0] != "" {
		err = &commandError{err: err, command: args[0]}
	}
	if err == nil {
		// Commands that run until interrupted (tail -f, lease --keep,
		// status --watch) end here with the signal's exit code.
		var ie *sessionio.InterruptedError
		if errors.As(context.Cause(ctx), &ie) {
			_, exit := master.Classify(ie)
			return exit
		}
		return master.ExitOK
	}
	return c.fail(err)
}

// commandFirst moves the flags every command takes (--session DIR, --json)
// from before the command name to after it, so that
// "master --session DIR submit ..." works as "master submit --session DIR
// ...". Anything else before the command is left for the usage error.
func commandFirst(args []string) []string {
	var lead []string
	i := 0
	for i < len(args) {
		a := args[i]
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || a == "-" || a == "--" {
			break
		}
		switch name {
		case "json":
			lead = append(lead, a)
			i++
			continue
		case "session":
			if hasValue {
				lead = append(lead, a)
				i++
				continue
			}
			if i+1 < len(args) {
				lead = append(lead, a, args[i+1])
				i += 2
				continue
			}
		}
		return args // Not a flag every command takes: say so at the command.
	}
	if len(lead) == 0 {
		return args
	}
	if i == len(args) {
		return append([]string{""}, lead...) // Flags but no command: a usage error naming none.
	}
	out := append([]string{args[i]}, lead...)
	return append(out, args[i+1:]...)
}

// interruptContext returns a context cancelled by the first SIGINT or
// SIGTERM with an *InterruptedError as its cause; a second signal has its
// default effect. The handler is installed on a goroutine of its own, so
// that installing it (os/signal starts two goroutines, one locked to a
// thread of its own: about half a millisecond here, issue 44) overlaps
// the parsing and the session's opening; armed returns once it is
// installed. Until then a signal has its default effect, as it has
// before Main starts: the dispatch arms before a command runs, submit
// before its command is queued.
func interruptContext() (ctx context.Context, armed, stop func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	ch := make(chan os.Signal, 1)
	ready, done := make(chan struct{}), make(chan struct{})
	go func() {
		signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
		close(ready)
		select {
		case s := <-ch:
			signal.Stop(ch)
			cancel(&sessionio.InterruptedError{Signal: s.(syscall.Signal)})
		case <-done:
		}
	}()
	armed = func() { <-ready }
	return ctx, armed, func() { <-ready; signal.Stop(ch); close(done); cancel(nil) }
}

func versionLine() string { return version.String("master") }

// fail reports err once: as JSON on stdout with --json, always on stderr,
// on a line of its own.
func (c *cli) fail(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return master.ExitOK
	}
	code, exit := master.Classify(err)
	var eo exitOnly
	if errors.As(err, &eo) {
		return exit
	}
	var re *master.ResultError
	if errors.As(err, &re) {
		c.diag("%s", errText(err))
		return exit
	}
	if c.json {
		c.printJSON(map[string]any{"protocol_version": protocol.Version, "error": errorJSON(code, err)})
	}
	c.diag("%s", errText(err))
	return exit
}

// commandError is a usage error of a command: its context names the
// command (PROTOCOL.md section 19, "Errors carry context"), beside what
// err's own context says (the field of a bad --trace-id or --label).
type commandError struct {
	err     error
	command string
}

func (e *commandError) Error() string { return e.err.Error() }
func (e *commandError) Unwrap() error { return e.err }
func (e *commandError) ErrorContext() map[string]any {
	return map[string]any{"command": e.command}
}

// errorJSON is the "error" object of a --json document: code, message and,
// when the error carries one, its context (master.ErrorContext; PROTOCOL.md
// section 19, "Errors carry context").
func errorJSON(code string, err error) map[string]any {
	e := map[string]any{"code": code, "message": err.Error()}
	if ctx := master.ErrorContext(err); len(ctx) > 0 {
		e["context"] = ctx
	}
	return e
}

// errText is err's message for a diagnostic (which diag prefixes with
// "master: "): no "master: " of its own, at the start or where a wrapped
// error's message begins.
func errText(err error) string {
	return strings.ReplaceAll(strings.TrimPrefix(err.Error(), "master: "), ": master: ", ": ")
}

// diag prints a diagnostic on stderr, starting on a line of its own when
// stdout and stderr share a terminal and stdout's last line is unfinished.
func (c *cli) diag(format string, args ...any) {
	if c.stdout.partial() && isTerminal(c.stderr) && isTerminal(c.stdout.w) {
		fmt.Fprintln(c.stderr)
		c.stdout.endLine()
	}
	fmt.Fprintf(c.stderr, "master: "+format+"\n", args...)
}

// printJSON prints one JSON document (indented) on stdout.
func (c *cli) printJSON(v any) {
	enc := json.NewEncoder(c.stdout)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v) // Writing to stdout; nothing better to do on failure.
}

// printJSONLine prints one line of a JSON Lines stream on stdout.
func (c *cli) printJSONLine(v any) {
	_ = json.NewEncoder(c.stdout).Encode(v) // As printJSON.
}

// printRawJSON prints a document exactly as a file holds it (indented).
func (c *cli) printRawJSON(b []byte) {
	var out bytes.Buffer
	if json.Indent(&out, bytes.TrimSpace(b), "", "  ") != nil {
		c.stdout.Write(b)
		return
	}
	out.WriteByte('\n')
	c.stdout.Write(out.Bytes())
}

// exitOnly carries an exit code for an outcome already reported.
type exitOnly int

func (e exitOnly) Error() string { return fmt.Sprintf("exit %d", int(e)) }

// ErrorCode implements sessionio.CodedError: no code, the exit code.
func (e exitOnly) ErrorCode() (code string, exit int) { return "", int(e) }

// run runs the command cmd (the table verbs, commands.go) on args.
func (c *cli) run(ctx context.Context, cmd string, args []string) error {
	if v := find(verbs, cmd); v != nil && (v.flags != nil || v.run != nil) {
		c.verb = v.name
		if !v.armsLate {
			c.armed()
		}
		return c.dispatch(ctx, v, args)
	}
	c.jsonAnyway(args) // The error in JSON too.
	if cmd == "" {
		return usageErr("no command given (master --help lists the commands)")
	}
	if strings.HasPrefix(cmd, "-") {
		name, _, _ := strings.Cut(strings.TrimLeft(cmd, "-"), "=")
		return usageErr("%s before the command%s: only --session DIR and --json may come before it (master --help)", cmd,
			didYouMean(name, []string{"session", "json"}, "--"))
	}
	return usageErr("unknown command %q%s (master --help lists the commands)", cmd, didYouMean(cmd, names(verbs), "master "))
}

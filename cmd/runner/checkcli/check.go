// Package checkcli is `runner check` (cmd/runner dispatches to it): the
// command line of toolcheck, with the runner's own flags for the kind,
// the driver and --init. It is a package of its own so that runnercli,
// which the master's tests run in-process, does not depend on the master.
package checkcli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/skillpilot/skillpilot/cmd/runner/runnercli"
	"github.com/skillpilot/skillpilot/internal/clidoc"
	"github.com/skillpilot/skillpilot/internal/flaghelp"
	"github.com/skillpilot/skillpilot/protocol"
	"github.com/skillpilot/skillpilot/runner"
	"github.com/skillpilot/skillpilot/toolcheck"
)

// checkSynopsis follows "runner check" on its usage line.
const checkSynopsis = "[--kind K | --driver FILE] [--init FILE]... [flags] [-- TOOL ARGS...]"

const checkUsage = `usage: runner check ` + checkSynopsis + `

Starts TOOL under the runner in a temporary session (no --session: it makes
its own) and runs a battery in order: the start-up (the time it took and
what the tool printed), exact output, the value, an error, a 5 KB payload
with an error in its middle, UTF-8, output without a final newline, a
cancel and what the tool kept, send to a read, a kill of the tool and a
restart with --init, a stop. It prints a table (what holds, what does not
and why, in the tool's own words) and the runner flags it recommends. Run
it on your tool before a flow depends on it (docs/drivers.md, "Your own tool").

The tool starts in the current directory, as under the runner. The session
is removed when every check holds, and kept (its path printed) otherwise.

Exit codes: 0 every guarantee of the runner holds on the tool, 1 some do
not (or the check could not be made), 2 usage.

Flags:
`

// Exit codes of runner check.
const (
	ExitOK    = 0 // every guarantee holds
	ExitError = 1 // some do not, or the check could not be made
	ExitUsage = 2
)

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// flags are runner check's flags, as Main parses them.
type flags struct {
	inits                     stringList
	o                         toolcheck.Options
	kind, driverFile, session *string
	jsonOut                   *bool
}

// newFlags builds runner check's flag set: Main parses it and Command
// lists it, so the help, the parsing and the reference cannot differ.
func newFlags() (*flag.FlagSet, *flags) {
	fs := flag.NewFlagSet("runner check", flag.ContinueOnError)
	f := &flags{}
	f.kind = fs.String("kind", "tcl", "tool kind, as for the runner: tcl, sh, or a built-in driver: "+strings.Join(runner.Presets(), ", "))
	f.driverFile = fs.String("driver", "", "drive a line-oriented shell described by this JSON file, as for the runner")
	fs.Var(&f.inits, "init", "script the tool runs after every start, as for the runner (repeatable)")
	fs.DurationVar(&f.o.StartTimeout, "start-timeout", 10*time.Minute, "bound for the tool's start-up (a licence queue may take minutes)")
	fs.DurationVar(&f.o.StepTimeout, "timeout", time.Minute, "bound for each command of the battery")
	fs.DurationVar(&f.o.ResyncWait, "resync-wait", 5*time.Second, "after Ctrl-C, how long the tool has to return to its prompt (as for the runner)")
	fs.DurationVar(&f.o.InitTimeout, "init-timeout", 10*time.Minute, "bound for each --init script (as for the runner)")
	fs.DurationVar(&f.o.KillGrace, "kill-grace", 3*time.Second, "time between SIGTERM and SIGKILL (as for the runner)")
	f.jsonOut = fs.Bool("json", false, "print the report as one JSON document instead of the table")
	fs.BoolVar(&f.o.Keep, "keep", false, "keep the temporary session even when every check holds")
	f.session = fs.String("session", "", "not for check: it makes a temporary session of its own")
	return fs, f
}

// Command is runner check as the runner's reference page lists it.
func Command() clidoc.Command {
	fs, _ := newFlags()
	about, _, _ := strings.Cut(strings.TrimPrefix(checkUsage, "usage: runner check "+checkSynopsis+"\n\n"), "\nFlags:")
	return clidoc.Command{Name: "check", Synopsis: checkSynopsis,
		Summary: "run a battery of the runner's guarantees on a tool, in a temporary session, and recommend flags",
		About:   strings.TrimSpace(about), Flags: clidoc.Flags(fs)}
}

// Main is `runner check ARGS` (ARGS after "check").
func Main(args []string, stdout, stderr io.Writer) int {
	fs, f := newFlags()
	o := &f.o
	inits, kind, driverFile, session, jsonOut := &f.inits, f.kind, f.driverFile, f.session, f.jsonOut
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "-h" || a == "-help" || a == "--help" {
			fmt.Fprint(stdout, checkUsage)
			flaghelp.PrintDefaults(stdout, fs)
			return ExitOK
		}
	}
	if err := fs.Parse(args); err != nil {
		msg := strings.ReplaceAll(runnercli.FlagErrorLine(fs, err), "'runner --help'", "'runner check --help'")
		fmt.Fprintf(stderr, "runner check: %s\n", msg)
		return ExitUsage
	}
	if *session != "" {
		fmt.Fprintln(stderr, "runner check: --session is not a flag of check: it makes a temporary session of its own")
		return ExitUsage
	}
	o.Kind, o.Tool, o.Init = protocol.Kind(*kind), fs.Args(), *inits
	if *driverFile != "" {
		d, err := runnercli.ReadDriver(*driverFile)
		if err != nil {
			fmt.Fprintf(stderr, "runner check: --driver: %v\n", err)
			return ExitUsage
		}
		if *kind != string(protocol.KindTcl) && *kind != d.Kind {
			fmt.Fprintf(stderr, "runner check: --kind %s and a driver of kind %s\n", *kind, d.Kind)
			return ExitUsage
		}
		o.Driver, o.DriverFile, o.Kind = d, *driverFile, protocol.Kind(d.Kind)
	}
	if o.Driver == nil && o.Kind != protocol.KindTcl && o.Kind != protocol.KindSh {
		if _, ok := runner.Preset(string(o.Kind)); !ok {
			fmt.Fprintf(stderr, "runner check: unknown kind %q (want tcl, sh, %s, or --driver FILE)\n", o.Kind, strings.Join(runner.Presets(), ", "))
			return ExitUsage
		}
	}
	if err := runnercli.CheckTool(o.Tool, o.Kind, o.Driver); err != nil {
		fmt.Fprintf(stderr, "runner check: %s\n", strings.TrimPrefix(err.Error(), "runner: "))
		return ExitUsage
	}
	for _, f := range o.Init {
		if _, err := os.Stat(f); err != nil {
			fmt.Fprintf(stderr, "runner check: --init: %v\n", err)
			return ExitUsage
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	tool := strings.Join(o.Tool, " ")
	if tool == "" {
		tool = "the default tool of kind " + string(o.Kind)
	}
	fmt.Fprintf(stderr, "runner check: starting %s under the runner in a temporary session (start-up bound %s)...\n", tool, o.StartTimeout)
	rep, err := toolcheck.Run(ctx, *o)
	if err != nil {
		fmt.Fprintf(stderr, "runner check: %v\n", err)
		return ExitError
	}
	if *jsonOut {
		if err := rep.WriteJSON(stdout); err != nil {
			fmt.Fprintf(stderr, "runner check: %v\n", err)
			return ExitError
		}
	} else {
		rep.WriteTable(stdout)
	}
	if !rep.OK {
		return ExitError
	}
	return ExitOK
}

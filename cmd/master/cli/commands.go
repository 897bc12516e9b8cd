package cli

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/skillpilot/skillpilot/internal/clidoc"
	"github.com/skillpilot/skillpilot/master"
)

// A verb is one of master's commands: its entry in master's overview
// (master --help), its own --help, its flags and what runs it. The table
// [verbs] is the one list of them: the overview, did-you-mean,
// completion, master help, each command's --help and the dispatch all read
// it. A command's --help is its flag set's: `master COMMAND --help` builds
// the flags from the table (usage, long, waits, flags) and prints them.
type verb struct {
	name string
	// args are its arguments as the overview shows them, and about what
	// it does: on the same line, aligned, unless about starts with a
	// newline (then it is laid out as written). Further lines of about
	// are printed as written.
	args, about string
	// list is where the overview lists it.
	list listing
	// takesID: its first argument is a CMD_ID, completed from the session.
	takesID bool
	// usage is its arguments as its --help's usage line shows them (not
	// always args: lease's --ttl is among its flags, signal names every
	// signal), and long what it does, at length, under that line.
	usage, long string
	// waits: it waits for a runner, so it takes --wait-for-runner.
	waits bool
	// armsLate: it calls cli.armed itself, before its first step a signal
	// must not cut short unreported, instead of the dispatch before it
	// runs (submit: once its session is open, so that catching signals
	// is set up while it parses and opens).
	armsLate bool
	// first, when set, runs before the flags are parsed and may answer
	// the command itself (handled): stop on a launched session
	// (launch_cli.go), whose flags are not the plain stop's.
	first func(c *cli, ctx context.Context, args []string) (handled bool, err error)
	// flags declares its flags on cmd, a flag set that already has
	// --session and --json (and --wait-for-runner when it waits), and
	// returns what runs it on the arguments left once they are parsed.
	// The dispatch builds cmd, calls flags, parses, then runs
	// (cli.dispatch).
	flags func(cmd *command) runFunc
	// hand: its flag set starts empty, flags declares every flag, and it
	// is parsed by cli.parse (report, standin, diff, launch: report's
	// --session is repeatable, diff's --json says something else). A pool
	// subcommand's is built by hand too, starting with --pool and --json
	// (cli.dispatchPool).
	hand bool
	// tool: its arguments are a tool's command line, so the flags end at
	// the first argument (launch, pool start; see cli.parseTool). With
	// hand only.
	tool bool
	// run, for a verb without flags, runs it on the arguments after its
	// name, parsing them itself (pool, mcp, completion's helper). Neither
	// flags nor run: Main answers it before the dispatch (help, version).
	run func(c *cli, ctx context.Context, args []string) error
}

// runFunc runs a command on its positional arguments, its flags parsed
// (see verb.flags).
type runFunc func(ctx context.Context, pos []string) error

// listing is where master's overview lists a verb.
type listing int

const (
	listCommands listing = iota // under "Commands:"
	listTools                   // after them, past a blank line
	listMore                    // under "More commands:": other binaries (master mcp)
	listNone                    // named (did-you-mean, completion), not listed: help, version
	listHidden                  // neither listed nor named: the completion scripts' helper
)

// column is where the overview aligns what a verb does, by listing.
func column(l listing) int {
	switch l {
	case listCommands:
		return 36
	case listTools:
		return 38
	}
	return 0
}

// verbs are master's commands, in the order did-you-mean and completion
// offer them; poolVerbs are master pool's (pool_cli.go). Both are filled
// by loadVerbs, which Main calls once it knows the command line is not a
// plain --version (a package variable's initializer may not reach the code
// that reads them, and an init would build them at every start, issue 44).
var verbs, poolVerbs []verb

var verbsOnce sync.Once

// loadVerbs fills verbs and poolVerbs, once.
func loadVerbs() { verbsOnce.Do(buildVerbs) }

func buildVerbs() {
	poolVerbs = poolTable()
	verbs = []verb{
		{name: "submit", args: "[PAYLOAD | -f FILE | -]", about: `queue a command (no payload: stdin); prints its cmd_id;
          with --wait streams its output, then its value, and exits with its status`,
			usage: "[PAYLOAD | -f FILE | -]", waits: true, armsLate: true, flags: submitFlags, long: `
Queue a command; without a payload argument it is read from stdin. Prints the
cmd_id. With --wait, streams the command's output, then prints its value (the
Tcl result, as interactive tclsh does; --no-value leaves it out) and exits with
the command's status. With no live runner the command is still queued (a later
runner serves it) and a warning goes to stderr. Interrupted (Ctrl-C: exit 130),
the command goes on: stderr says "<id> is still running" (or queued) and how to
cancel it; with --cancel-on-interrupt it is cancelled first.`},
		{name: "wait", args: "CMD_ID", about: "wait for a result; print the output and the value", takesID: true,
			usage: "CMD_ID", waits: true, flags: waitFlags, long: `
Wait for a command's result: stream its output, print its value (--no-value
leaves it out) and exit with its status. A command that is already done says
so on stderr. Interrupted (Ctrl-C: exit 130), the command goes on and stderr
says so; with --cancel-on-interrupt it is cancelled first.`},
		{name: "result", args: "CMD_ID", about: "print the result JSON as the runner wrote it", takesID: true,
			usage: "CMD_ID", flags: resultFlags, long: `
Print a command's result exactly as the runner wrote it (JSON), and exit with
its status. Exit 3 when there is no result yet.`},
		{name: "output", args: "CMD_ID", about: "print a command's output (--offset, --length: a byte range)", takesID: true,
			usage: "CMD_ID", flags: outputFlags, long: `
Print a command's output (exactly what it printed), or a byte range of it. With
--json: {"protocol_version","cmd_id","offset","resume_cursor","text","complete"},
plus "data_b64" holding the exact bytes when they are not valid UTF-8.`},
		{name: "cancel", args: "[CMD_ID]", about: "cancel CMD_ID, or the running command; says what happened", takesID: true,
			usage: "[CMD_ID]", waits: true, flags: cancelFlags, long: `
Cancel CMD_ID (running or queued; a command file's name, or a path ending in
one, names its command too), or without CMD_ID the running command, and
print what the runner did: "<outcome>: <message>" (with --json its reply). Exit
0 cancelled (cancelled_running, cancelled_queued), 6 unknown cmd_id
(not_found), 7 nothing to cancel (already_finished, idle), 5 no live runner
(nothing is written) or a stale request, 10 rejected.`},
		{name: "withdraw", args: "CMD_ID", about: "take back a command no runner has claimed (it never runs)", takesID: true,
			usage: "CMD_ID", flags: withdrawFlags, long: `
Take back a command no runner has claimed: its file leaves queue/ (for
withdrawn/), so it never runs and gets no result (a retry cannot run it
twice). A command file's name, or a path ending in one, names exactly that
file; a cmd_id the first file with it. A command a pool moved is followed and
taken back where it is now. Needs no runner. Exit 0 withdrawn; 7 it is running
(cancel it instead), already has its result, or was withdrawn before; 6
unknown: it will not run. With --json: {"protocol_version","cmd_id",
"withdrawn":true,"name"} (name: the file taken back, in the session --json
"session" names when a pool moved it elsewhere).`},
		{name: "send", args: "CMD_ID [TEXT]", about: `type TEXT (and a newline) into the tool while CMD_ID runs;
                                    --expect REGEX waits for a prompt first (--secret, --file F)`, takesID: true,
			usage: "CMD_ID [TEXT]", waits: true, flags: sendFlags, long: `
Type input into the tool while command CMD_ID runs: TEXT and a newline
(--no-newline: TEXT alone), or the bytes of --file F, or without either the
bytes of stdin. With --expect REGEX it first waits for REGEX (RE2) in CMD_ID's
output, from a cursor that never skips a match (the end of the last match a
send consumed), and sends only if it matched; a queued CMD_ID is waited for.
--secret: the bytes are written nowhere in the session (refused while the
terminal echoes). Prints "delivered: ..." with the spool offset (--json: the
reply). Exit 0 delivered, 7 CMD_ID is not running (queued, finished or
unknown: nothing sent), 3 --expect did not match within --expect-timeout
(nothing sent), 5 no live runner or a stale request, 10 refused (secret while
the terminal echoes) or rejected.`},
		{name: "signal", args: "CMD_ID SIG", about: "send INT|QUIT|TSTP|CONT|HUP|USR1|USR2|TERM|KILL to the running command", takesID: true,
			usage: "CMD_ID INT|QUIT|TSTP|CONT|HUP|USR1|USR2|TERM|KILL", waits: true, flags: signalFlags, long: `
Send a signal to the foreground process group of the tool's terminal while
CMD_ID runs. Nothing else happens: no cancel (use cancel for that); the command
goes on or ends as the tool decides (some tools print their status on USR1).
KILL also kills the tool itself: the command ends tool_died and the tool is
restarted.
Exit 0 delivered, 7 CMD_ID is not running (nothing sent), 5 no live runner,
10 rejected.`},
		{name: "resize", args: "COLS ROWS", about: "resize the tool's terminal (SIGWINCH)",
			usage: "COLS ROWS", waits: true, flags: resizeFlags, long: `
Set the tool's terminal to COLS columns and ROWS rows (1 to 10000); the tool
gets SIGWINCH. The size is kept when the tool restarts. Exit 0 done, 5 no live
runner, 10 rejected.`},
		{name: "stop", about: `stop the runner (graceful; --force: at once; --wait);
                                    on a launched session: stop request, then after --grace
                                    (30s) the scheduler's cancel, then its kill`,
			waits: true, first: (*cli).stopLaunched, flags: stopFlags, long: `
Ask the runner to stop: graceful (the current command finishes, queued ones stay
queued) or --force (the current command is ended). With no live runner nothing
is written and the exit code is 5. --wait waits until the runner has stopped.`},
		{name: "status", about: `phase, liveness, running command, queue, lease, last results
                                    (--watch [INTERVAL]: refresh in place)`,
			usage: "[--watch [INTERVAL]]", flags: statusFlags, long: `
Show the session: runner liveness and phase, the tool, the running command with
its elapsed time and last output line, the queue, the lease and the last five
results. --watch refreshes it every INTERVAL (2s) in place on a terminal (JSON
Lines with --json) until interrupted. Exit 0 when the session can serve
commands, 5 when it cannot (no live runner, phase error or stopped).`},
		{name: "lease", args: "--ttl DUR", about: "write the lease (--keep: keep renewing it)",
			flags: leaseFlags, long: `
Write state/lease.json: the runner stops when it sees no renewal for --ttl (on
its own clock). --keep renews it every ttl/3 until interrupted; with --json it
prints one JSON line per renewal.`},
		{name: "tail", about: `print log/session.out from a byte cursor (-f: follow from
                                    the last 10 lines; --clean: only the commands' own output)`,
			flags: tailFlags, long: `
Print log/session.out, everything the tool printed (raw: prompts, markers and
all), from a byte cursor (the first byte by default); -n N starts with the
last N lines instead, as tail -n N. -f keeps following until interrupted and,
like tail -f, starts with the last 10 lines (--clean: with the last command's
output; -n, --from-start or --from: from there instead). --clean shows only
what the commands printed, line by line, as their output files hold it
(output that looks like a marker is output; over a budget, the spool holds
more than the output file kept).
The cursor reached goes to stderr ("master: resume_cursor N"); give it back
with --from to resume. With --json: JSON Lines {"protocol_version","offset",
"text"} (offset: where the text starts in the spool; "data_b64" holds the exact
bytes when they are not UTF-8; --clean lines carry no offset), and a last line
{"protocol_version","resume_cursor"}.`},
		{name: "ready", about: "wait until a runner serves the session (idle or busy)",
			waits: true, flags: readyFlags, long: `
Wait until a runner serves the session (alive, phase idle or busy); the session
directory may not exist yet. Exit 5 when no live runner appears within
--wait-for-runner, or when the runner cannot serve (phase error: the reason is
printed); 3 when --wait-timeout passes first.`},
		{name: "waitfor", args: "REGEXP", about: "wait for output in the spool (--from CURSOR)",
			usage: "REGEXP", waits: true, flags: waitforFlags, long: `
Wait until REGEXP (RE2) matches the spool at or after --from; print
"<resume_cursor> <match>" (--json: {"protocol_version","matched","match_text",
"match_span":{"start","end"},"resume_cursor"}; on a timeout only
"matched":false, "resume_cursor" and "error"). Resume from resume_cursor: the next wait never
skips a match. Exit 3 when --wait-timeout passes first (resume_cursor is then
the spool size), 5 when no live runner is seen for --wait-for-runner.`},
		{name: "report", args: "[--session DIR]... [--pool DIR]... [-o FILE] [--format html|svg|json|trace] [--max-bars N]", about: `
          timeline of sessions from their files alone (one lane per session)`,
			usage: "[--session DIR]... [--pool DIR]...", hand: true, flags: reportFlags, long: `
Draw the timeline of one or more sessions from their files alone: one lane per
session (--pool DIR: each session directory in DIR is a lane), each command a
bar. Needs no runner. Written to stdout, or atomically to -o FILE.`},
		{name: "standin", args: "--from SESSION [--from SESSION]... -o FILE.tcl [--timing none|recorded|scale=F] [--on-unknown error|tcl]", about: `
          write a Tcl stand-in that answers the recorded commands on plain tclsh
          (runner --init FILE.tcl -- tclsh)`,
			usage: "--from SESSION [--from SESSION]... -o FILE.tcl", hand: true, flags: standinFlags, long: `
Write a Tcl stand-in from recorded sessions: plain tclsh loaded with it
(runner --init FILE.tcl -- tclsh) answers the recorded commands with their
recorded output and values, so a flow can be rerun without the real tool.`},
		{name: "diff", args: "[--json] [--ignore REGEX]... [--mask REGEX]... SESSION_A SESSION_B", about: `
          compare two runs (sessions or pools) step by step, matched by trace id, labels, payload and
          order; exit 0 when they agree, 1 when they differ`,
			usage: "SESSION_A SESSION_B", hand: true, flags: diffFlags, long: `
Compare two recorded runs command by command (matched by trace id, labels and
payload, then by payload, in order): status, value and output of each. A run is
a session directory or a pool directory (its sessions' commands together, in
submit order, whatever session ran them). A command whose payload was edited
(an unmatched command of each run in the same place) is shown as one edited
step. --ignore REGEX leaves volatile lines (dates, hosts, pids) out of values
and outputs; --mask REGEX replaces its matches inside lines by <masked>.
Exit 0 when they agree, 1 when they differ.`},
		{name: "launch", args: "--via local|slurm|sge|lsf [--submit-arg A]... [--ready-timeout D] [-- TOOL ARGS]", about: `
          start a runner (detached or as a batch job) and wait until it serves`,
			usage: "--session DIR --via local|slurm|sge|lsf [-- TOOL ARGS...]", hand: true, tool: true, flags: launchFlags, long: `
Starts "runner --session DIR [RUNNER-ARGS] -- TOOL ARGS" as a detached local process
or a batch job (sbatch, qsub, bsub), records it in DIR/state/launch.json and waits until
the runner serves the session, reporting the job's state on stderr.
Exit: 0 serving, 3 --ready-timeout passed (the job stays), 5 the job ended without
serving, 7 already served or its job is still queued/running, 10 submit failed.`},
		{name: "pool", args: strings.Join(names(poolVerbs), "|") + " --pool DIR ...", about: "a pool of launched sessions", run: (*cli).pool},
		{name: "mcp", args: mcpUsage, list: listMore, run: (*cli).mcp},
		{name: "completion", args: "bash|zsh|fish", about: "print a shell completion script (commands, flags, cmd_ids)", list: listTools,
			usage: "bash|zsh|fish", flags: completionFlags, long: `
Print a completion script for bash, zsh or fish. It completes commands, pool
subcommands, each command's flags, the cmd_ids of the session (--session DIR or
$SP_SESSION_DIR) where a command takes one, signal names, and directories after
--session, --pool and --from. Load it with:
  bash:  source <(master completion bash)        (or save it under ~/.local/share/bash-completion/completions/master)
  zsh:   source <(master completion zsh)         (after compinit)
  fish:  master completion fish | source`},
		{name: "protocol", about: "print PROTOCOL.md (--json: with every file's JSON Schema)", list: listTools,
			flags: protocolFlags, long: `
Print PROTOCOL.md, the file protocol every master and the runner follow, as built
into this binary. With --json: {"protocol_version", "document" (the Markdown),
"schemas" (file name: JSON Schema of that file)}.`},
		{name: "help", list: listNone},                               // Main: master help [COMMAND [SUBCOMMAND]].
		{name: "version", list: listNone},                            // Main.
		{name: "__complete", list: listHidden, run: (*cli).complete}, // cli_completion.go
	}
	leanVerbs(verbs) // lean.go: report, standin and diff run master-history.
}

// dispatch runs the verb v (c.verb names it) on args, the words after its
// name: first, then with flags the command built from the table (its
// flag set, whose -h prints its --help), parsed, then run; else its run.
func (c *cli) dispatch(ctx context.Context, v *verb, args []string) error {
	if v.first != nil {
		if handled, err := v.first(c, ctx, args); handled {
			return err
		}
	}
	if v.flags == nil {
		return v.run(c, ctx, args)
	}
	cmd, run := c.build(v)
	if v.hand {
		return c.runHand(ctx, v, cmd, run, args)
	}
	pos, err := cmd.parse(args)
	if err != nil {
		c.jsonAnyway(args)
		return err
	}
	return run(ctx, pos)
}

// jsonAnyway sets JSON output for a usage error found before --json was
// parsed (a bad flag before it): the error is a JSON document on stdout
// whenever --json is anywhere among the arguments (PROTOCOL.md section 19).
func (c *cli) jsonAnyway(args []string) {
	c.json = c.json || slices.Contains(args, "--json") || slices.Contains(args, "-json")
}

// build makes the command of v, a verb with flags (c.verb names it; "pool
// NAME" for a pool subcommand): its flag set with v's flags declared, and
// what runs it once they are parsed. The dispatch and completion
// (takesValue) build a command's flags this one way.
func (c *cli) build(v *verb) (*command, runFunc) {
	var cmd *command
	switch {
	case strings.HasPrefix(c.verb, "pool "):
		cmd = c.newPoolCommand()
	case v.hand:
		fs := c.flagSet()
		c.describe(fs, v.usage, v.long)
		cmd = &command{FlagSet: fs, c: c, name: v.name, args: v.usage, about: v.long}
	default:
		cmd = c.newCommand(v.usage, v.long, v.waits)
	}
	return cmd, v.flags(cmd)
}

// dispatchPool runs the pool subcommand v (c.verb: "pool NAME") on args,
// as dispatch does a verb built by hand: its flag set starts with --pool
// and --json (newPoolCommand), its --help is made of master pool's
// (poolHelp). An empty --pool takes $SP_POOL_DIR once parsed.
func (c *cli) dispatchPool(ctx context.Context, v *verb, args []string) error {
	cmd, run := c.build(v)
	return c.runHand(ctx, v, cmd, func(ctx context.Context, pos []string) error {
		if cmd.pool == "" {
			cmd.pool = os.Getenv("SP_POOL_DIR")
		}
		return run(ctx, pos)
	}, args)
}

// runHand runs v with cmd, a flag set built by hand with v's flags
// declared: parsed by cli.parse (cli.parseTool when v.tool), then run on
// the arguments.
func (c *cli) runHand(ctx context.Context, v *verb, cmd *command, run runFunc, args []string) error {
	parse := c.parse
	if v.tool {
		parse = c.parseTool
	}
	if err := parse(cmd.FlagSet, args); err != nil {
		c.jsonAnyway(args)
		return err
	}
	return run(ctx, cmd.Args())
}

// find is the verb called name in table, or nil.
func find(table []verb, name string) *verb {
	for i := range table {
		if table[i].name == name {
			return &table[i]
		}
	}
	return nil
}

// names are the names in table a user may type, in its order:
// did-you-mean and completion offer them.
func names(table []verb) []string {
	var out []string
	for _, v := range table {
		if v.list != listHidden {
			out = append(out, v.name)
		}
	}
	return out
}

// entries is the overview's lines of the verbs of one listing.
func entries(list listing) string {
	var b strings.Builder
	for _, v := range verbs {
		if v.list != list {
			continue
		}
		head := fmt.Sprintf("  %-7s %s", v.name, v.args)
		if list == listMore {
			head = "  " + v.name + " " + v.args
		}
		switch {
		case v.about == "":
		case strings.HasPrefix(v.about, "\n"):
			head += v.about
		default:
			head += strings.Repeat(" ", max(column(list)-len(head), 3)) + v.about
		}
		b.WriteString(head + "\n")
	}
	return b.String()
}

// overviewNotes and jsonNotes are the paragraphs of master's overview
// around its exit codes; the reference pages say them too (Reference).
const (
	overviewNotes = `The commands on one session (submit ... waitfor, launch) take --session DIR (default:
$SP_SESSION_DIR) and --json; report, standin, diff and pool name their sessions their own
way (see their --help). Commands that wait take --wait-for-runner DUR (how long to wait
without a live runner; default 10s). --session and --json may also come before the command
(master --session DIR status). Flags may come before or after the arguments. Durations are
Go durations (1.5s, 2m, 1h) or plain seconds (30). 'master COMMAND --help' (or 'master help
COMMAND') shows a command's usage, what it does and its flags.`
	jsonNotes = `With --json, stdout holds only JSON carrying protocol_version (one document, or JSON Lines
for tail and status --watch); errors are
{"protocol_version":1,"error":{"code","message","context"}} (context: the facts a program
branches on, such as the dir, cmd_id, field or command); diagnostics go to stderr.`
)

// exitCodes are master's exit codes (PROTOCOL.md section 19): the
// overview and the reference list them from here, and
// TestExitCodesListed keeps every master.Exit constant in it.
var exitCodes = []clidoc.Exit{
	{Code: master.ExitOK, Meaning: "ok"},
	{Code: master.ExitFailed, Meaning: "command failed"},
	{Code: master.ExitUsage, Meaning: "usage"},
	{Code: master.ExitTimeout, Meaning: "timeout"},
	{Code: master.ExitCancelled, Meaning: "cancelled"},
	{Code: master.ExitNoRunner, Meaning: "session missing, runner not alive or cannot serve"},
	{Code: master.ExitUnknownCmdID, Meaning: "unknown cmd_id"},
	{Code: master.ExitNothingToDo, Meaning: "nothing to act on (not running, already finished, idle)"},
	{Code: master.ExitPruned, Meaning: "pruned (the session's retention removed the command's result)"},
	{Code: master.ExitIO, Meaning: "I/O or internal error"},
	{Code: master.ExitSIGINT, Meaning: "interrupted (SIGINT)"},
	{Code: master.ExitSIGTERM, Meaning: "interrupted (SIGTERM)"},
}

// cliUsage is master's overview: what master --help prints (then
// moreUsage).
func cliUsage() string {
	return `usage: master COMMAND [flags] [args]     (flags may come before or after args)

Commands:
` + entries(listCommands) + `
` + entries(listTools) + `
` + overviewNotes + `

` + clidoc.Wrap("Exit codes: "+clidoc.ExitList(exitCodes)+".", 90, "") + `
` + jsonNotes + "\n"
}

// moreUsage lists the commands other binaries implement: `master mcp`,
// the MCP server (package mcpserver, binary master-mcp; see mcp.go).
func moreUsage() string { return "\nMore commands:\n" + entries(listMore) }

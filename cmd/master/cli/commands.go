package cli

import (
	"context"
	"fmt"
	"strings"
)

// A verb is one of master's commands: its entry in master's overview
// (master --help) and what runs it. The table [verbs] is the one list of
// them (issue 33.5): the overview, did-you-mean, completion, master help
// and the dispatch all read it. A command's own --help (its usage line,
// what it does at length and its flags) is its run's flag set: `master
// COMMAND --help` runs it.
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
	// run runs it on the arguments after its name. nil: Main answers it
	// before the dispatch (help, version).
	run func(c *cli, ctx context.Context, args []string) error
}

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
var column = map[listing]int{listCommands: 36, listTools: 38}

// verbs are master's commands, in the order did-you-mean and completion
// offer them; poolVerbs are master pool's (pool_cli.go). Both are filled
// by init: a run reaches the code that reads them (completion, a pool
// subcommand's help), which a package variable's initializer may not.
var verbs, poolVerbs []verb

func init() {
	poolVerbs = poolTable()
	verbs = []verb{
		{name: "submit", args: "[PAYLOAD | -f FILE | -]", about: `queue a command (no payload: stdin); prints its cmd_id;
          with --wait streams its output, then its value, and exits with its status`, run: (*cli).submit},
		{name: "wait", args: "CMD_ID", about: "wait for a result; print the output and the value", takesID: true, run: (*cli).wait},
		{name: "result", args: "CMD_ID", about: "print the result JSON as the runner wrote it", takesID: true, run: (*cli).result},
		{name: "output", args: "CMD_ID", about: "print a command's output (--offset, --length: a byte range)", takesID: true, run: (*cli).output},
		{name: "cancel", args: "[CMD_ID]", about: "cancel CMD_ID, or the running command; says what happened", takesID: true, run: (*cli).cancel},
		{name: "withdraw", args: "CMD_ID", about: "take back a command no runner has claimed (it never runs)", takesID: true, run: (*cli).withdraw},
		{name: "send", args: "CMD_ID [TEXT]", about: `type TEXT (and a newline) into the tool while CMD_ID runs;
                                    --expect REGEX waits for a prompt first (--secret, --file F)`, takesID: true, run: (*cli).send},
		{name: "signal", args: "CMD_ID SIG", about: "send INT|QUIT|TSTP|CONT|HUP|USR1|USR2|TERM|KILL to the running command", takesID: true, run: (*cli).signal},
		{name: "resize", args: "COLS ROWS", about: "resize the tool's terminal (SIGWINCH)", run: (*cli).resize},
		{name: "stop", about: `stop the runner (graceful; --force: at once; --wait);
                                    on a launched session: stop request, then after --grace
                                    (30s) the scheduler's cancel, then its kill`, run: (*cli).stop},
		{name: "status", about: `phase, liveness, running command, queue, lease, last results
                                    (--watch [INTERVAL]: refresh in place)`, run: (*cli).status},
		{name: "lease", args: "--ttl DUR", about: "write the lease (--keep: keep renewing it)", run: (*cli).lease},
		{name: "tail", about: `print log/session.out from a byte cursor (-f: follow from
                                    the last 10 lines; --clean: only the commands' own output)`, run: (*cli).tail},
		{name: "ready", about: "wait until a runner serves the session (idle or busy)", run: (*cli).ready},
		{name: "waitfor", args: "REGEXP", about: "wait for output in the spool (--from CURSOR)", run: (*cli).waitfor},
		{name: "report", args: "[--session DIR]... [--pool DIR]... [-o FILE] [--format html|svg|json|trace] [--max-bars N]", about: `
          timeline of sessions from their files alone (one lane per session)`, run: (*cli).report},
		{name: "standin", args: "--from SESSION [--from SESSION]... -o FILE.tcl [--timing none|recorded|scale=F] [--on-unknown error|tcl]", about: `
          write a Tcl stand-in that answers the recorded commands on plain tclsh
          (runner --init FILE.tcl -- tclsh)`, run: (*cli).standin},
		{name: "diff", args: "[--json] [--ignore REGEX]... [--mask REGEX]... SESSION_A SESSION_B", about: `
          compare two runs (sessions or pools) step by step, matched by trace id, labels, payload and
          order; exit 0 when they agree, 1 when they differ`, run: (*cli).diff},
		{name: "launch", args: "--via local|slurm|sge|lsf [--submit-arg A]... [--ready-timeout D] [-- TOOL ARGS]", about: `
          start a runner (detached or as a batch job) and wait until it serves`, run: (*cli).launch},
		{name: "pool", args: strings.Join(names(poolVerbs), "|") + " --pool DIR ...", about: "a pool of launched sessions", run: (*cli).pool},
		{name: "mcp", args: mcpUsage, list: listMore, run: (*cli).mcp},
		{name: "completion", args: "bash|zsh|fish", about: "print a shell completion script (commands, flags, cmd_ids)", list: listTools, run: (*cli).completion},
		{name: "protocol", about: "print PROTOCOL.md (--json: with every file's JSON Schema)", list: listTools, run: (*cli).protocolDoc},
		{name: "help", list: listNone},                               // Main: master help [COMMAND [SUBCOMMAND]].
		{name: "version", list: listNone},                            // Main.
		{name: "__complete", list: listHidden, run: (*cli).complete}, // cli_completion.go
	}
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
			head += strings.Repeat(" ", max(column[list]-len(head), 3)) + v.about
		}
		b.WriteString(head + "\n")
	}
	return b.String()
}

// cliUsage is master's overview: what master --help prints (then
// moreUsage).
func cliUsage() string {
	return `usage: master COMMAND [flags] [args]     (flags may come before or after args)

Commands:
` + entries(listCommands) + `
` + entries(listTools) + `
The commands on one session (submit ... waitfor, launch) take --session DIR (default:
$SP_SESSION_DIR) and --json; report, standin, diff and pool name their sessions their own
way (see their --help). Commands that wait take --wait-for-runner DUR (how long to wait
without a live runner; default 10s). --session and --json may also come before the command
(master --session DIR status). Flags may come before or after the arguments. Durations are
Go durations (1.5s, 2m, 1h) or plain seconds (30). 'master COMMAND --help' (or 'master help
COMMAND') shows a command's usage, what it does and its flags.

Exit codes: 0 ok, 1 command failed, 2 usage, 3 timeout, 4 cancelled, 5 session missing,
runner not alive or cannot serve, 6 unknown cmd_id, 7 nothing to act on (not running,
already finished, idle), 10 I/O or internal error, 130/143 interrupted (SIGINT/SIGTERM).
With --json, stdout holds only JSON carrying protocol_version (one document, or JSON Lines
for tail and status --watch); errors are
{"protocol_version":1,"error":{"code","message","context"}} (context: the facts a program
branches on, such as the dir, cmd_id, field or command); diagnostics go to stderr.
`
}

// moreUsage lists the commands other binaries implement: `master mcp`,
// the MCP server (package mcpserver, binary master-mcp; see mcp.go).
func moreUsage() string { return "\nMore commands:\n" + entries(listMore) }

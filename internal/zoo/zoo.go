// Package zoo is the catalogue of the tools the runner is tested on: the
// EDA shells a user can install from Debian, and the zoo of test shells in
// testdata/zoo that reproduce, one behaviour each, what the commercial
// shells do that nobody can install here (Innovus, PrimeTime, Vivado...).
// Each shell's file names, in a comment, the vendor documentation or
// users' forum that describes its behaviour.
//
// The zoo's own tests run the core conformance scenarios on every zoo
// shell with the Go master, and one test per behaviour of what it does to
// the runner (zoo_test.go). `runner check` is run on every tool of the
// catalogue (toolcheck), and the tool matrix (docs/drivers.md) is that check's output
// (toolcheck's TestToolMatrix keeps the two equal).
package zoo

import (
	"path/filepath"
	"runtime"
	"strings"
)

// Tool is one row of the catalogue.
type Tool struct {
	// Name is the tool's row in the tool matrix (docs/drivers.md).
	Name string
	// Zoo says it is a test shell of testdata/zoo, not a real tool.
	Zoo bool
	// Program is what must be installed to run it, and Package the Debian
	// package that has it.
	Program, Package string
	// Argv is its command line; "zoo/FILE" stands for testdata/zoo/FILE,
	// "testdata/FILE" for that file of the repository.
	Argv []string
	// X says it needs an X display (a GUI tool's Tcl shell, served
	// headless under Xvfb): the tests give it one.
	X bool
	// Flags are the runner flags it needs (--kind yosys).
	Flags []string
	// Env is the environment the tests give it: the real shape of a
	// behaviour (a 90 s licence wait) is its default, the tests use a
	// short one.
	Env []string
	// Behaviour says what it is or reproduces, in a few words.
	Behaviour string
	// Prevents says what its behaviour keeps the runner from doing, and
	// what a user does about it ("" when nothing).
	Prevents string
	// Replaced names the conformance scenarios its behaviour makes fail
	// on purpose, each with why; a test of its own in zoo_test.go shows
	// what happens instead. They are not run on it.
	Replaced map[string]string
	// Serves is false for a tool that never serves (a licence that is
	// never granted): no scenario runs on it.
	Serves bool
	// Expect is what `runner check` must find on it (toolcheck's
	// TestCheckTools), by check name: "holds" for every check not named,
	// else "fails: WORDS", "not_applicable: WORDS" or "not_run", WORDS
	// being part of what the check says (the tool's own words where it
	// has any); "*" stands for every check not named. the matrix (docs/drivers.md) is
	// made of these.
	Expect map[string]string
	// Cancel is what a Ctrl-C cancel does to it, as the check finds:
	// "restarted" (it dies of Ctrl-C), "kept" (back at its prompt with
	// its state), "terminated" (not back within --resync-wait).
	Cancel string
}

// Dir is testdata/zoo of this repository, as an absolute path.
func Dir() string { return filepath.Join(testdata(), "zoo") }

func testdata() string {
	_, here, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(here), "..", "..", "testdata")
}

// Command is the tool's command line with zoo/ paths made absolute, run
// through env(1) with the tool's Env and then extra (KEY=VALUE) when there
// are any.
func (t Tool) Command(extra ...string) []string {
	var out []string
	if env := append(append([]string{}, t.Env...), extra...); len(env) > 0 {
		out = append([]string{"env"}, env...)
	}
	for _, a := range t.Argv {
		if rest, ok := strings.CutPrefix(a, "zoo/"); ok {
			a = filepath.Join(Dir(), rest)
		} else if rest, ok := strings.CutPrefix(a, "testdata/"); ok {
			a = filepath.Join(testdata(), rest)
		}
		out = append(out, a)
	}
	return out
}

// Display is the runner's command line for the tool as the matrix (docs/drivers.md) shows it:
// the environment the tests give it, runner flags, then "--" and the tool,
// with zoo paths relative to the repository. `runner check` takes the
// same flags and tool.
func (t Tool) Display() string {
	var b strings.Builder
	for _, e := range t.Env {
		b.WriteString(e + " ")
	}
	b.WriteString("runner --session S")
	for _, f := range t.Flags {
		b.WriteString(" " + f)
	}
	b.WriteString(" --")
	for _, a := range t.Argv {
		if rest, ok := strings.CutPrefix(a, "zoo/"); ok {
			a = "testdata/zoo/" + rest
		}
		b.WriteString(" " + a)
	}
	return b.String()
}

// Real are the EDA shells of Debian the runner serves, with tclsh and
// bash, and the open GUI tools' Tcl shells (headless, under Xvfb).
var Real = []Tool{
	{Name: "tclsh", Program: "tclsh", Package: "tcl", Argv: []string{"tclsh"}, Serves: true,
		Behaviour: "the default tool; dies of Ctrl-C", Cancel: "restarted"},
	{Name: "bash", Program: "bash", Package: "bash", Argv: []string{"bash", "--noprofile", "--norc", "-i"}, Flags: []string{"--kind", "sh"}, Serves: true,
		Behaviour: "payloads run with `.`; returns to its prompt on Ctrl-C", Cancel: "kept",
		Expect: map[string]string{"value": "not_applicable: no value"}},
	{Name: "OpenSTA", Program: "sta", Package: "opensta", Argv: []string{"sta", "-no_splash"}, Serves: true,
		Behaviour: "evaluates each line alone and has its own `source`; its `exit` takes effect once the typed line is done, " +
			"so the command calling it ends `ok` and the tool restarts right after (a command queued behind it may be the one that sees the exit)",
		Cancel: "restarted"},
	{Name: "Magic", Program: "magic", Package: "magic", Argv: []string{"magic", "-dnull", "-noconsole"}, Serves: true,
		Behaviour: "drops what is typed before its prompt (the runner types its start-up again until it answers); its Tcl has " +
			"no `stdin` channel: a payload that reads a line `master send` types uses `gets $::__sp::in`",
		Cancel: "restarted"},
	{Name: "netgen", Program: "netgen-lvs", Package: "netgen-lvs", Argv: []string{"netgen-lvs", "-noconsole"}, Serves: true,
		Behaviour: "a Tcl shell", Cancel: "restarted"},
	{Name: "Yosys", Program: "yosys", Package: "yosys", Argv: []string{"yosys"}, Flags: []string{"--kind", "yosys"}, Serves: true,
		Behaviour: "a payload is Yosys commands, run with `script`. A command error (`nosuchcmd`, a bad option, `read_verilog` of a " +
			"missing file) stops the payload there: the command is an error with the `ERROR:` line as its message, and Yosys goes on. " +
			"A fatal error ends Yosys (a Verilog syntax error, `script` of a missing file): `tool_exit` with the `ERROR:` line as its " +
			"message, and the loaded design is gone. An `ERROR:` the payload prints itself (`log ERROR: …`) is output, not an error. " +
			"`tcl FILE` runs Tcl", Cancel: "restarted",
		Expect: map[string]string{"value": "not_applicable: no value"}},
	{Name: "ngspice", Program: "ngspice", Package: "ngspice", Argv: []string{"ngspice"}, Flags: []string{"--kind", "ngspice"}, Serves: true,
		Behaviour: "a payload is typed line by line (at most 3 KiB, no control characters but tab; `source DECK` runs a deck); " +
			"`Error: …` and `… no such command available in ngspice` lines make it an error, and no error ends ngspice; " +
			"`>` in `echo` is a redirection; `set prompt` is followed; Ctrl-C stops the analysis, keeps its state, and no later line " +
			"of the payload runs; `--init` is refused (use `.spiceinit`); it drops every character outside ASCII from what it reads", Cancel: "kept",
		Expect: map[string]string{"value": "not_applicable: no value", "big_error": "not_applicable: line by line",
			"utf8": `fails: printed "end\n"`, "send": "not_applicable: line by line"}},
	{Name: "xschem", Program: "xschem", Package: "xschem", X: true, Argv: []string{"xschem", "-x", "--rcfile", "testdata/gui/xschemrc"}, Serves: true,
		Behaviour: "headless under Xvfb (`DISPLAY` set); `xschem get version`, values. Its Ctrl-C only prints \"Use 'exit' to close the program\": " +
			"a cancel ends it after `--resync-wait` and restarts it, so submit with `cancel_policy` `terminate_tool`. Each signal that ends it " +
			"leaves an emergency save in its temporary directory: the rc file (`testdata/gui/xschemrc`) puts that inside the session " +
			"(`S/xschem/`), not in /tmp (xschem 2.8.1 ignores `TMPDIR`)",
		Cancel: "terminated", Expect: map[string]string{"cancel": "holds: Use 'exit' to close the program"},
		Prevents: "a cancel's output ends with what xschem prints as it goes: \"Use 'exit' to close the program\" (Ctrl-C), " +
			"\"EMERGENCY SAVE DIR: …\" and \"FATAL: signal 15\" (SIGTERM)",
		Replaced: map[string]string{
			"cancel":   "a cancel's output ends with xschem's own words as it is ended (Ctrl-C's \"Use 'exit'\", the emergency save's directory)",
			"outcomes": "a cancel's output ends with xschem's own words as it is ended (Ctrl-C's \"Use 'exit'\", the emergency save's directory)",
		}},
	{Name: "gtkwave", Program: "gtkwave", Package: "gtkwave", X: true, Argv: []string{"gtkwave", "-W", "testdata/gui/counter.vcd"}, Serves: true,
		Behaviour: "`gtkwave -W FILE` (its Tcl shell, headless under Xvfb): `gtkwave::getNumFacs`; dies of Ctrl-C", Cancel: "restarted"},
	{Name: "wish", Program: "wish", Package: "tk", X: true, Argv: []string{"wish"}, Serves: true,
		Behaviour: "Tk's shell, headless under Xvfb. `tkcon` cannot be served: it never reads the terminal (its console is a Tk " +
			"window), and typed in wish it is run as a program (interactive Tcl runs unknown commands as programs)",
		Cancel: "restarted"},
}

// Shells are the zoo's test shells, one behaviour each.
var Shells = []Tool{
	{Name: "zoo innovus", Zoo: true, Program: "tclsh", Package: "tcl", Argv: []string{"tclsh", "zoo/innovus.tcl"}, Serves: true, Cancel: "restarted",
		Behaviour: "numbered prompt `innovus 1> `, `innovus 2> `, printed right after output without a newline"},
	{Name: "zoo pt_shell", Zoo: true, Program: "tclsh", Package: "tcl", Argv: []string{"tclsh", "zoo/pt_shell.tcl"}, Serves: true, Cancel: "restarted",
		Behaviour: "`pt_shell> ` and a continuation prompt `? `; prints every result"},
	{Name: "zoo vivado", Zoo: true, Program: "tclsh", Package: "tcl", Argv: []string{"tclsh", "zoo/vivado.tcl"}, Serves: true, Cancel: "restarted",
		Behaviour: "`Vivado% ` prompt, `ERROR: [Common 17-55]` errors"},
	{Name: "zoo prompt_changes", Zoo: true, Program: "tclsh", Package: "tcl", Argv: []string{"tclsh", "zoo/prompt_changes.tcl"}, Serves: true, Cancel: "restarted",
		Behaviour: "a prompt a command changes (`tcl_prompt1`, Genus's `@genus:root: 1> `)"},
	{Name: "zoo source_echo", Zoo: true, Program: "tclsh", Package: "tcl", Argv: []string{"tclsh", "zoo/source_echo.tcl"}, Serves: true, Cancel: "restarted",
		Behaviour: "`source` is the vendor's: `-echo -verbose`, echoes each command, returns nothing, goes on after an error, refuses other options"},
	{Name: "zoo puts_tee", Zoo: true, Program: "tclsh", Package: "tcl", Argv: []string{"tclsh", "zoo/puts_tee.tcl"}, Serves: true, Cancel: "restarted",
		Behaviour: "`puts` redefined to write a log file as well as the terminal"},
	{Name: "zoo exit_confirm", Zoo: true, Program: "tclsh", Package: "tcl", Argv: []string{"tclsh", "zoo/exit_confirm.tcl"}, Serves: true, Cancel: "restarted",
		Behaviour: "`exit` asks \"Do you really want to exit? (y/n)\"",
		Prevents:  "a payload's `exit` waits for its answer: `master send ID y` (or `exit -force`)"},
	{Name: "zoo licence dots", Zoo: true, Program: "tclsh", Package: "tcl", Argv: []string{"sh", "zoo/licence.sh"},
		Env: []string{"ZOO_LICENSE_WAIT=3"}, Serves: true, Cancel: "restarted",
		Behaviour: "licence checkout: a line without a newline, a dot a second (90 s; 3 s in the tests), then the banner"},
	{Name: "zoo licence silent", Zoo: true, Program: "tclsh", Package: "tcl", Argv: []string{"sh", "zoo/licence.sh"},
		Env: []string{"ZOO_LICENSE_WAIT=12", "ZOO_LICENSE_DOTS=0"}, Serves: true, Cancel: "restarted",
		Behaviour: "licence checkout: a line without a newline, then nothing (90 s; 12 s in the tests), then the banner"},
	{Name: "zoo licence fails", Zoo: true, Program: "tclsh", Package: "tcl", Argv: []string{"sh", "zoo/licence.sh"},
		Env:       []string{"ZOO_LICENSE_WAIT=1", "ZOO_LICENSE_FAIL=1"},
		Expect:    map[string]string{"start": "fails: Failed to check out license 'Zoo_Impl_System': 4 of 4 licenses in use; the request was queued", "*": "not_run"},
		Behaviour: "licence checkout that fails: \"Failed to check out license ... queued\", exit 1",
		Prevents:  "it never serves: the runner gives up (exit 4) quoting the tool's lines"},
	{Name: "zoo banner", Zoo: true, Program: "tclsh", Package: "tcl", Argv: []string{"tclsh", "zoo/banner.tcl"}, Serves: true, Cancel: "restarted",
		Behaviour: "a banner of 10,000 lines before its first prompt"},
	{Name: "zoo stderr", Zoo: true, Program: "tclsh", Package: "tcl", Argv: []string{"tclsh", "zoo/stderr.tcl"}, Serves: true, Cancel: "restarted",
		Behaviour: "prompt and errors on stderr, results on stdout, interleaved"},
	{Name: "zoo echo_input", Zoo: true, Program: "tclsh", Package: "tcl", Argv: []string{"tclsh", "zoo/echo_input.tcl"}, Serves: true, Cancel: "restarted",
		Behaviour: "prints every line it reads after its prompt"},
	{Name: "zoo echo_on", Zoo: true, Program: "tclsh", Package: "tcl", Argv: []string{"tclsh", "zoo/echo_on.tcl"}, Serves: true, Cancel: "restarted",
		Behaviour: "turns the terminal's echo back on before every prompt (readline)",
		Prevents: "a `--secret` send is refused (`refused_echo`) whenever it comes while the echo is on: the tool turns it on " +
			"before each prompt, which may come after the runner restored the terminal's modes for the next command",
		Replaced: map[string]string{
			"interactive": "its secret send is refused (refused_echo) when the tool turned the echo on after the runner restored the modes: a race the tool starts",
		}},
	{Name: "zoo ctrlc_ask", Zoo: true, Program: "expect", Package: "expect", Argv: []string{"expect", "zoo/ctrlc_ask.exp"}, Serves: true, Cancel: "terminated",
		Expect:    map[string]string{"cancel": "holds: Interrupt: abort the current command? (y/n)"},
		Behaviour: "Ctrl-C asks \"Interrupt: abort the current command? (y/n)\" and waits; a second Ctrl-C kills it",
		Prevents: "a Ctrl-C cancel: the runner's resync lines are read as answers (not y), so the tool goes on, " +
			"is terminated after `--resync-wait` and restarted (its state lost; the output keeps the question). " +
			"Cancel with `cancel_policy` `terminate_tool` (the same end, at once), or keep the state with " +
			"`master signal ID INT` then `master send ID y`",
		Replaced: map[string]string{
			"cancel":   "a Ctrl-C cancel's output holds the tool's question and its answers to the runner's resync lines",
			"outcomes": "a Ctrl-C cancel's output holds the tool's question and its answers to the runner's resync lines",
		}},
	{Name: "zoo jobserver", Zoo: true, Program: "tclsh", Package: "tcl", Argv: []string{"sh", "zoo/jobserver.sh"},
		Env: []string{"ZOO_JOBSERVER_LIFE=300"}, Serves: true, Cancel: "restarted",
		Behaviour: "starts a job server in a session of its own that keeps the terminal open after the tool exits",
		Prevents:  "nothing the runner serves; the job server outlives the tool and the runner (it left the tool's session): stop it yourself"},
}

// All is Real then Shells.
func All() []Tool { return append(append([]Tool{}, Real...), Shells...) }

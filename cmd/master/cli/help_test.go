package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/skillpilot/skillpilot/internal/testenv"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
)

// Every command master's did-you-mean can suggest exists, and its --help
// starts with its usage line, on stdout, exit 0.
func TestEveryCommandHasHelp(t *testing.T) {
	t.Setenv(MCPEnv, testenv.BuildBinary(t, testenv.MasterMCP)) // master mcp --help is master-mcp's.
	for _, name := range names(verbs) {
		if name == "help" || name == "version" {
			continue
		}
		var out, errb bytes.Buffer
		rc := Main([]string{name, "--help"}, strings.NewReader(""), &out, &errb)
		if rc != master.ExitOK || !strings.HasPrefix(out.String(), "usage: master "+name) || errb.Len() > 0 {
			t.Errorf("%s --help: rc %d, stdout %.60q, stderr %q", name, rc, out.String(), errb.String())
		}
	}
	for _, name := range names(poolVerbs) {
		var out, errb bytes.Buffer
		rc := Main([]string{"pool", name, "--help"}, strings.NewReader(""), &out, &errb)
		if rc != master.ExitOK || !strings.HasPrefix(out.String(), "usage: master pool "+name+" [flags] --pool DIR") ||
			!strings.Contains(out.String(), "\nFlags:\n") {
			t.Errorf("pool %s --help: rc %d, stdout %q", name, rc, out.String())
		}
	}
}

// The flag sets built by hand take flags after the arguments, and "--"
// ends the flags; launch and pool start leave a tool's flags to the tool.
func TestParseInterspersed(t *testing.T) {
	c := &cli{stdout: &trackWriter{w: &bytes.Buffer{}}, stderr: &bytes.Buffer{}}
	c.verb = "x"
	fs, session := c.flags()
	n := fs.Int("n", 0, "")
	if err := c.parse(fs, []string{"a", "--n", "3", "b", "--session=S", "--", "--n", "c"}); err != nil {
		t.Fatal(err)
	}
	if *n != 3 || *session != "S" || !slices.Equal(fs.Args(), []string{"a", "b", "--n", "c"}) {
		t.Fatalf("n %d session %q args %q", *n, *session, fs.Args())
	}
	fs2, _ := c.flags()
	v := fs2.Bool("v", false, "")
	if err := c.parseTool(fs2, []string{"-v", "tclsh", "-v"}); err != nil {
		t.Fatal(err)
	}
	if !*v || !slices.Equal(fs2.Args(), []string{"tclsh", "-v"}) {
		t.Fatalf("tool args %q", fs2.Args())
	}
}

// A mistyped flag names the flag meant; an unknown one without a near
// name says only what the flag package says.
func TestFlagErrSuggests(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.Bool("wait", false, "")
	fs.String("session", "", "")
	for arg, want := range map[string]string{
		"--wiat":   "flag provided but not defined: -wiat (did you mean --wait?)",
		"-sesion":  "flag provided but not defined: -sesion (did you mean --session?)",
		"--zzzzzz": "flag provided but not defined: -zzzzzz",
	} {
		fs.SetOutput(&bytes.Buffer{})
		err := fs.Parse([]string{arg})
		if got := flagErr(fs, err); got != want {
			t.Errorf("%s: %q, want %q", arg, got, want)
		}
	}
}

// Completion candidates: commands, flags, pool subcommands, signals.
func TestCompletions(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		words []string
		want  []string
	}{
		{[]string{"wi"}, []string{"withdraw"}},
		{[]string{"--json", "wa"}, []string{"wait", "waitfor"}},
		{[]string{"help", "st"}, []string{"stop", "status", "standin"}},
		{[]string{"completion", ""}, []string{"bash", "zsh", "fish"}},
		{[]string{"pool", "gr"}, []string{"grow"}},
		{[]string{"pool", "shrink", "--t"}, []string{"--to"}},
		{[]string{"tail", "--from-"}, []string{"--from-start"}},
		{[]string{"signal", "x", "H"}, []string{"HUP"}},
		{[]string{"signal", "x", "T"}, []string{"TSTP", "TERM"}}, // Every signal master signal sends.
		{[]string{"signal", "x", "K"}, []string{"KILL"}},
		{[]string{"help", "pool", "sh"}, []string{"shrink"}},
		{[]string{"status", ""}, nil},
	} {
		if got := completions(ctx, c.words); !slices.Equal(got, c.want) {
			t.Errorf("%q: %q, want %q", c.words, got, c.want)
		}
	}
}

// `master --help` and docs/shell.md show a --json error as the CLI prints
// it: code, message and context (a usage error names its command).
func TestJSONErrorShapeDocumented(t *testing.T) {
	var out, errb bytes.Buffer
	if rc := Main([]string{"status", "--json", "--bogus"}, strings.NewReader(""), &out, &errb); rc != master.ExitUsage {
		t.Fatalf("rc %d", rc)
	}
	var doc struct {
		Error map[string]any `json:"error"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"code", "message", "context"} {
		if _, ok := doc.Error[k]; !ok {
			t.Errorf("a --json usage error has no %s: %s", k, out.String())
		}
	}
	const shape = `"error":{"code","message","context"}`
	out.Reset()
	Main([]string{"--help"}, strings.NewReader(""), &out, &errb)
	if !strings.Contains(out.String(), shape) {
		t.Errorf("master --help does not show %s", shape)
	}
	guide, err := os.ReadFile("../../../docs/shell.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(guide), shape) {
		t.Errorf("docs/shell.md does not show %s", shape)
	}
}

// TestHelpHelp: master help help (and help --help) say what help does, exit
// 0, no did-you-mean.
func TestHelpHelp(t *testing.T) {
	for _, args := range [][]string{{"help", "help"}, {"help", "--help"}} {
		var out, errb bytes.Buffer
		rc := Main(args, strings.NewReader(""), &out, &errb)
		if rc != master.ExitOK || !strings.HasPrefix(out.String(), "usage: master help [COMMAND [SUBCOMMAND]]") || errb.Len() > 0 {
			t.Errorf("%q: rc %d, stdout %q, stderr %q", args, rc, out.String(), errb.String())
		}
	}
}

// The overviews (master --help, master pool --help) are made from the
// command tables (commands.go, poolTable); they print as they were
// written by hand before, held by testdata/*.golden.
func TestOverviewsFromTables(t *testing.T) {
	for _, c := range []struct {
		args   []string
		golden string
	}{
		{[]string{"--help"}, "testdata/help.golden"},
		{[]string{"pool", "--help"}, "testdata/pool_help.golden"},
	} {
		want, err := os.ReadFile(c.golden)
		if err != nil {
			t.Fatal(err)
		}
		var out, errb bytes.Buffer
		if rc := Main(c.args, strings.NewReader(""), &out, &errb); rc != master.ExitOK || out.String() != string(want) {
			t.Errorf("%q: rc %d, stdout differs from %s:\n%s", c.args, rc, c.golden, out.String())
		}
	}
	for _, v := range verbs {
		listed := strings.Contains(cliUsage()+moreUsage(), "\n  "+v.name+" ")
		if listed != (v.list < listNone) {
			t.Errorf("%s: listed in master --help %v, list %d", v.name, listed, v.list)
		}
	}
}

// flagSets are the flag sets of every command of the tables (verbs and
// poolVerbs) with flags, by name ("submit", "pool heal"), as the dispatch
// builds them.
func flagSets(t *testing.T) map[string]*flag.FlagSet {
	t.Helper()
	sets := map[string]*flag.FlagSet{}
	for _, v := range verbs {
		if v.flags == nil {
			continue
		}
		c := &cli{stdout: &trackWriter{w: &bytes.Buffer{}}, stderr: &bytes.Buffer{}, verb: v.name}
		cmd, _ := c.build(&v)
		sets[v.name] = cmd.FlagSet
	}
	for _, v := range poolVerbs {
		c := &cli{stdout: &trackWriter{w: &bytes.Buffer{}}, stderr: &bytes.Buffer{}, verb: "pool " + v.name}
		cmd, _ := c.build(&v)
		sets[c.verb] = cmd.FlagSet
	}
	return sets
}

// Every duration flag of every command takes plain seconds, as master
// --help says (pool's and launch's took only Go durations: `pool heal
// --every 30` was a parse error).
func TestEveryDurationTakesSeconds(t *testing.T) {
	n := 0
	for name, fs := range flagSets(t) {
		fs.VisitAll(func(f *flag.Flag) {
			if kind, _ := flag.UnquoteUsage(f); kind != "duration" {
				return
			}
			n++
			if err := f.Value.Set("30"); err != nil || f.Value.String() != "30s" {
				t.Errorf("%s --%s 30: %v, %s", name, f.Name, err, f.Value)
			}
			if err := f.Value.Set("1.5"); err != nil || f.Value.String() != "1.5s" {
				t.Errorf("%s --%s 1.5: %v, %s", name, f.Name, err, f.Value)
			}
		})
	}
	if n < 30 {
		t.Errorf("only %d duration flags found", n)
	}
}

// --pool's default is $SP_POOL_DIR, resolved after the parse as --session's
// is: the help names it once (it printed (default $SP_POOL_DIR) (default
// "/x/y") when set), and a pool subcommand still opens it; --pool wins.
func TestPoolDefaultOnce(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("SP_POOL_DIR", dir+"/envpool")
	var out, errb bytes.Buffer
	if rc := Main([]string{"pool", "heal", "--help"}, strings.NewReader(""), &out, &errb); rc != master.ExitOK {
		t.Fatalf("rc %d, stderr %q", rc, errb.String())
	}
	if !strings.Contains(out.String(), "\tpool directory (default $SP_POOL_DIR)\n") || strings.Contains(out.String(), "envpool") {
		t.Errorf("pool heal --help with $SP_POOL_DIR set:\n%s", out.String())
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"pool", "status"}, dir + "/envpool is not a pool"},
		{[]string{"pool", "status", "--pool", dir + "/flagpool"}, dir + "/flagpool is not a pool"},
	} {
		out.Reset()
		errb.Reset()
		if rc := Main(c.args, strings.NewReader(""), &out, &errb); rc != master.ExitNoRunner || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%q: rc %d, stderr %q, want %q", c.args, rc, errb.String(), c.want)
		}
	}
}

// --json says the same words for every command that prints only JSON
// with it (pool's said "print JSON only on stdout"); diff's --json is
// another thing (the comparison as one document).
func TestJSONFlagOneWording(t *testing.T) {
	for name, fs := range flagSets(t) {
		f := fs.Lookup("json")
		switch {
		case name == "diff", f == nil: // report and standin write files, or HTML.
		case f.Usage != "print only JSON on stdout":
			t.Errorf("%s --json: %q", name, f.Usage)
		}
	}
}

// Completion reads which flags take a value from the command's flag set
// (takesValue), so a cmd_id is offered after a flag's value and a flag
// added to a command is known at once (the list was written by hand).
func TestCompletionFlagValues(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, protocol.DirQueue), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, protocol.DirQueue, protocol.CommandName(1, "c1")), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ids := []string{"c1"}
	for _, c := range []struct {
		words []string
		want  []string
	}{
		{[]string{"--session", dir, "wait", "--wait-timeout", "5", "--timeout", "5", "--wait-for-runner", "1", ""}, ids},
		{[]string{"wait", "--session", dir, "--no-value", "--cancel-on-interrupt", ""}, ids},
		{[]string{"wait", "--session", dir, "--no-value", "c1", ""}, nil}, // --no-value takes no value: c1 is the CMD_ID.
		{[]string{"output", "--session", dir, "--offset", "3", "--length", "4", ""}, ids},
		{[]string{"send", "--session", dir, "--expect", "x", "--expect-from", "1", "--expect-timeout", "2", "--file", "f", "--secret", "--no-newline", ""}, ids},
		{[]string{"cancel", "--session=" + dir, "--json", ""}, ids},
		{[]string{"signal", "--wait-timeout", "3", "x", "K"}, []string{"KILL"}},
		{[]string{"signal", "--json", "x", "K"}, []string{"KILL"}},
	} {
		if got := completions(ctx, c.words); !slices.Equal(got, c.want) {
			t.Errorf("%q: %q, want %q", c.words, got, c.want)
		}
	}
	v := find(verbs, "wait")
	flags := v.flags
	t.Cleanup(func() { v.flags = flags })
	v.flags = func(cmd *command) runFunc {
		cmd.String("new-flag", "", "a flag the hand-written list did not know")
		return flags(cmd)
	}
	words := []string{"wait", "--session", dir, "--new-flag", "v", ""}
	if got := completions(ctx, words); !slices.Equal(got, ids) {
		t.Errorf("%q: %q, want %q", words, got, ids)
	}
}

package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/skillpilot/skillpilot/internal/flaghelp"
	"github.com/skillpilot/skillpilot/master"
)

// command is one CLI command's flag set with the flags every command has.
type command struct {
	*flag.FlagSet
	c             *cli
	name, args    string // name and synopsis of its arguments, for --help
	about         string
	session       string
	waitForRunner time.Duration
	pool          string // A pool subcommand's --pool (newPoolCommand).
}

// newCommand starts the flags of the command being run (c.verb), whose
// --help shows args and about: --session and --json always;
// --wait-for-runner when it waits.
func (c *cli) newCommand(args, about string, waits bool) *command {
	name := c.verb
	fs := flag.NewFlagSet("master "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // Usage and errors are printed by parse.
	cmd := &command{FlagSet: fs, c: c, name: name, args: args, about: about}
	fs.StringVar(&cmd.session, "session", "", "session directory (default: $SP_SESSION_DIR)")
	fs.BoolVar(&c.json, "json", false, "print only JSON on stdout")
	if waits {
		cmd.Duration(&cmd.waitForRunner, "wait-for-runner", 0, "how long to wait without a live runner before failing with exit 5 (default 10s)")
	}
	return cmd
}

// Duration defines a duration flag that also takes plain seconds.
func (cmd *command) Duration(p *time.Duration, name string, value time.Duration, usage string) {
	durationVar(cmd.FlagSet, p, name, value, usage)
}

// durationVar defines a duration flag that also takes plain seconds on fs:
// every duration flag of master is one (master --help says durations may
// be plain seconds), never the flag package's Duration.
func durationVar(fs *flag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fs.Var((*durationFlag)(p), name, usage+" (a `duration` such as 1.5s or 2m, or plain seconds)")
}

// durationFlag is a Go duration ("1.5s", "2m") or a number of seconds.
type durationFlag time.Duration

func (d *durationFlag) String() string { return time.Duration(*d).String() }

func (d *durationFlag) Set(s string) error {
	if v, ok, err := flaghelp.Seconds(s); ok {
		if err == nil {
			*d = durationFlag(v)
		}
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is not a duration: use seconds (30) or a Go duration (1.5s, 2m, 1h)", s)
	}
	*d = durationFlag(v)
	return nil
}

// Decimal64 defines an int64 flag written into a session file as a JSON
// number: decimal digits only (the flag package's Int64 also takes 0x10
// as 16 and 010 as 8, which JSON and the other masters read as neither;
// PROTOCOL.md 19.1, "Numbers").
func (cmd *command) Decimal64(name string, value int64, usage string) *int64 {
	p := new(int64)
	*p = value
	cmd.Var((*decimalFlag)(p), name, usage)
	return p
}

// decimalFlag is an int64 in decimal: an optional sign, digits without a
// leading zero (010 is 8 to Tcl and C, 10 to Go: refused, as every
// master refuses it).
type decimalFlag int64

func (d *decimalFlag) String() string { return strconv.FormatInt(int64(*d), 10) }

func (d *decimalFlag) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if digits := strings.TrimLeft(s, "+-"); err != nil || len(digits) > 1 && digits[0] == '0' {
		return fmt.Errorf("%q is not a decimal integer (digits, no leading zero)", s)
	}
	*d = decimalFlag(n)
	return nil
}

// parse parses args, flags before and after the positional arguments
// ("--" ends the flags), and resolves --session from $SP_SESSION_DIR. -h
// prints the command's help on stdout and ends it with exit 0.
func (cmd *command) parse(args []string) ([]string, error) {
	var pos []string
	for {
		err := cmd.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			cmd.usage(cmd.c.stdout)
			return nil, exitOnly(master.ExitOK)
		}
		if err != nil {
			return nil, usageErr("master %s: %s (see 'master %s --help')", cmd.name, flagErr(cmd.FlagSet, err), cmd.name)
		}
		rest := cmd.Args()
		if len(rest) == 0 {
			break
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
	if cmd.session == "" {
		cmd.session = os.Getenv("SP_SESSION_DIR")
	}
	return pos, nil
}

func (cmd *command) usage(w io.Writer) { printHelp(w, cmd.FlagSet, cmd.name, cmd.args, cmd.about) }

// open opens the command's session.
func (cmd *command) open() (*master.Session, error) {
	if cmd.session == "" {
		return nil, usageErr("--session is required (or set SP_SESSION_DIR)")
	}
	s, err := master.Open(cmd.session)
	if err == nil {
		s.WaitForRunner = cmd.waitForRunner
		// One wait, then exit: poll before paying for inotify (see
		// Session.QuickPoll).
		s.QuickPoll = 50 * time.Millisecond
	}
	return s, err
}

// trackWriter remembers the last byte written, so that diagnostics can
// start on a line of their own. It is safe for concurrent use.
type trackWriter struct {
	mu   sync.Mutex
	w    io.Writer
	last byte
	n    int64
}

func (t *trackWriter) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n, err := t.w.Write(b)
	if n > 0 {
		t.last, t.n = b[n-1], t.n+int64(n)
	}
	return n, err
}

// partial reports an unfinished last line.
func (t *trackWriter) partial() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n > 0 && t.last != '\n'
}

// endLine records that the terminal's line was ended by someone else.
func (t *trackWriter) endLine() {
	t.mu.Lock()
	t.last = '\n'
	t.mu.Unlock()
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// flagSet starts a flag set built by hand (commands that do not use
// newCommand) for the command being run (c.verb).
func (c *cli) flagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("master "+c.verb, flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	return fs
}

// flags starts a flag set built by hand with --session (resolved from
// $SP_SESSION_DIR by parse, so that the help shows a clean default) and
// --json.
func (c *cli) flags() (*flag.FlagSet, *string) {
	fs := c.flagSet()
	return fs, c.sessionFlags(fs)
}

// sessionFlags declares --session and --json on fs, a flag set built by
// hand, and returns --session's value.
func (c *cli) sessionFlags(fs *flag.FlagSet) *string {
	session := fs.String("session", "", "session directory (default: $SP_SESSION_DIR)")
	fs.BoolVar(&c.json, "json", false, "print only JSON on stdout")
	return session
}

// parse parses a flag set built by hand, flags before and after the
// arguments ("--" ends the flags; fs.Args() then holds the arguments): -h
// prints its help on stdout (its own Usage, or its flags) and ends with
// exit 0; an error is a usage error, naming the flag probably meant. An
// empty --session takes $SP_SESSION_DIR.
func (c *cli) parse(fs *flag.FlagSet, args []string) error {
	return c.parseFlags(fs, args, true)
}

// parseTool is parse for a command whose arguments are a tool's command
// line (launch, pool start): the flags end at the first argument, so the
// tool's own flags are left to it.
func (c *cli) parseTool(fs *flag.FlagSet, args []string) error {
	return c.parseFlags(fs, args, false)
}

func (c *cli) parseFlags(fs *flag.FlagSet, args []string, interspersed bool) error {
	usage, out := fs.Usage, fs.Output()
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	var pos []string
	err := fs.Parse(args)
	for interspersed && err == nil && fs.NArg() > 0 {
		rest := fs.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos, args = append(pos, rest[0]), rest[1:]
		err = fs.Parse(args)
	}
	if interspersed && err == nil {
		_ = fs.Parse(append([]string{"--"}, pos...)) // fs.Args() is now every argument; flags keep their values.
	}
	fs.Usage = usage
	fs.SetOutput(out)
	if errors.Is(err, flag.ErrHelp) {
		stderr := c.stderr
		c.stderr = c.stdout // A Usage that prints to c.stderr prints to stdout.
		fs.SetOutput(c.stdout)
		usage() // NewFlagSet's default prints the flags to Output().
		c.stderr = stderr
		fs.SetOutput(out)
		return exitOnly(master.ExitOK)
	}
	if err != nil {
		return usageErr("%s: %s (see '%s --help')", fs.Name(), flagErr(fs, err), fs.Name())
	}
	if f := fs.Lookup("session"); f != nil && f.Value.String() == "" {
		_ = f.Value.Set(os.Getenv("SP_SESSION_DIR")) // A string flag accepts any value.
	}
	return nil
}

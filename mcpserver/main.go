package mcpserver

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/skillpilot/skillpilot/internal/flaghelp"
	"github.com/skillpilot/skillpilot/internal/sessionio"
	"github.com/skillpilot/skillpilot/internal/suggest"
	"github.com/skillpilot/skillpilot/internal/version"
	"github.com/skillpilot/skillpilot/master"
)

// Usage is the help line of `master mcp`.
const Usage = `--session DIR | --pool DIR [--read-only] [--allow RE]... [--deny RE]... [--preview-bytes N] [--max-read N] [--max-wait D] [--default-wait D]
          serve the session (or a pool of sessions) to AI agents: a Model Context Protocol server on stdin/stdout`

type regexps []*regexp.Regexp

func (r *regexps) String() string {
	var s []string
	for _, re := range *r {
		s = append(s, re.String())
	}
	return strings.Join(s, " ")
}

func (r *regexps) Set(v string) error {
	re, err := regexp.Compile(v)
	if err != nil {
		return err
	}
	*r = append(*r, re)
	return nil
}

// options are master mcp's flags once parsed (newFlags).
type options struct {
	cfg            Config
	allow, deny    regexps
	quiet, version bool
}

// Flags is master mcp's flag set, as Main parses it: the reference pages
// list it (internal/refdoc).
func Flags() *flag.FlagSet {
	fs, _ := newFlags()
	return fs
}

// newFlags is master mcp's flag set and where it puts the values. The
// help goes to stdout and errors to stderr, both printed by Main.
func newFlags() (*flag.FlagSet, *options) {
	fs := flag.NewFlagSet("master mcp", flag.ContinueOnError)
	o := &options{}
	cfg := &o.cfg
	fs.StringVar(&cfg.Session, "session", "", "session directory (default $SP_SESSION_DIR unless --pool)")
	fs.StringVar(&cfg.Pool, "pool", "", "a directory of session directories; calls name one with their session argument")
	fs.BoolVar(&cfg.ReadOnly, "read-only", false, "offer only status, read_output, wait_for and tail; calls to the others are refused with a tool error")
	fs.Var(&o.allow, "allow", "RE2 regexp: run and submit accept only payloads matching one --allow (repeatable)")
	fs.Var(&o.deny, "deny", "RE2 regexp: run and submit refuse payloads matching any --deny (repeatable; checked before --allow)")
	fs.IntVar(&cfg.PreviewBytes, "preview-bytes", DefaultPreviewBytes, "byte budget of the output shown inline per call (head + tail)")
	fs.IntVar(&cfg.MaxRead, "max-read", DefaultMaxRead, "largest byte range read_output and tail return")
	fs.DurationVar(&cfg.MaxWait, "max-wait", DefaultMaxWait, "ceiling on how long one call may block (a wait_timeout_s above it is cut to it)")
	fs.DurationVar(&cfg.DefaultWait, "default-wait", DefaultDefaultWait, "how long a call blocks when it gives no wait_timeout_s")
	fs.BoolVar(&o.quiet, "quiet", false, "no log line per call on stderr")
	fs.BoolVar(&o.version, "version", false, "print the version (the same as master's and runner's) and exit")
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs, o
}

// Main runs `master mcp`: an MCP server on stdin/stdout until stdin ends
// (exit 0) or ctx ends (a signal: 130 for SIGINT, 143 for SIGTERM). Logs go
// to stderr. Exit 2 for bad flags, 5 when the session is missing.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs, o := newFlags()
	cfg, quiet, showVersion := &o.cfg, &o.quiet, &o.version
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) { // The master CLI's help style: usage, what it does, flags.
			synopsis, about, _ := strings.Cut(strings.TrimRight(Usage, "\n"), "\n")
			fmt.Fprintf(stdout, "usage: master mcp %s\n\n%s\n\nFlags:\n", synopsis, strings.TrimSpace(about))
			flaghelp.PrintDefaults(stdout, fs)
			return master.ExitOK
		}
		msg := err.Error()
		if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
			var names []string
			fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
			if s := suggest.Closest(strings.TrimLeft(name, "-"), names); s != "" {
				msg += " (did you mean --" + s + "?)"
			}
		}
		fmt.Fprintf(stderr, "master mcp: %s (see 'master mcp --help')\n", msg)
		return master.ExitUsage
	}
	if *showVersion {
		fmt.Fprintln(stdout, version.String("master-mcp"))
		return master.ExitOK
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "master mcp: unexpected arguments %q\n", fs.Args())
		return master.ExitUsage
	}
	if cfg.Session == "" && cfg.Pool == "" {
		cfg.Session = os.Getenv("SP_SESSION_DIR")
	}
	if cfg.Session != "" && cfg.Pool != "" || cfg.Session == "" && cfg.Pool == "" {
		fmt.Fprintln(stderr, "master mcp: give exactly one of --session DIR and --pool DIR")
		return master.ExitUsage
	}
	if cfg.PreviewBytes < 16 || cfg.MaxRead < 1 || cfg.MaxWait <= 0 || cfg.DefaultWait <= 0 {
		fmt.Fprintln(stderr, "master mcp: --preview-bytes must be at least 16, --max-read, --max-wait and --default-wait positive")
		return master.ExitUsage
	}
	cfg.Allow, cfg.Deny = o.allow, o.deny
	if !*quiet {
		cfg.Logger = slog.New(slog.NewTextHandler(stderr, nil))
	}
	srv, err := New(*cfg)
	if err != nil {
		fmt.Fprintf(stderr, "master mcp: %v\n", err)
		_, code := master.Classify(err)
		return code
	}
	// Requests read before stdin ends are all answered before the server
	// ends (drain.go).
	d := newDrain(ctx, stdin, stdout)
	err = srv.Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(d), Writer: nopCloser{d}})
	switch {
	case ctx.Err() != nil:
		if ie := (*sessionio.InterruptedError)(nil); errors.As(context.Cause(ctx), &ie) && ie.Signal == syscall.SIGINT {
			return master.ExitSIGINT
		}
		return master.ExitSIGTERM
	case err != nil && !errors.Is(err, io.EOF):
		fmt.Fprintf(stderr, "master mcp: %v\n", err)
		return master.ExitIO
	}
	return master.ExitOK
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

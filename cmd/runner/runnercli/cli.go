// Package runnercli is the runner's command line (cmd/runner): flags,
// exit codes, profiling and signals around the runner library, and the
// --metrics-file writer (runner/promfile) wired to it. It is a package of
// its own so that tests can run the command in-process.
package runnercli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/skillpilot/skillpilot/internal/clidoc"
	"github.com/skillpilot/skillpilot/internal/flaghelp"
	"github.com/skillpilot/skillpilot/internal/suggest"
	"github.com/skillpilot/skillpilot/internal/version"
	"github.com/skillpilot/skillpilot/protocol"
	"github.com/skillpilot/skillpilot/runner"
	"github.com/skillpilot/skillpilot/runner/promfile"
)

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// synopsis and about are what runner --help prints above the exit codes
// and the flags, and what its reference pages say (Reference).
const (
	synopsis = "[--session DIR] [flags] [-- TOOL ARGS...]"
	about    = `Holds one interactive tool (default: tclsh) on a PTY and runs the commands
written as cmd_<seq>_<cmd_id>.json files into DIR/queue/, one at a time in
seq order, writing DIR/result/ and DIR/output/. See PROTOCOL.md.

DIR defaults to $SP_SESSION_DIR. The runner creates DIR itself if it is
missing (its parent must exist) and the layout inside it.`
)

// exitCodes are the runner's exit codes and what each means: --help and
// the reference list them from here (TestExitCodesListed keeps every
// runner.Exit constant in it).
var exitCodes = []clidoc.Exit{
	{Code: ExitOK, Meaning: "stopped cleanly"},
	{Code: ExitError, Meaning: "error (including a session directory it refuses)"},
	{Code: ExitUsage, Meaning: "usage (a bad flag or --driver file, a tool that cannot be run: missing, not on $PATH, not executable)"},
	{Code: ExitLocked, Meaning: "another runner holds the session"},
	{Code: ExitGaveUp, Meaning: "gave up: the tool failed to start more than --max-restarts times within --restart-window, or two starts in a row were rejected the same way"},
	{Code: ExitLost, Meaning: "the session was taken away while it ran (its directory deleted, renamed or replaced, or its lock held by another process): it stopped, with its tool"},
}

// usage is what runner --help prints before the flags.
func usage() string {
	return "usage: runner " + synopsis + "\n       runner check [flags] [-- TOOL ARGS...]   (what holds on a tool: runner check --help)\n\n" + about + "\n\nExit codes:\n" +
		clidoc.ExitTable(exitCodes, 78) + "\nFlags:\n"
}

// Exit codes of the runner command.
const (
	ExitOK     = runner.ExitOK
	ExitError  = runner.ExitError
	ExitUsage  = runner.ExitUsage
	ExitLocked = runner.ExitLocked
	ExitGaveUp = runner.ExitGaveUp
	ExitLost   = runner.ExitLost
)

// Main runs the runner command line and returns its exit code. Help and
// --version go to stdout; everything else to stderr. Nothing is created on
// disk before the flags are known to be good (the session, the layout),
// and the session is released on every path that opened it.
func Main(args []string, stdout, stderr io.Writer) int {
	fs, o := newFlags()
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "-h" || a == "-help" || a == "--help" {
			fmt.Fprint(stdout, usage())
			flaghelp.PrintDefaults(stdout, fs)
			return ExitOK
		}
	}
	if err := fs.Parse(args); err != nil {
		return flagError(stderr, fs, err)
	}
	cfg, kind, logLevel, metricsFile, maxRestarts := o.cfg, o.kind, o.logLevel, o.metricsFile, o.maxRestarts
	driverFile, logFile, cpuProfile := &o.driverFile, &o.logFile, &o.cpuProfile
	if o.version {
		fmt.Fprintln(stdout, versionString())
		return ExitOK
	}
	if cfg.Session == "" {
		cfg.Session = os.Getenv("SP_SESSION_DIR")
	}
	cfg.PruneGrace = o.pruneGrace
	if cfg.PruneGrace == 0 {
		cfg.PruneGrace = -1 // Config's zero means the default; the flag's 0 means none.
	}
	cfg.MaxRestarts = maxRestarts
	if maxRestarts == 0 {
		cfg.MaxRestarts = -1 // Config's zero means the default.
	}
	cfg.Kind, cfg.Tool, cfg.Init = protocol.Kind(kind), fs.Args(), o.inits
	if *driverFile != "" {
		d, err := readDriver(*driverFile)
		if err != nil {
			fmt.Fprintf(stderr, "runner: --driver: %v\n", err)
			return ExitUsage
		}
		cfg.Driver = d
		if kind == string(protocol.KindTcl) {
			cfg.Kind = protocol.Kind(d.Kind) // --kind left at its default
		}
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(logLevel)); err != nil {
		fmt.Fprintf(stderr, "runner: --log-level: %v\n", err)
		return ExitUsage
	}
	logTo := stderr
	if *logFile != "" {
		f, err := openLogFile(*logFile, cfg.Session)
		if err != nil {
			fmt.Fprintf(stderr, "runner: --log: %v\n", err)
			return ExitUsage
		}
		defer f.Close()
		logTo = f
	}
	cfg.Logger = slog.New(slog.NewTextHandler(logTo, &slog.HandlerOptions{Level: level}))
	if cfg.Session == "" {
		fmt.Fprintln(stderr, "runner: --session is required (or set SP_SESSION_DIR); see 'runner --help'")
		return ExitUsage
	}
	if o.cwd != "" {
		if err := enterDir(o.cwd, &cfg, &metricsFile, cpuProfile); err != nil {
			fmt.Fprintf(stderr, "runner: --cwd: %v\n", err)
			return ExitUsage
		}
	}
	// What Open would refuse, the tool and the metrics file's directory
	// are checked before Open creates the session and its layout.
	if err := cfg.Check(); err != nil {
		return openErr(stderr, err)
	}
	if err := checkTool(cfg.Tool, cfg.Kind, cfg.Driver); err != nil {
		printErr(stderr, err)
		return ExitUsage
	}
	if metricsFile != "" {
		w, err := promfile.New(metricsFile, cfg.Logger)
		if err != nil {
			return openErr(stderr, err)
		}
		cfg.Observer = w
	}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)
	r, err := runner.Open(cfg)
	if err != nil {
		return openErr(stderr, err)
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			r.Close()
			printErr(stderr, err)
			return ExitUsage
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			r.Close()
			f.Close()
			printErr(stderr, err)
			return ExitError
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	if err := r.Run(context.Background(), sigs); err != nil {
		printErr(stderr, err)
		if errors.Is(err, runner.ErrGaveUp) {
			return ExitGaveUp
		}
		if errors.Is(err, runner.ErrSessionLost) {
			return ExitLost
		}
		return ExitError
	}
	return ExitOK
}

// options are the runner's flags once parsed (newFlags).
type options struct {
	cfg                                     runner.Config
	kind, logLevel, metricsFile, driverFile string
	logFile, cpuProfile, cwd                string
	inits                                   stringList
	maxRestarts                             int
	pruneGrace                              time.Duration
	version                                 bool
}

// newFlags is the runner's flag set: Main parses it, --help prints it and
// Reference lists it, so the three cannot differ. A usage error is one
// line and a pointer to --help (flagError), not the flag package's dump.
func newFlags() (*flag.FlagSet, *options) {
	fs := flag.NewFlagSet("runner", flag.ContinueOnError)
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	o := &options{}
	cfg := &o.cfg
	fs.StringVar(&cfg.Session, "session", "", "the session directory `DIR` (default $SP_SESSION_DIR); created if missing (its parent must exist)")
	fs.StringVar(&o.kind, "kind", "tcl", "tool `KIND`: tcl (payloads evaluated at the global level under catch), sh (payloads run with .), or a built-in driver: "+strings.Join(runner.Presets(), ", ")+" (docs/drivers.md)")
	fs.StringVar(&o.driverFile, "driver", "", "drive a line-oriented shell described by the JSON `FILE` (print, source, error, prompt; PROTOCOL.md 11.1); its kind is the file's")
	fs.BoolVar(&cfg.TclInteractive, "tcl-interactive", false, "kind tcl: run payloads with the tool's tcl_interactive as it is, so that a word naming no command may run a program of that name (as typed at an interactive prompt); default: tcl_interactive is 0 while a payload runs, and such a word is an error, as in a script")
	fs.BoolVar(&cfg.PassControl, "pass-control-bytes", false, "a driver without a source command (payloads typed line by line into the terminal): pass payloads holding control characters other than tab and newline (^C, ^D, ^Z act on the tool there); default: such a payload gets an invalid_request result naming the byte")
	durationVar(fs, &cfg.Heartbeat, "heartbeat", time.Second, "how often state/heartbeat.json is rewritten")
	durationVar(fs, &cfg.Poll, "poll", 0, "rescan period of queue/ and ctl/ when idle (default 1s; 250ms on network filesystems); polling only, it is 10ms right after activity and grows back to this")
	fs.StringVar(&cfg.Watch, "watch", "auto", "how queue/ and ctl/ are watched (`MODE`): auto (inotify plus polling; polling only on network filesystems), inotify, or poll")
	fs.IntVar(&cfg.TailLines, "tail-lines", 200, "how many lines (`N`) log/last_n_lines.txt keeps")
	durationVar(fs, &cfg.DefaultTimeout, "default-timeout", 0, "timeout of commands without timeout_s (0: none)")
	fs.Int64Var(&cfg.MaxOutputBytes, "max-output-bytes", 0, "output budget in bytes (`N`) of commands without max_output_bytes: past it a command is stopped by its cancel policy and its result says output_limit, keeping the first bytes (0: none)")
	fs.Var(&o.inits, "init", "a Tcl (or the kind's) script `FILE` the tool runs after every start, before any command (repeatable); an init that fails or passes --init-timeout is a failed start, retried with backoff up to --max-restarts")
	durationVar(fs, &cfg.InitTimeout, "init-timeout", 10*time.Minute, "bound for each --init script")
	durationVar(fs, &cfg.StartTimeout, "start-timeout", time.Minute, "bound for the tool to answer its first sync after start")
	durationVar(fs, &cfg.KillGrace, "kill-grace", 3*time.Second, "time between SIGTERM and SIGKILL when terminating the tool")
	durationVar(fs, &cfg.ResyncWait, "resync-wait", 5*time.Second, "after Ctrl-C, how long the tool has to return to its prompt before it is terminated")
	durationVar(fs, &cfg.ParseGrace, "parse-grace", 2*time.Second, "how long an unparsable queue file may still be being written before it is rejected")
	fs.BoolVar(&cfg.RequireLease, "require-lease", false, "stop if no state/lease.json appears within --lease-grace")
	durationVar(fs, &cfg.LeaseGrace, "lease-grace", 30*time.Second, "see --require-lease")
	fs.BoolVar(&cfg.NoSync, "no-sync", false, "do not fsync results and events (faster; a machine crash may lose results)")
	fs.IntVar(&o.maxRestarts, "max-restarts", 5, "how many restarts (`N`) after failed starts of the tool (it died, or its start or an --init script failed, before becoming ready) within --restart-window; one more failure and the runner stops with exit code 4")
	durationVar(fs, &cfg.RestartWindow, "restart-window", 10*time.Minute, "the window --max-restarts counts failed starts in")
	fs.Var((*keepDuration)(&cfg.KeepResults), "keep-results", "retention: a command's result, output and command file leave the session once its result is older than `AGE` (7d, 36h, 90m; 0: no age limit); how to choose: docs/operations.md")
	fs.IntVar(&cfg.KeepLast, "keep-last", 0, "retention: keep the results (and outputs, command files) of at most this many (`N`) commands, the newest (0: no count limit)")
	durationVar(fs, &o.pruneGrace, "prune-grace", runner.DefaultPruneGrace, "retention: no result younger than this is ever removed, whatever else says (a master waiting for it has read it by then); 0: none")
	fs.IntVar(&cfg.KeepIDs, "keep-ids", runner.DefaultKeepIDs, "retention: how many (`N`) pruned cmd_ids log/pruned.log remembers at least (they stay refused as duplicates; it holds up to twice as many; at most 2000000; 0: the default)")
	fs.Var((*byteSize)(&cfg.MaxSpoolBytes), "max-spool-bytes", "retention: `BYTES` of log/session.out kept at most (64MiB, 1GiB); the oldest commands leave to keep under it (0: what kept commands need)")
	fs.Var((*byteSize)(&cfg.MaxMetaBytes), "max-meta-bytes", "retention: `BYTES` of log/meta.log and log/meta.log.1 together at most; the oldest commands leave to keep under it (0: meta.log is rotated at 64MiB without forcing any out)")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	fs.StringVar(&o.metricsFile, "metrics-file", "", "write Prometheus metrics (text format, atomically) to `FILE` on every heartbeat and result, e.g. for node_exporter's textfile collector")
	fs.StringVar(&o.logLevel, "log-level", "info", "the log `LEVEL`: debug, info, warn or error")
	fs.StringVar(&o.logFile, "log", "", "append the runner's log lines to `FILE` instead of stderr (a runner started with & then keeps the terminal quiet); errors that stop it at start still go to stderr")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile to `FILE` until the runner stops (for performance work)")
	fs.StringVar(&o.cwd, "cwd", "", "the directory `DIR` the tool starts in: the runner changes to it before anything else (relative paths in the other flags keep meaning what they meant where the runner was started); default: where the runner was started. A payload's cd carries into later commands until the tool restarts")
	return fs, o
}

// enterDir makes the runner's working directory dir (--cwd), which the
// tool inherits, after making the relative paths of the other flags
// absolute where the runner was started: the session, the --init scripts,
// a tool named by a path (./tool), the metrics file and the CPU profile.
// It changes nothing when dir is not a directory it can enter.
func enterDir(dir string, cfg *runner.Config, paths ...*string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	abs := func(p *string) error {
		if *p == "" || filepath.IsAbs(*p) {
			return nil
		}
		a, err := filepath.Abs(*p)
		*p = a
		return err
	}
	todo := append([]*string{&cfg.Session}, paths...)
	for i := range cfg.Init {
		todo = append(todo, &cfg.Init[i])
	}
	if len(cfg.Tool) > 0 && strings.Contains(cfg.Tool[0], "/") {
		todo = append(todo, &cfg.Tool[0])
	}
	for _, p := range todo {
		if err := abs(p); err != nil {
			return err
		}
	}
	return os.Chdir(dir)
}

// flagError prints a flag error as one line, with the flag the user
// probably meant and where the help is, and returns ExitUsage (the
// whole help used to bury the one line that mattered).
func flagError(stderr io.Writer, fs *flag.FlagSet, err error) int {
	fmt.Fprintf(stderr, "runner: %s\n", flagErrorLine(fs, err))
	return ExitUsage
}

// flagErrorLine is a flag error with the flag the user probably meant and
// where the help is.
func flagErrorLine(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		if s := suggest.Closest(strings.TrimLeft(name, "-"), names); s != "" {
			msg += fmt.Sprintf(" (did you mean --%s?)", s)
		}
	}
	return msg + "\nrunner: see 'runner --help' for the flags"
}

// checkTool fails at once, with the reason, when the tool's program
// cannot be run: not on $PATH, missing, or not executable (a
// missing tool used to cost --max-restarts failed starts). tool empty
// is the kind's default (runner.Config).
func checkTool(tool []string, kind protocol.Kind, drv *runner.DriverSpec) error {
	if drv == nil {
		drv, _ = runner.Preset(string(kind))
	}
	if len(tool) == 0 {
		switch {
		case drv != nil && len(drv.Argv) > 0:
			tool = drv.Argv
		case drv != nil:
			return fmt.Errorf("the driver of kind %s names no tool (argv): give its command line after --", drv.Kind)
		case kind == protocol.KindSh:
			tool = []string{"bash"}
		default:
			tool = []string{"tclsh"}
		}
	}
	if tool[0] == "" {
		return errors.New("the tool's name is empty")
	}
	name := tool[0]
	if !strings.Contains(name, "/") {
		if _, err := exec.LookPath(name); err != nil {
			return fmt.Errorf("cannot run the tool: %s is not found on $PATH (give its path after --)", name)
		}
		return nil
	}
	fi, err := os.Stat(name)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("cannot run the tool: %s does not exist", name)
	case err != nil:
		return fmt.Errorf("cannot run the tool: %w", err)
	case fi.IsDir():
		return fmt.Errorf("cannot run the tool: %s is a directory", name)
	}
	if _, err := exec.LookPath(name); err != nil {
		return fmt.Errorf("cannot run the tool: %s is not executable (chmod +x)", name)
	}
	return nil
}

// openErr prints an error of the start and returns its exit code: a
// configuration that cannot work is a usage error, a session held by
// another runner has its own code, anything else is an error.
func openErr(stderr io.Writer, err error) int {
	printErr(stderr, err)
	switch {
	case errors.Is(err, runner.ErrLocked):
		return ExitLocked
	case errors.Is(err, runner.ErrConfig):
		return ExitUsage
	}
	return ExitError
}

// printErr prints err once with the program's prefix (errors of this
// package already carry it).
func printErr(w io.Writer, err error) {
	fmt.Fprintf(w, "runner: %s\n", strings.TrimPrefix(err.Error(), "runner: "))
}

func versionString() string { return version.String("runner") }

// maxDriverFile bounds a --driver file.
const maxDriverFile = 64 << 10

// readDriver reads a --driver file: a regular file (no FIFO, no device)
// of at most 64 KiB.
func readDriver(path string) (*runner.DriverSpec, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxDriverFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxDriverFile {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxDriverFile)
	}
	return runner.ParseDriver(b)
}

// Reference is the runner's reference page, made from what --help is made
// from: the synopsis, about, the flag set Main parses and exitCodes.
func Reference() clidoc.Page {
	fs, _ := newFlags()
	return clidoc.Page{
		Name:     "runner",
		Summary:  "hold one interactive tool on a PTY and serve the commands written into a session directory",
		Synopsis: []string{synopsis, "--version", "--help"},
		About:    about,
		Flags:    clidoc.Flags(fs),
		Exit:     exitCodes,
		Env:      []clidoc.Env{{Name: "SP_SESSION_DIR", Meaning: "the session directory when --session is not given"}},
		SeeAlso:  []string{"master(1)", "PROTOCOL.md", "docs/reference/runner.md", "docs/drivers.md"},
	}
}

package runner

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
)

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

const usage = `usage: runner --session DIR [flags] [-- TOOL ARGS...]

Holds one interactive tool (default: tclsh) on a PTY and runs the commands
written as cmd_<seq>_<cmd_id>.json files into DIR/queue/, one at a time in
seq order, writing DIR/result/ and DIR/output/. See PROTOCOL.md.

Exit codes: 0 stopped cleanly, 1 error, 2 usage, 3 another runner holds the
session.

Flags:
`

// Main runs the runner command line and returns its exit code.
func Main(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("runner", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg Config
	var kind, logLevel string
	var inits stringList
	fs.StringVar(&cfg.Session, "session", "", "session directory (created with the full layout, mode 0700, if missing)")
	fs.StringVar(&kind, "kind", "tcl", "tool kind: tcl (payloads run with source under catch) or sh (payloads run with .)")
	fs.DurationVar(&cfg.Heartbeat, "heartbeat", time.Second, "how often state/heartbeat.json is rewritten")
	fs.DurationVar(&cfg.Poll, "poll", 0, "rescan period of queue/ and ctl/ (default 1s; 250ms on network filesystems)")
	fs.StringVar(&cfg.Watch, "watch", "auto", "auto (inotify plus polling; polling only on network filesystems), inotify, or poll")
	fs.IntVar(&cfg.TailLines, "tail-lines", 200, "lines kept in log/last_n_lines.txt")
	fs.DurationVar(&cfg.DefaultTimeout, "default-timeout", 0, "timeout of commands without timeout_s (0: none)")
	fs.Var(&inits, "init", "script the tool runs after every start, before any command (repeatable)")
	fs.DurationVar(&cfg.InitTimeout, "init-timeout", 10*time.Minute, "bound for each --init script")
	fs.DurationVar(&cfg.StartTimeout, "start-timeout", time.Minute, "bound for the tool to answer its first sync after start")
	fs.DurationVar(&cfg.KillGrace, "kill-grace", 3*time.Second, "time between SIGTERM and SIGKILL when terminating the tool")
	fs.DurationVar(&cfg.ResyncWait, "resync-wait", 5*time.Second, "after Ctrl-C, how long the tool has to return to its prompt before it is terminated")
	fs.DurationVar(&cfg.ParseGrace, "parse-grace", 2*time.Second, "how long an unparsable queue file may still be being written before it is rejected")
	fs.BoolVar(&cfg.RequireLease, "require-lease", false, "stop if no state/lease.json appears within --lease-grace")
	fs.DurationVar(&cfg.LeaseGrace, "lease-grace", 30*time.Second, "see --require-lease")
	fs.BoolVar(&cfg.NoSync, "no-sync", false, "do not fsync results and events (faster; a machine crash may lose results)")
	fs.StringVar(&cfg.MetricsFile, "metrics-file", "", "write Prometheus metrics (text format, atomically) to this file on every heartbeat and result, e.g. for node_exporter's textfile collector")
	fs.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile to this file until the runner stops (for performance work)")
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK
		}
		return ExitUsage
	}
	cfg.Kind, cfg.Tool, cfg.Init = protocol.Kind(kind), fs.Args(), inits
	var level slog.Level
	if err := level.UnmarshalText([]byte(logLevel)); err != nil {
		fmt.Fprintf(stderr, "runner: --log-level: %v\n", err)
		return ExitUsage
	}
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if cfg.Session == "" {
		fmt.Fprintln(stderr, "runner: --session is required")
		fs.Usage()
		return ExitUsage
	}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)
	r, err := Open(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "runner: %v\n", err)
		if errors.Is(err, ErrLocked) {
			return ExitLocked
		}
		if strings.Contains(err.Error(), "unknown") {
			return ExitUsage
		}
		return ExitError
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintf(stderr, "runner: %v\n", err)
			return ExitUsage
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(stderr, "runner: %v\n", err)
			return ExitError
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	if err := r.Run(context.Background(), sigs); err != nil {
		fmt.Fprintf(stderr, "runner: %v\n", err)
		return ExitError
	}
	return ExitOK
}

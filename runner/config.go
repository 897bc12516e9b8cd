package runner

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
)

// Watch modes.
const (
	WatchAuto    = "auto"
	WatchInotify = "inotify"
	WatchPoll    = "poll"
)

// Config configures a Runner. Zero durations take the defaults in
// [Config.withDefaults].
type Config struct {
	Session string        // session directory; created with the full layout if missing
	Kind    protocol.Kind // tcl (default), sh, or a preset driver's kind (yosys, ngspice)
	// Driver, if set, drives the tool as a line-oriented shell (a
	// --driver file); Kind is then its kind. A preset's Kind sets it.
	Driver *DriverSpec
	Tool   []string // argv; empty: tclsh for tcl, bash for sh
	// TclInteractive runs kind tcl payloads with the tool's
	// tcl_interactive as it is (--tcl-interactive): a word that names no
	// command may then run a program of that name, as at an interactive
	// prompt. Off, tcl_interactive is 0 while a payload runs.
	TclInteractive bool
	// PassControl lets a payload typed line by line (a driver without
	// source) hold control characters (--pass-control-bytes); by default
	// such a payload is refused.
	PassControl bool
	Env         []string // extra environment for the tool (KEY=VALUE)

	Heartbeat      time.Duration // heartbeat period (1s)
	Poll           time.Duration // rescan period (1s locally, 250ms on network filesystems)
	Watch          string        // auto, inotify or poll
	TailLines      int           // lines kept in log/last_n_lines.txt (200)
	DefaultTimeout time.Duration // timeout of a command without timeout_s (0: none)

	// MaxOutputBytes is the output budget of a command without
	// max_output_bytes (0: none; budget.go, PROTOCOL.md 6.3).
	MaxOutputBytes int64

	Init         []string      // scripts the tool runs after every start
	InitTimeout  time.Duration // bound for each init script (10m)
	StartTimeout time.Duration // bound for the tool to answer its first sync (60s)
	KillGrace    time.Duration // SIGTERM to SIGKILL (3s)
	ResyncWait   time.Duration // after Ctrl-C, how long to wait for the prompt (5s)
	ParseGrace   time.Duration // how long an unparsable queue file may still be written (2s)

	RequireLease bool          // a missing lease stops the runner after LeaseGrace
	LeaseGrace   time.Duration // (30s)

	// MaxRestarts is how many restarts after failed starts (the tool died
	// or failed before becoming ready: start, bootstrap, init) the runner
	// makes within RestartWindow before it gives up and stops (Run returns
	// ErrGaveUp; cmd/runner exits 4). Zero means the default, 5; a negative
	// value means none. Deaths of a tool that had become ready do not count.
	MaxRestarts   int
	RestartWindow time.Duration // (10m)

	// NoSync skips fsync of results and events: faster, and a machine crash
	// may lose results. Off by default.
	NoSync bool

	// Retention (retention.go, PROTOCOL.md section 23). A command's files
	// leave the session once its result is older than KeepResults, or is
	// not among the KeepLast newest, or the spool or the event log would
	// pass MaxSpoolBytes or MaxMetaBytes; oldest first, never within
	// PruneGrace of its end. All zero: nothing is ever removed.
	KeepResults   time.Duration // 0: no age limit
	KeepLast      int           // 0: no count limit
	PruneGrace    time.Duration // 0: DefaultPruneGrace; negative: none
	KeepIDs       int           // pruned cmd_ids remembered at least (0: DefaultKeepIDs)
	MaxSpoolBytes int64         // bytes of log/session.out kept (0: what kept commands need)
	MaxMetaBytes  int64         // bytes of log/meta.log and log/meta.log.1 (0: rotated at DefaultMetaSegment, never forcing)

	// Observer, if set, receives what the runner measures (every
	// heartbeat and result); see Observer. cmd/runner's --metrics-file
	// sets runner/promfile's writer here.
	Observer Observer

	Logger *slog.Logger

	// clock and startTerm replace the real clock and the PTY in unit
	// tests (nil: the real ones).
	clock     clock
	startTerm termStarter
	listQueue func(dir string) ([]string, error) // nil: the session root lists it
	listCtl   func(dir string) ([]string, error) // nil: the session root lists it
	writerOps writerOps                          // nil fields: the result writer's real system calls
}

// Runner exit codes of cmd/runner.
const (
	ExitOK     = 0
	ExitError  = 1
	ExitUsage  = 2
	ExitLocked = 3 // another runner holds the session
	ExitGaveUp = 4 // the tool failed to start more often than --max-restarts allows
	ExitLost   = 5 // the session directory or its lock was taken away (ErrSessionLost)
)

// ErrLocked is returned when another live runner holds the session.
var ErrLocked = errors.New("runner: session is held by another runner")

// ErrConfig is wrapped by the errors about a Config value that cannot work
// (an unknown kind or watch mode): cmd/runner answers them as usage
// errors.
var ErrConfig = errors.New("runner: invalid configuration")

// configError is a Config value that cannot work; it is ErrConfig.
type configError string

func (e configError) Error() string        { return string(e) }
func (e configError) Is(target error) bool { return target == ErrConfig }

// Check reports what Open would refuse in c before it touches the disk
// (errors.Is(err, ErrConfig) for a value that cannot work).
func (c Config) Check() error {
	_, err := c.withDefaults()
	return err
}

func (c Config) withDefaults() (Config, error) {
	if c.Session == "" {
		return c, errors.New("runner: --session is required")
	}
	if c.Kind == "" {
		c.Kind = protocol.KindTcl
	}
	switch {
	case c.Driver != nil:
		if c.Kind != protocol.KindTcl && c.Kind != protocol.Kind(c.Driver.Kind) {
			return c, configError(fmt.Sprintf("runner: --kind %s and a driver of kind %s", c.Kind, c.Driver.Kind))
		}
		c.Kind = protocol.Kind(c.Driver.Kind)
	case c.Kind == protocol.KindTcl || c.Kind == protocol.KindSh:
	default:
		d, ok := Preset(string(c.Kind))
		if !ok {
			return c, configError(fmt.Sprintf("runner: unknown kind %q (want tcl, sh, %s, or --driver FILE)", c.Kind, strings.Join(Presets(), ", ")))
		}
		c.Driver = d
	}
	if c.Driver != nil && c.Driver.Source == "" && len(c.Init) > 0 {
		return c, configError(fmt.Sprintf("runner: --init: the %s driver has no source command to run a file with; put the lines in the tool's own start-up file (ngspice: .spiceinit), or give the driver a source", c.Driver.Kind))
	}
	if c.MaxOutputBytes < 0 {
		return c, configError("runner: --max-output-bytes must not be negative")
	}
	switch {
	case c.KeepResults < 0:
		return c, configError("runner: --keep-results must not be negative")
	case c.KeepLast < 0:
		return c, configError("runner: --keep-last must not be negative")
	case c.KeepIDs < 0:
		return c, configError("runner: --keep-ids must not be negative")
	case c.KeepIDs > MaxKeepIDs:
		return c, configError(fmt.Sprintf("runner: --keep-ids %d is more than %d: each file of the pruned index holds up to that many lines and must stay within %d bytes to be read back", c.KeepIDs, MaxKeepIDs, protocol.MaxPrunedFile))
	case c.MaxSpoolBytes < 0:
		return c, configError("runner: --max-spool-bytes must not be negative")
	case c.MaxMetaBytes < 0:
		return c, configError("runner: --max-meta-bytes must not be negative")
	case c.MaxMetaBytes > 0 && c.MaxMetaBytes < 2*minMetaSegment:
		return c, configError(fmt.Sprintf("runner: --max-meta-bytes must be at least %d (two generations of %d bytes)", 2*minMetaSegment, minMetaSegment))
	}
	if c.PruneGrace == 0 {
		c.PruneGrace = DefaultPruneGrace
	}
	if c.KeepIDs == 0 {
		c.KeepIDs = DefaultKeepIDs
	}
	if len(c.Tool) == 0 {
		if c.Driver != nil && len(c.Driver.Argv) > 0 {
			c.Tool = c.Driver.Argv
		} else if c.Driver != nil {
			return c, configError("runner: the driver names no tool (argv): give its command line after --")
		} else if c.Kind == protocol.KindSh {
			c.Tool = []string{"bash", "--noprofile", "--norc", "-i"}
		} else {
			c.Tool = []string{"tclsh"}
		}
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.Heartbeat, time.Second)
	def(&c.InitTimeout, 10*time.Minute)
	def(&c.StartTimeout, time.Minute)
	def(&c.KillGrace, 3*time.Second)
	def(&c.ResyncWait, 5*time.Second)
	def(&c.ParseGrace, 2*time.Second)
	def(&c.LeaseGrace, 30*time.Second)
	def(&c.RestartWindow, 10*time.Minute)
	if c.MaxRestarts == 0 {
		c.MaxRestarts = 5
	}
	if c.TailLines <= 0 {
		c.TailLines = 200
	}
	switch c.Watch {
	case "":
		c.Watch = WatchAuto
	case WatchAuto, WatchInotify, WatchPoll:
	default:
		return c, configError(fmt.Sprintf("runner: unknown watch mode %q (want auto, inotify or poll)", c.Watch))
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/skillpilot/skillpilot/launch"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
)

// stringsFlag is a repeatable string flag.
type stringsFlag []string

func (s *stringsFlag) String() string     { return strings.Join(*s, " ") }
func (s *stringsFlag) Set(v string) error { *s = append(*s, v); return nil }

func launchFlags(cmd *command) runFunc {
	c, fs := cmd.c, cmd.FlagSet
	dir := c.sessionFlags(fs)
	var opts launch.Options
	fs.StringVar(&opts.Via, "via", "", "local, slurm, sge or lsf (required)")
	fs.Var((*stringsFlag)(&opts.SubmitArgs), "submit-arg", "`ARG` for sbatch/qsub/bsub (repeatable)")
	fs.Var((*stringsFlag)(&opts.RunnerArgs), "runner-arg", "extra runner flag `ARG`, e.g. --runner-arg=--init=/p/load.tcl (repeatable)")
	fs.StringVar(&opts.Runner, "runner", "", "runner executable (default: $SP_RUNNER, runner beside master, runner on PATH)")
	fs.StringVar(&opts.JobName, "job-name", "", "job name (default sp-<session dir name>)")
	cmd.Duration(&opts.ReadyTimeout, "ready-timeout", 0, "how long to wait for the runner to serve (0: as long as the job lives)")
	fs.BoolVar(&opts.NoWait, "no-wait", false, "return once the job is submitted")
	return func(ctx context.Context, pos []string) error {
		if *dir == "" || opts.Via == "" {
			return usageErr("--session and --via are required")
		}
		opts.Tool = pos
		opts.Progress = c.note
		res, err := launch.Launch(ctx, *dir, opts)
		if err != nil {
			return err
		}
		if c.json {
			c.printJSON(map[string]any{"protocol_version": protocol.Version, "launch": res.Info, "job": res.Job,
				"status": res.Status, "elapsed_ms": res.Elapsed.Milliseconds(), "pending_ms": res.Pending.Milliseconds()})
			return nil
		}
		fmt.Fprintf(c.stdout, "%s %s\n", res.Info.Via, res.Info.JobID)
		return nil
	}
}

// note prints a progress line on stderr.
func (c *cli) note(msg string) { fmt.Fprintf(c.stderr, "master: %s\n", msg) }

// stopLaunched is master stop for a launched session: it escalates from the
// stop request to the scheduler's cancel (StopLaunched). It reports
// handled=false, touching nothing, when the session has no launch.json, so
// that the plain stop applies.
func (c *cli) stopLaunched(ctx context.Context, args []string) (handled bool, err error) {
	fs, dir := c.flags()
	fs.SetOutput(discard{})
	force := fs.Bool("force", false, "")
	_ = fs.Bool("wait", false, "") // Implied: the escalation waits until the job is gone.
	// Plain seconds too, as the plain stop's --wait-timeout: a value the
	// parse refused would leave a launched session to the plain stop.
	var timeout, grace time.Duration
	durationVar(fs, &timeout, "wait-timeout", 0, "")
	durationVar(fs, &grace, "grace", 30*time.Second, "")
	if fs.Parse(args) != nil || *dir == "" || fs.NArg() > 0 {
		return false, nil
	}
	s, err := master.Open(*dir)
	if err != nil {
		return false, nil
	}
	if _, err := launch.Read(s); err != nil {
		return false, nil
	}
	mode := protocol.StopGraceful
	if *force {
		mode = protocol.StopForce
	}
	ctx, cancel := withTimeout(ctx, timeout)
	defer cancel()
	rep, err := launch.StopLaunched(ctx, *dir, launch.StopOptions{Mode: mode, Grace: grace, Progress: c.note})
	if err != nil {
		return true, err
	}
	if c.json {
		c.printJSON(rep)
	} else {
		fmt.Fprintf(c.stdout, "stopped (%s): %s\n", rep.Step, rep.Message)
	}
	return true, nil
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

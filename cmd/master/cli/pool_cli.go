package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/skillpilot/skillpilot/internal/sessionio"
	"github.com/skillpilot/skillpilot/launch"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/pool"
	"github.com/skillpilot/skillpilot/protocol"
)

// poolTable is master pool's subcommands (poolVerbs), in the order of its
// help. Each one's args are its entry in poolUsage as written (synopsis
// lines, then what it does); poolHelp makes its --help of them. Its flags
// are declared by its flags, run by cli.dispatchPool.
func poolTable() []verb {
	return []verb{
		{name: "start", args: `--size N --via local|slurm|sge|lsf [--submit-arg A]... [--init FILE]... [--runner-arg A]...
         [--runner PATH] [--respawn] [--max-respawns N] [--ready-timeout D] [-- TOOL ARGS...]
         launch N sessions (DIR/s00 ...) and wait until all serve`, tool: true, flags: poolStartFlags},
		{name: "submit", args: `[--affinity KEY] [--timeout D] [--id ID] [--kind K] [--wait] [--wait-timeout D] [--no-value]
         [--cancel-on-interrupt] [--trace-id T] [--label K=V]... [PAYLOAD | -f FILE | -]
         queue a command in the less loaded of two live sessions (or KEY's); prints the cmd_id;
         with --wait prints its output, then its value (as submit --wait), and exits with its status`, flags: poolSubmitFlags},
		{name: "wait", args: `[--wait-timeout D] [--no-value] [--cancel-on-interrupt] CMD_ID
         wait for a pool command's result wherever it was moved; its output, then its value`, flags: poolWaitFlags},
		{name: "status", args: `                              one line per session`, flags: poolStatusFlags},
		{name: "heal", args: `[--every D]                   move commands out of dead sessions (and respawn); once, or every D`, flags: poolHealFlags},
		{name: "stop", args: `[--force] [--grace D] [--wait-jobs]
         stop every session: a stop request each; done when every runner has stopped and one cancel
         per job array is sent (--wait-jobs: also until the scheduler lists no job active); a runner
         not stopped within --grace (30s) gets the scheduler's cancel, then the forced one`, flags: poolStopFlags},
		{name: "grow", args: `--by K [--ready-timeout D]    launch K more sessions (retired ones first; one job array)`, flags: poolGrowFlags},
		{name: "shrink", args: `--by K | --to N [--grace D]   retire the least-loaded sessions; their queued commands move`, flags: poolShrinkFlags},
		{name: "adapt", args: `--min A --max B [--every D] [--idle D] [--grace D]
         heal every D (10s), grow while commands wait, retire sessions idle for D (60s), within [A, B]`, flags: poolAdaptFlags},
	}
}

// poolUsage is what master pool --help prints.
func poolUsage() string {
	var b strings.Builder
	b.WriteString("usage: master pool SUBCOMMAND --pool DIR [flags]\n\n")
	for _, v := range poolVerbs {
		fmt.Fprintf(&b, "  %-6s %s\n", v.name, v.args)
	}
	b.WriteString("\nExit codes as for the other commands; 5: no live session.\n")
	return b.String()
}

func (c *cli) pool(ctx context.Context, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(c.stderr, poolUsage())
		return usageErr("a pool subcommand is required")
	}
	if args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
		fmt.Fprint(c.stdout, poolUsage()) // Help goes to stdout, like every command's.
		return nil
	}
	if v := find(poolVerbs, args[0]); v != nil {
		c.verb = "pool " + v.name
		return c.dispatchPool(ctx, v, args[1:])
	}
	return usageErr("unknown pool subcommand %q%s (master pool --help lists them)", args[0], didYouMean(args[0], names(poolVerbs), "master pool "))
}

// newPoolCommand starts the flags of the pool subcommand being run
// (c.verb: "pool NAME"): --pool and --json; its help is poolHelp's. An
// empty --pool takes $SP_POOL_DIR after the parse (dispatchPool), as
// --session takes $SP_SESSION_DIR: the help names the default once.
func (c *cli) newPoolCommand() *command {
	fs := c.flagSet()
	args, about := poolHelp(strings.TrimPrefix(c.verb, "pool "))
	c.describe(fs, args, about)
	cmd := &command{FlagSet: fs, c: c, name: c.verb, args: args, about: about}
	fs.StringVar(&cmd.pool, "pool", "", "pool directory (default $SP_POOL_DIR)")
	fs.BoolVar(&c.json, "json", false, "print only JSON on stdout")
	return cmd
}

func (c *cli) openPool(dir string) (*pool.Pool, error) {
	if dir == "" {
		return nil, usageErr("--pool is required")
	}
	p, err := pool.Open(dir)
	if err != nil {
		return nil, err
	}
	p.Progress = nil
	return p, nil
}

func poolStartFlags(cmd *command) runFunc {
	fs := cmd.FlagSet
	var o pool.Options
	fs.IntVar(&o.Size, "size", 0, "number of sessions (required)")
	fs.StringVar(&o.Via, "via", "", "local, slurm, sge or lsf (required)")
	fs.Var((*stringsFlag)(&o.SubmitArgs), "submit-arg", "`ARG` for sbatch/qsub/bsub (repeatable)")
	fs.Var((*stringsFlag)(&o.Init), "init", "runner --init script for every session (repeatable)")
	fs.Var((*stringsFlag)(&o.RunnerArgs), "runner-arg", "extra runner flag `ARG` (repeatable)")
	fs.StringVar(&o.Runner, "runner", "", "runner executable")
	fs.BoolVar(&o.Respawn, "respawn", false, "heal relaunches sessions whose job ended")
	fs.IntVar(&o.MaxRespawns, "max-respawns", 3, "relaunches per session at most")
	cmd.Duration(&o.ReadyTimeout, "ready-timeout", 0, "how long to wait for every session to serve (0: as long as the jobs live)")
	return func(ctx context.Context, pos []string) error {
		c := cmd.c
		o.Tool, o.Progress = pos, c.note
		if cmd.pool != "" {
			fromPoolFile(cmd.pool, fs, &o) // Run again: what pool.json holds, unless given anew.
		}
		if cmd.pool == "" || o.Via == "" || o.Size < 1 {
			return usageErr("--pool, --via and --size are required (--via and --size may be left out when pool.json exists)")
		}
		_, res, err := pool.Start(ctx, cmd.pool, o)
		if c.json {
			c.printJSON(map[string]any{"protocol_version": protocol.Version, "sessions": launchesJSON(res)})
		} else {
			for _, r := range res {
				switch {
				case errors.Is(r.Err, launch.ErrAlreadyLaunched):
					fmt.Fprintf(c.stdout, "%s  already serving (or its job is queued): left as it is\n", r.Session)
				case r.Err != nil:
					fmt.Fprintf(c.stdout, "%s  %s\n", r.Session, r.Err)
				default:
					fmt.Fprintf(c.stdout, "%s  job %s serving after %v\n", r.Session, r.Result.Info.JobID, r.Result.Elapsed.Round(time.Millisecond))
				}
			}
		}
		if c.json && err != nil {
			c.json = false // Already reported in the document.
		}
		return err
	}
}

func poolSubmitFlags(cmd *command) runFunc {
	fs := cmd.FlagSet
	var o pool.SubmitOptions
	fs.StringVar(&o.Affinity, "affinity", "", "key pinning related commands to one session")
	options := commandFlags(cmd) // Every option of master submit.
	file := fs.String("f", "", "read the payload from `FILE` ('-': stdin)")
	wait := fs.Bool("wait", false, "wait for the result and exit with the command's status")
	var waitTimeout time.Duration
	cmd.Duration(&waitTimeout, "wait-timeout", 0, "with --wait, how long to wait (0: forever)")
	noValue := fs.Bool("no-value", false, "with --wait, do not print the command's value after its output")
	cancelOnInt := fs.Bool("cancel-on-interrupt", false, "with --wait, cancel the command when interrupted (Ctrl-C), then exit 130")
	return func(ctx context.Context, pos []string) error {
		c := cmd.c
		o.SubmitOptions = options()
		payload, err := c.payload(pos, *file)
		if err != nil {
			return err
		}
		p, err := c.openPool(cmd.pool)
		if err != nil {
			return err
		}
		pc, err := p.Submit(ctx, payload, o)
		if err != nil {
			return err
		}
		if !*wait {
			if c.json {
				c.printJSON(map[string]any{"protocol_version": protocol.Version, "cmd_id": pc.ID, "session": pc.Session, "seq": pc.Seq,
					"file": pc.Session + "/" + protocol.DirQueue + "/" + pc.Name, "resume_cursor": pc.ResumeCursor})
			} else {
				fmt.Fprintln(c.stdout, pc.ID)
			}
			return nil
		}
		return c.poolWaitCmd(ctx, p, pc.Command, waitTimeout, !*noValue, *cancelOnInt)
	}
}

func poolWaitFlags(cmd *command) runFunc {
	fs := cmd.FlagSet
	var timeout time.Duration
	cmd.Duration(&timeout, "wait-timeout", 0, "how long to wait (0: forever)")
	noValue := fs.Bool("no-value", false, "do not print the command's value after its output")
	cancelOnInt := fs.Bool("cancel-on-interrupt", false, "cancel the command when interrupted (Ctrl-C), then exit 130")
	return func(ctx context.Context, pos []string) error {
		c := cmd.c
		if len(pos) != 1 {
			return usageErr("one CMD_ID expected")
		}
		p, err := c.openPool(cmd.pool)
		if err != nil {
			return err
		}
		cmd, err := p.FindCommand(pos[0])
		if err != nil {
			return err
		}
		return c.poolWaitCmd(ctx, p, cmd, timeout, !*noValue, *cancelOnInt)
	}
}

// poolWaitCmd waits (following moves), then prints the output and the
// value (unless !value), as submit --wait does, or the result with --json,
// and maps the status to the exit code. Interrupted, it says what becomes
// of the command (or cancels it), as submit --wait does.
func (c *cli) poolWaitCmd(ctx context.Context, p *pool.Pool, cmd *master.Command, timeout time.Duration, value, cancelOnInt bool) error {
	wctx, cancel := withTimeout(ctx, timeout)
	defer cancel()
	res, err := p.WaitCommand(wctx, cmd)
	var ie *sessionio.InterruptedError
	if res == nil && err != nil && errors.As(context.Cause(ctx), &ie) {
		_, final := p.Locate(cmd)
		c.interrupted(final.Session(), final, cancelOnInt)
	}
	if res == nil {
		return err
	}
	if c.json {
		c.printJSON(res)
	} else if _, final := p.Locate(cmd); final != nil {
		if out, oerr := final.Output(0, 0); oerr == nil {
			_, _ = c.stdout.Write(out)
		}
		if value {
			c.printValue(res)
		}
	}
	return err
}

func poolStatusFlags(cmd *command) runFunc {
	return func(ctx context.Context, pos []string) error {
		c := cmd.c
		p, err := c.openPool(cmd.pool)
		if err != nil {
			return err
		}
		sts, err := p.Status(ctx)
		if err != nil {
			return err
		}
		serving := 0
		for _, s := range sts {
			if s.Serving() {
				serving++
			}
		}
		if c.json {
			c.printJSON(map[string]any{"protocol_version": protocol.Version, "pool": p.Dir(), "config": p.Config(), "serving": serving, "sessions": sts})
		} else {
			cfg := p.Config()
			respawn := "off"
			if cfg.Respawn {
				respawn = fmt.Sprintf("on (at most %d per session)", cfg.MaxRespawns)
			}
			fmt.Fprintf(c.stdout, "pool %s: %s, %d serving, via %s, respawn %s\n", p.Dir(), countOf(len(sts), "session"), serving, cfg.Via, respawn)
			w := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(w, "SESSION\tRUNNER\tPHASE\tQUEUE\tBUSY\tDONE\tJOB\tMOVED\tNOTE")
			for _, s := range sts {
				runner := map[bool]string{true: "alive", false: "late"}[s.Alive]
				switch {
				case s.Missing:
					runner = "missing"
				case s.Retired && s.Dead:
					runner = "retired"
				case s.Dead:
					runner = "dead"
				}
				job := "-"
				if s.Launch != nil {
					job = s.Launch.JobID + " " + s.Launch.Job.Raw
					if s.Launch.Error != "" {
						job = s.Launch.JobID + " ?"
					}
				}
				phase := string(s.Phase)
				if phase == "" {
					phase = "-"
				} else if s.Dead && s.Phase != protocol.PhaseStopped {
					phase = "(" + phase + ")" // As its runner last wrote it: that runner is gone.
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%d\t%s\t%d\t%s\n", s.Name, runner, phase, s.Queue, s.Inflight, s.Done, strings.TrimSpace(job), s.MovedOut, s.Note)
			}
			_ = w.Flush() // Writing to stdout.
			fmt.Fprintln(c.stdout, "DONE counts commands since each session's runner started; (PHASE): as a runner that is gone last wrote it")
		}
		if serving == 0 {
			return exitOnly(master.ExitNoRunner)
		}
		return nil
	}
}

func poolHealFlags(cmd *command) runFunc {
	var every time.Duration
	cmd.Duration(&every, "every", 0, "repeat every D until interrupted (0: once)")
	return func(ctx context.Context, pos []string) error {
		c := cmd.c
		p, err := c.openPool(cmd.pool)
		if err != nil {
			return err
		}
		return c.every(ctx, every, func() error {
			rep, err := p.Heal(ctx)
			if c.json {
				c.printJSON(map[string]any{"protocol_version": protocol.Version, "report": rep, "error": errString(err)})
			} else {
				for _, m := range rep.Moved {
					fmt.Fprintf(c.stdout, "moved %s/%s -> %s/%s\n", m.From, m.Name, m.To, m.ToName)
				}
				for _, s := range rep.Respawned {
					fmt.Fprintf(c.stdout, "respawned %s\n", s)
				}
			}
			return err
		})
	}
}

// every runs step once when interval is 0, else again every interval
// until ctx ends (pool heal and adapt --every). Once, step's error is the
// command's; repeating, it is noted on stderr and the loop goes on, until
// ctx ends.
func (c *cli) every(ctx context.Context, interval time.Duration, step func() error) error {
	for {
		if err := step(); err != nil {
			if interval == 0 || ctx.Err() != nil {
				return err
			}
			c.note(err.Error())
		}
		if interval == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func poolStopFlags(cmd *command) runFunc {
	fs := cmd.FlagSet
	force := fs.Bool("force", false, "end running commands at once")
	var grace time.Duration
	cmd.Duration(&grace, "grace", 30*time.Second, "time for the stop request before the scheduler's cancel")
	waitJobs := fs.Bool("wait-jobs", false, "also wait until the scheduler no longer lists the jobs as active (default: done when every runner has stopped and the jobs' cancel is sent)")
	return func(ctx context.Context, pos []string) error {
		c := cmd.c
		p, err := c.openPool(cmd.pool)
		if err != nil {
			return err
		}
		mode := protocol.StopGraceful
		if *force {
			mode = protocol.StopForce
		}
		res, err := p.Stop(ctx, launch.StopOptions{Mode: mode, Grace: grace, Progress: c.note, NoJobWait: !*waitJobs})
		if c.json {
			c.printJSON(map[string]any{"protocol_version": protocol.Version, "sessions": res})
			if err != nil {
				c.json = false
			}
		} else {
			for _, r := range res {
				msg := r.Report.Message
				if r.Error != "" {
					msg = "ERROR " + r.Error
				}
				fmt.Fprintf(c.stdout, "%s  %s: %s\n", r.Session, r.Report.Step, msg)
			}
		}
		return err
	}
}

func poolGrowFlags(cmd *command) runFunc {
	fs := cmd.FlagSet
	by := fs.Int("by", 0, "number of sessions to add (required)")
	var ready time.Duration
	cmd.Duration(&ready, "ready-timeout", 0, "how long to wait for the new sessions to serve (0: as long as the jobs live)")
	return func(ctx context.Context, pos []string) error {
		c := cmd.c
		if *by < 1 {
			return usageErr("--by K (K >= 1) is required")
		}
		p, err := c.openPool(cmd.pool)
		if err != nil {
			return err
		}
		p.Progress = c.note
		res, err := p.Grow(ctx, *by, ready)
		if c.json {
			c.printJSON(map[string]any{"protocol_version": protocol.Version, "sessions": launchesJSON(res)})
			if err != nil {
				c.json = false
			}
			return err
		}
		for _, r := range res {
			if r.Err != nil {
				fmt.Fprintf(c.stdout, "%s  %s\n", r.Session, r.Err)
			} else {
				fmt.Fprintf(c.stdout, "%s  job %s serving after %v\n", r.Session, r.Result.Info.JobID, r.Result.Elapsed.Round(time.Millisecond))
			}
		}
		return err
	}
}

func poolShrinkFlags(cmd *command) runFunc {
	fs := cmd.FlagSet
	by := fs.Int("by", 0, "number of sessions to retire")
	to := fs.Int("to", 0, "number of sessions to keep")
	var grace time.Duration
	cmd.Duration(&grace, "grace", 30*time.Second, "time for a retired session's running command before the scheduler's cancel")
	return func(ctx context.Context, pos []string) error {
		c := cmd.c
		if (*by > 0) == (*to > 0) {
			return usageErr("one of --by K or --to N is required")
		}
		p, err := c.openPool(cmd.pool)
		if err != nil {
			return err
		}
		so := launch.StopOptions{Grace: grace, Progress: c.note}
		var stops []pool.SessionStop
		var rep pool.HealReport
		if *by > 0 { // Members counted under the pool's resize lock.
			stops, rep, err = p.ShrinkBy(ctx, *by, so)
		} else {
			stops, rep, err = p.Shrink(ctx, *to, so)
		}
		if c.json {
			c.printJSON(map[string]any{"protocol_version": protocol.Version, "retired": stops, "moved": rep.Moved})
			if err != nil {
				c.json = false
			}
			return err
		}
		if len(stops) == 0 && err == nil {
			members, _ := p.Members()
			fmt.Fprintf(c.stdout, "nothing retired: the pool has %d members\n", len(members))
		}
		for _, r := range stops {
			msg := r.Report.Message
			if r.Error != "" {
				msg = "ERROR " + r.Error
			}
			fmt.Fprintf(c.stdout, "retired %s  %s: %s\n", r.Session, r.Report.Step, msg)
		}
		for _, m := range rep.Moved {
			fmt.Fprintf(c.stdout, "moved %s/%s -> %s/%s\n", m.From, m.Name, m.To, m.ToName)
		}
		return err
	}
}

func poolAdaptFlags(cmd *command) runFunc {
	fs := cmd.FlagSet
	var o pool.AdaptOptions
	fs.IntVar(&o.Min, "min", 1, "sessions at least")
	fs.IntVar(&o.Max, "max", 0, "sessions at most (required)")
	cmd.Duration(&o.Idle, "idle", time.Minute, "retire a session idle this long")
	cmd.Duration(&o.Ready, "ready-timeout", 0, "how long a grow waits for new sessions to serve")
	cmd.Duration(&o.Stop.Grace, "grace", 30*time.Second, "time for a retired session's running command before the scheduler's cancel")
	var every time.Duration
	cmd.Duration(&every, "every", 10*time.Second, "repeat every D until interrupted (0: once)")
	return func(ctx context.Context, pos []string) error {
		c := cmd.c
		if o.Min < 1 || o.Max < o.Min {
			return usageErr("--max B is required, with 1 <= --min A <= B")
		}
		p, err := c.openPool(cmd.pool)
		if err != nil {
			return err
		}
		o.Stop.Progress = c.note
		a := pool.NewAdapter(p, o)
		return c.every(ctx, every, func() error {
			rep, err := a.Step(ctx)
			if c.json {
				c.printJSON(map[string]any{"protocol_version": protocol.Version, "report": rep, "error": errString(err)})
			} else {
				for _, m := range rep.Heal.Moved {
					fmt.Fprintf(c.stdout, "moved %s/%s -> %s/%s\n", m.From, m.Name, m.To, m.ToName)
				}
				for _, s := range rep.Heal.Respawned {
					fmt.Fprintf(c.stdout, "respawned %s\n", s)
				}
				for _, s := range rep.Grown {
					fmt.Fprintf(c.stdout, "grown %s (%s waiting)\n", s, countOf(rep.Waiting, "command"))
				}
				if len(rep.Balanced) > 0 {
					fmt.Fprintf(c.stdout, "balanced %s: %s\n", countOf(len(rep.Balanced), "queued command"), balanceSummary(rep.Balanced))
				}
				for _, s := range rep.Retired {
					fmt.Fprintf(c.stdout, "retired %s (idle)\n", s)
				}
			}
			return err
		})
	}
}

// countOf is "1 command", "2 commands".
func countOf(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// balanceSummary is "s00->s02:3 s01->s03:2", by source and target.
func balanceSummary(moves []pool.Move) string {
	n := map[string]int{}
	var keys []string
	for _, m := range moves {
		k := m.From + "->" + m.To
		if n[k] == 0 {
			keys = append(keys, k)
		}
		n[k]++
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s:%d", k, n[k])
	}
	return strings.Join(parts, " ")
}

// fromPoolFile fills what a run of pool start again leaves out from the
// pool's pool.json (via, size, submit and runner arguments, runner, tool,
// respawn): flags given on the command line win. A directory without
// pool.json changes nothing.
func fromPoolFile(dir string, fs *flag.FlagSet, o *pool.Options) {
	p, err := pool.Open(dir)
	if err != nil {
		return
	}
	cfg := p.Config()
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if !given["via"] {
		o.Via = cfg.Via
	}
	if !given["size"] {
		o.Size = cfg.Size
	}
	if !given["submit-arg"] {
		o.SubmitArgs = cfg.SubmitArgs
	}
	if !given["runner-arg"] && !given["init"] {
		o.RunnerArgs = cfg.RunnerArgs // --init scripts included, as absolute paths.
	}
	if !given["runner"] {
		o.Runner = cfg.Runner
	}
	if !given["respawn"] {
		o.Respawn = cfg.Respawn
	}
	if !given["max-respawns"] {
		o.MaxRespawns = cfg.MaxRespawns
	}
	if len(o.Tool) == 0 {
		o.Tool = cfg.Tool
	}
}

// launchesJSON is pool start's and grow's --json line of each session
// launched.
func launchesJSON(res []pool.SessionLaunch) []map[string]any {
	var js []map[string]any
	for _, r := range res {
		m := map[string]any{"session": r.Session}
		if r.Result != nil {
			m["job_id"], m["elapsed_ms"] = r.Result.Info.JobID, r.Result.Elapsed.Milliseconds()
		}
		if r.Err != nil {
			m["error"] = r.Err.Error()
		}
		if errors.Is(r.Err, launch.ErrAlreadyLaunched) {
			m["already_launched"] = true
		}
		js = append(js, m)
	}
	return js
}

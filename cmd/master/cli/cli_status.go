package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/skillpilot/skillpilot/launch"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
)

// watchFlag is --watch, alone (2 s) or with an interval (--watch=5s).
type watchFlag struct {
	on    bool
	every time.Duration
}

func (w *watchFlag) IsBoolFlag() bool { return true }
func (w *watchFlag) String() string {
	if w == nil || !w.on {
		return "false"
	}
	return w.every.String()
}

func (w *watchFlag) Set(s string) error {
	if b, err := strconv.ParseBool(s); err == nil {
		w.on = b
		return nil
	}
	var d durationFlag
	if err := d.Set(s); err != nil {
		return err
	}
	w.on, w.every = true, time.Duration(d)
	return nil
}

func statusFlags(cmd *command) runFunc {
	watch := &watchFlag{every: 2 * time.Second}
	cmd.Var(watch, "watch", "refresh every INTERVAL (default 2s) until interrupted")
	return func(ctx context.Context, pos []string) error {
		c := cmd.c
		if watch.on && len(pos) == 1 {
			if err := watch.Set(pos[0]); err != nil {
				return usageErr("--watch %s: %v", pos[0], err)
			}
			pos = nil
		}
		if len(pos) > 0 {
			return usageErr("status takes no arguments (the interval goes with --watch)")
		}
		if watch.every <= 0 {
			return usageErr("--watch needs a positive interval")
		}
		s, err := cmd.open()
		if err != nil {
			return err
		}
		if !watch.on {
			ms, err := s.Status(ctx)
			if err != nil {
				return err
			}
			st := sessionStatus{Status: ms, Launch: launch.Status(ctx, s)} // The scheduler's view, if launched.
			if c.json {
				c.printJSON(st)
			} else {
				writeStatus(c.stdout, st)
			}
			return statusExit(st)
		}
		tty := !c.json && isTerminal(c.stdout.w)
		t := time.NewTicker(watch.every)
		defer t.Stop()
		for {
			ms, err := s.Status(ctx)
			st := sessionStatus{Status: ms}
			if err == nil {
				st.Launch = launch.Status(ctx, s)
			}
			switch {
			case ctx.Err() != nil:
				return nil
			case err != nil && c.json:
				code, _ := master.Classify(err)
				c.printJSONLine(map[string]any{"protocol_version": protocol.Version, "error": errorJSON(code, err)})
			case err != nil:
				c.diag("%s", errText(err))
			case c.json:
				c.printJSONLine(st)
			default:
				var b strings.Builder
				if tty {
					b.WriteString("\x1b[H\x1b[2J") // Home, clear: refresh in place.
				}
				writeStatus(&b, st)
				fmt.Fprintf(&b, "(every %v; Ctrl-C ends)\n", watch.every)
				if !tty {
					b.WriteString("\n")
				}
				io.WriteString(c.stdout, b.String())
			}
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
			}
		}
	}
}

// sessionStatus is what master status shows: the runner's side and, for
// a launched session, the scheduler's.
type sessionStatus struct {
	master.Status
	Launch *launch.JobStatus // nil: not launched
}

// statusJSON is the type master status --json marshals: master.Status's
// fields with Launch where "launch" has always stood, between
// "filesystem" and "dir" (docs/reference/master.md). It is made from
// master.Status, so that a field added there is shown here in its place.
// Made on first use: reflect.StructOf at every start of master cost 124
// allocations in each short call.
var statusJSON = sync.OnceValues(func() (reflect.Type, int) {
	var fields []reflect.StructField
	at := -1
	for f := range reflect.TypeFor[master.Status]().Fields() {
		if f.Name == "Dir" {
			at = len(fields)
			fields = append(fields, reflect.StructField{Name: "Launch", Type: reflect.TypeFor[*launch.JobStatus](), Tag: `json:"launch,omitempty"`})
		}
		fields = append(fields, f)
	}
	if at < 0 {
		panic("master.Status has no Dir") // A test (TestStatusJSONKeepsLaunchInPlace) says so first.
	}
	return reflect.StructOf(fields), at
})

// MarshalJSON is the status's JSON as a statusJSON.
func (st sessionStatus) MarshalJSON() ([]byte, error) {
	typ, launchAt := statusJSON()
	v := reflect.New(typ).Elem()
	from := reflect.ValueOf(st.Status)
	for i, j := 0, 0; i < v.NumField(); i++ {
		if i == launchAt {
			v.Field(i).Set(reflect.ValueOf(st.Launch))
			continue
		}
		v.Field(i).Set(from.Field(j))
		j++
	}
	return json.Marshal(v.Interface())
}

// statusExit is status's exit code: 5 when the session cannot serve.
func statusExit(st sessionStatus) error {
	if !st.CanServe {
		return exitOnly(master.ExitNoRunner)
	}
	return nil
}

// retentionPolicy says a runner's retention flags in words.
func retentionPolicy(r *protocol.Retention) string {
	var parts []string
	if d := time.Duration(r.KeepResultsS * float64(time.Second)); d >= 24*time.Hour && d%(24*time.Hour) == 0 {
		parts = append(parts, fmt.Sprintf("results for %dd", d/(24*time.Hour)))
	} else if d > 0 {
		parts = append(parts, "results for "+roundDur(d))
	}
	if r.KeepLast > 0 {
		parts = append(parts, fmt.Sprintf("the last %d", r.KeepLast))
	}
	if r.MaxSpoolBytes > 0 {
		parts = append(parts, "spool "+size(r.MaxSpoolBytes))
	}
	if r.MaxMetaBytes > 0 {
		parts = append(parts, "event log "+size(r.MaxMetaBytes))
	}
	return "keeps " + strings.Join(parts, ", ") + fmt.Sprintf(" (grace %s)", roundDur(time.Duration(r.PruneGraceS*float64(time.Second))))
}

// writeStatus prints the compact, aligned view of a status.
// busyNothing is the running row of a busy runner with no command
// running (the Python CLI says the same).
const busyNothing = "nothing: the tool is being started again (it ended with the last command); the next command waits for it"

func writeStatus(w io.Writer, st sessionStatus) {
	row := func(label, format string, args ...any) {
		fmt.Fprintf(w, "%-9s %s\n", label, fmt.Sprintf(format, args...))
	}
	row("session", "%s", st.Dir)
	alive := "alive"
	if !st.Alive {
		alive = "NOT ALIVE"
	}
	where := ""
	if st.RunnerPID != 0 {
		where = fmt.Sprintf(", pid %d on %s", st.RunnerPID, st.RunnerHost)
	}
	row("runner", "%s (%s)%s", alive, st.AliveReason, where)
	phase := string(st.Phase)
	if phase == "" {
		phase = "-"
	}
	if st.Reason != "" {
		phase += ": " + st.Reason
	}
	if st.Phase == protocol.PhaseError || (st.Alive && !st.CanServe) {
		phase += "  (cannot serve commands)"
	}
	// A runner that is not alive wrote its last state.json before it
	// died: say so, rather than present its phase as the present one.
	stale := !st.Alive && st.Phase != "" && st.Phase != protocol.PhaseStopped
	if stale {
		phase += "  (as last written: the runner is not alive)"
	}
	row("phase", "%s", phase)
	if st.DiskFull {
		row("disk", "FULL: output files and log/session.out are not written until there is room (results are)")
	}
	if st.ToolStarts > 0 || st.ToolPID != 0 {
		tool := fmt.Sprintf("%s, started %d time%s", orDash(string(st.Kind)), st.ToolStarts, plural(st.ToolStarts))
		if st.ToolPID != 0 {
			tool += fmt.Sprintf(", pid %d", st.ToolPID)
		}
		if st.ToolStarts > 1 {
			tool += " (restarted: what earlier starts of the tool held is gone)"
		}
		row("tool", "%s", tool)
	}
	if st.CurrentCmdID != "" && stale {
		// Its elapsed time and output stopped with the runner; the next
		// runner's start ends it (PROTOCOL.md §13).
		row("running", "%s when the runner was last seen; a runner started later ends it (runner_restarted)", st.CurrentCmdID)
	} else if st.CurrentCmdID != "" {
		run := fmt.Sprintf("%s for %s, %s of output", st.CurrentCmdID, roundDur(st.CurrentElapsed), size(st.CurrentOutBytes))
		if st.CurrentQuiet != nil {
			run += ", quiet " + roundDur(*st.CurrentQuiet)
		}
		if st.CurrentTraceID != "" {
			run += ", trace " + st.CurrentTraceID
		}
		if st.CurrentLastLine != "" {
			// The prompt a waiting command shows, quoted: its trailing
			// blanks matter to a send --expect.
			run += " at: " + strconv.Quote(st.CurrentLastLine)
		}
		row("running", "%s", run)
	} else if st.Phase == protocol.PhaseBusy && !stale {
		// Busy with nothing running: a tool that died with its command (a
		// Ctrl-C killed plain tclsh, signal KILL) is being started again
		// (PROTOCOL.md section 8), right after a cancel or a timeout.
		row("running", "%s", busyNothing)
	} else {
		row("running", "nothing")
	}
	if st.Launch != nil {
		row("job", "%s", st.Launch)
	}
	row("queue", "%d waiting", st.QueueDepth)
	switch l := st.Lease; {
	case l == nil:
		row("lease", "none (the runner runs until stopped)")
	case l.LeaseID == "":
		row("lease", "unreadable: %s", l.Error)
	default:
		left := roundDur(l.Remaining) + " left"
		if l.Remaining < 0 {
			left = "expired"
		}
		extra := ""
		if l.TTLMS > 0 {
			extra = fmt.Sprintf(" (ttl %s)", roundDur(time.Duration(l.TTLMS)*time.Millisecond))
		}
		if l.Error != "" {
			extra += "; runner says: " + l.Error
		}
		row("lease", "%s: %s%s", l.LeaseID, left, extra)
	}
	// commands_done counts this runner's commands: it starts at 0 again
	// when a runner starts (PROTOCOL.md §8).
	done := fmt.Sprintf("%d command%s since the runner started", st.CommandsDone, plural(st.CommandsDone))
	done += notCounted(st.SkippedCount, st.RejectedCount)
	row("done", "%s", done)
	if r := st.Retention; r != nil {
		row("retention", "%s; %d result%s kept, %d pruned by this runner", retentionPolicy(r), r.Kept, plural(int64(r.Kept)), r.Pruned)
	}
	for i, r := range st.LastResults {
		label := ""
		if i == 0 {
			label = "last"
		}
		status := string(r.Status)
		if r.Status != protocol.StatusOK && r.ExitReason != "" {
			status += " (" + string(r.ExitReason) + ")"
		}
		trace := ""
		if r.TraceID != "" {
			trace = ", trace " + r.TraceID
		}
		row(label, "%-34s %8s  %s%s", status, roundDur(time.Duration(r.DurationMS)*time.Millisecond), r.CmdID, trace)
	}
}

// notCounted names the queue files answered without running, which
// commands_done does not count: " (not counting 1 skipped as already done,
// 4 rejected as invalid)", only the parts that are not zero, or "" ("4
// commands (0 skipped; 4 rejected)" read as if all four were
// rejected).
func notCounted(skipped, rejected int64) string {
	var parts []string
	if skipped > 0 {
		parts = append(parts, fmt.Sprintf("%d skipped as already done", skipped))
	}
	if rejected > 0 {
		parts = append(parts, fmt.Sprintf("%d rejected as invalid", rejected))
	}
	if len(parts) == 0 {
		return ""
	}
	return " (not counting " + strings.Join(parts, ", ") + ")"
}

func roundDur(d time.Duration) string {
	switch {
	case d >= time.Minute:
		return d.Round(time.Second).String()
	case d >= time.Second:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Millisecond).String()
}

func size(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

func plural(n int64) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"

	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/history"
	"github.com/skillpilot/skillpilot/history/diff"
	"github.com/skillpilot/skillpilot/history/standin"
	"github.com/skillpilot/skillpilot/master"
)

// standin writes a stand-in Tcl file from recorded sessions (issue 14).
func (c *cli) standin(_ context.Context, args []string) error {
	fs := c.flagSet()
	c.describe(fs, "--from SESSION [--from SESSION]... -o FILE.tcl", `
Write a Tcl stand-in from recorded sessions: plain tclsh loaded with it
(runner --init FILE.tcl -- tclsh) answers the recorded commands with their
recorded output and values, so a flow can be rerun without the real tool.`)
	var from repeated
	fs.Var(&from, "from", "recorded session directory (repeatable; recordings are replayed in the order given)")
	out := fs.String("o", "", "the Tcl file to write (required)")
	timing := fs.String("timing", "none", "none (answer at once), recorded (take the recorded time) or scale=F")
	onUnknown := fs.String("on-unknown", "error", "a command that was not recorded: error (a Tcl error naming it) or tcl (evaluate it)")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return usageErr("unexpected arguments %q", fs.Args())
	case len(from) == 0:
		return usageErr("give at least one --from SESSION")
	case *out == "":
		return usageErr("-o FILE.tcl is required")
	}
	if _, err := standin.ParseTiming(*timing); err != nil {
		return usageErr("%v", err)
	}
	if *onUnknown != "error" && *onUnknown != "tcl" {
		return usageErr("--on-unknown %q: want error or tcl", *onUnknown)
	}
	var sessions []*history.Session
	for _, d := range from {
		s, err := loadSession(d, history.Options{Payloads: true})
		if err != nil {
			return err
		}
		sessions = append(sessions, s)
	}
	var buf bytes.Buffer
	st, err := standin.Generate(&buf, sessions, standin.Options{Timing: *timing, OnUnknown: *onUnknown})
	if errors.Is(err, standin.ErrUsage) {
		return usageErr("%v", err)
	}
	if err != nil {
		return err
	}
	if err := fsq.WriteAtomic(*out, buf.Bytes(), 0o644, fsq.Volatile); err != nil {
		return err
	}
	for _, s := range st.Skipped {
		fmt.Fprintf(c.stderr, "master: standin: not replayed: %s\n", s)
	}
	fmt.Fprintf(c.stderr, "master: standin: %s: %d recordings of %d payloads (id %s)\n", *out, st.Recordings, st.Payloads, st.ID)
	return nil
}

// diff compares two recorded runs; exit 1 when they differ.
func (c *cli) diff(_ context.Context, args []string) error {
	fs := c.flagSet()
	c.describe(fs, "SESSION_A SESSION_B", `
Compare two recorded runs command by command (matched by trace id, labels and
payload, then by payload, in order): status, value and output of each. A run is
a session directory or a pool directory (its sessions' commands together, in
submit order, whatever session ran them). A command whose payload was edited
(an unmatched command of each run in the same place) is shown as one edited
step. --ignore REGEX leaves volatile lines (dates, hosts, pids) out of values
and outputs; --mask REGEX replaces its matches inside lines by <masked>.
Exit 0 when they agree, 1 when they differ.`)
	fs.BoolVar(&c.json, "json", false, "print the comparison as one JSON document")
	var ignore, mask repeated
	fs.Var(&ignore, "ignore", "leave out of values and outputs the lines matching this `REGEX` (repeatable): dates, hosts, pids")
	fs.Var(&mask, "mask", "replace every match of this `REGEX` inside lines of values and outputs by <masked> before comparing (repeatable): a timestamp inside a line")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return usageErr("want two runs: SESSION_A SESSION_B (session or pool directories)")
	}
	var opt diff.Options
	for _, expr := range ignore {
		re, err := regexp.Compile(expr)
		if err != nil {
			return usageErr("--ignore %q: %v", expr, err)
		}
		opt.Ignore = append(opt.Ignore, re)
	}
	for _, expr := range mask {
		re, err := regexp.Compile(expr)
		if err != nil {
			return usageErr("--mask %q: %v", expr, err)
		}
		opt.Mask = append(opt.Mask, re)
	}
	var runs [2]diff.Run
	for i, d := range fs.Args() {
		dirs := []string{d}
		if !history.IsSession(d) {
			found, err := history.FindSessions(d) // A pool: its sessions together.
			if err != nil {
				return fmt.Errorf("%w: %v", master.ErrSessionMissing, err)
			}
			dirs = found
		}
		runs[i].Dir = d
		for _, sd := range dirs {
			s, err := loadSession(sd, history.Options{Payloads: true})
			if err != nil {
				return err
			}
			runs[i].Sessions = append(runs[i].Sessions, s)
		}
	}
	r := diff.CompareRuns(runs[0], runs[1], opt)
	if c.json {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			return err
		}
	} else if err := diff.WriteText(c.stdout, r); err != nil {
		return err
	}
	if !r.Agree {
		return exitOnly(master.ExitFailed)
	}
	return nil
}

//go:build !lean

package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"

	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/review"
	"github.com/skillpilot/skillpilot/review/diff"
	"github.com/skillpilot/skillpilot/review/standin"
)

// standinFlags is master standin's flags and its run: it writes a
// stand-in Tcl file from recorded sessions.
func standinFlags(cmd *command) runFunc {
	c, fs := cmd.c, cmd.FlagSet
	var from repeated
	fs.Var(&from, "from", "recorded session `DIR` (repeatable; recordings are replayed in the order given)")
	out := fs.String("o", "", "the Tcl file to write (required)")
	timing := fs.String("timing", "none", "none (answer at once), recorded (take the recorded time) or scale=F")
	onUnknown := fs.String("on-unknown", "error", "a command that was not recorded: error (a Tcl error naming it) or tcl (evaluate it)")
	return func(_ context.Context, pos []string) error {
		switch {
		case len(pos) > 0:
			return usageErr("unexpected arguments %q", pos)
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
		var sessions []*review.Session
		for _, d := range from {
			s, err := loadSession(d, review.Options{Payloads: true})
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
		if err := writeOut(*out, buf.Bytes()); err != nil {
			return err
		}
		for _, s := range st.Skipped {
			fmt.Fprintf(c.stderr, "master: standin: not replayed: %s\n", s)
		}
		fmt.Fprintf(c.stderr, "master: standin: %s: %d recordings of %d payloads (id %s)\n", *out, st.Recordings, st.Payloads, st.ID)
		return nil
	}
}

// diffFlags is master diff's flags and its run: it compares two recorded
// runs; exit 1 when they differ.
func diffFlags(cmd *command) runFunc {
	c, fs := cmd.c, cmd.FlagSet
	fs.BoolVar(&c.json, "json", false, "print the comparison as one JSON document")
	var ignore, mask repeated
	fs.Var(&ignore, "ignore", "leave out of values and outputs the lines matching this `REGEX` (repeatable): dates, hosts, pids")
	fs.Var(&mask, "mask", "replace every match of this `REGEX` inside lines of values and outputs by <masked> before comparing (repeatable): a timestamp inside a line")
	return func(_ context.Context, pos []string) error {
		if len(pos) != 2 {
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
		for i, d := range pos {
			dirs := []string{d}
			if !review.IsSession(d) {
				found, err := review.FindSessions(d) // A pool: its sessions together.
				if err != nil {
					return fmt.Errorf("%w: %v", master.ErrSessionMissing, err)
				}
				dirs = found
			}
			runs[i].Dir = d
			for _, sd := range dirs {
				s, err := loadSession(sd, review.Options{Payloads: true})
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
}

//go:build !lean

package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/review"
	"github.com/skillpilot/skillpilot/review/report"
)

// repeated is a flag that may be given several times.
type repeated []string

func (r *repeated) String() string     { return fmt.Sprint(*r) }
func (r *repeated) Set(v string) error { *r = append(*r, v); return nil }

// reportFlags is master report's flags and its run: the timeline report
// of one or more sessions.
func reportFlags(cmd *command) runFunc {
	c, fs := cmd.c, cmd.FlagSet
	var sessions, pools repeated
	fs.Var(&sessions, "session", "session `DIR` (repeatable; default $SP_SESSION_DIR)")
	fs.Var(&pools, "pool", "`DIR` of session directories: each is a lane (repeatable)")
	out := fs.String("o", "", "write to FILE (atomically) instead of stdout")
	format := fs.String("format", "html", "html (self-contained page), svg (the timeline alone), json (the data model) or trace (Trace Event JSON for Perfetto or chrome://tracing)")
	maxBars := fs.Int("max-bars", report.DefaultMaxBars, "commands drawn one by one; above this, lanes are drawn as time bins")
	return func(_ context.Context, pos []string) error {
		if len(pos) > 0 {
			return usageErr("unexpected arguments %q (name sessions with --session DIR or --pool DIR)", pos)
		}
		switch *format {
		case "html", "svg", "json", "trace":
		default:
			return usageErr("--format %q: want html, svg, json or trace", *format)
		}
		dirs, err := sessionDirs(sessions, pools)
		if err != nil {
			return err
		}
		var loaded []*review.Session
		for _, d := range dirs {
			s, err := loadSession(d, review.Options{})
			if err != nil {
				return err
			}
			for _, w := range s.Warnings {
				fmt.Fprintf(c.stderr, "master: report: %s: %s\n", d, w)
			}
			loaded = append(loaded, s)
		}
		m := report.Build(loaded, report.Options{MaxBars: *maxBars})
		var buf bytes.Buffer
		switch *format {
		case "json":
			err = report.WriteJSON(&buf, m)
		case "svg":
			err = report.WriteSVG(&buf, m)
		case "trace":
			err = report.WriteTrace(&buf, m)
		default:
			err = report.WriteHTML(&buf, m)
		}
		if err != nil {
			return err
		}
		if *out == "" {
			_, err = c.stdout.Write(buf.Bytes())
			return err
		}
		return writeOut(*out, buf.Bytes())
	}
}

// sessionDirs lists the session directories named by --session and --pool
// (default: $SP_SESSION_DIR).
func sessionDirs(sessions, pools []string) ([]string, error) {
	dirs := append([]string(nil), sessions...)
	for _, p := range pools {
		found, err := review.FindSessions(p)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", master.ErrSessionMissing, err)
		}
		dirs = append(dirs, found...)
	}
	if len(dirs) == 0 {
		if env := os.Getenv("SP_SESSION_DIR"); env != "" {
			return []string{env}, nil
		}
		return nil, usageErr("give --session DIR or --pool DIR")
	}
	return dirs, nil
}

// loadSession reads a session's history; a directory that is not a
// session is ErrSessionMissing (exit 5).
func loadSession(dir string, opt review.Options) (*review.Session, error) {
	s, err := review.Load(dir, opt)
	if errors.Is(err, review.ErrNotSession) || errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %v", master.ErrSessionMissing, err)
	}
	return s, err
}

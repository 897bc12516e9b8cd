package toolcheck

import (
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"
)

// Status is what a check found.
type Status string

const (
	Holds         Status = "holds"          // the runner's guarantee holds on the tool
	Fails         Status = "fails"          // it does not: Detail says why
	NotApplicable Status = "not_applicable" // the kind has no such thing (a driver's value)
	NotRun        Status = "not_run"        // an earlier failure left nothing to check it on
)

// Check is one row of the table.
type Check struct {
	Name   string `json:"name"`  // its id: start, output, value, error, big_error, utf8, no_newline, cancel, send, restart, stop
	Title  string `json:"title"` // what the table calls it
	Status Status `json:"status"`
	// TookMS is how long it took, where that says something (the
	// start-up, a cancel, a restart).
	TookMS int64 `json:"took_ms,omitempty"`
	// Detail says what happened, with the tool's own words where it
	// printed any.
	Detail string `json:"detail,omitempty"`
	// KeptState, for the cancel, says whether the tool kept its state (a
	// variable set before the cancel); ToolRestarted whether it was
	// restarted.
	KeptState     *bool `json:"kept_state,omitempty"`
	ToolRestarted *bool `json:"tool_restarted,omitempty"`
}

// Recommendation is how to run the runner on the tool.
type Recommendation struct {
	// Command is the runner's command line (DIR for the session).
	Command []string `json:"command"`
	// CancelPolicy is the cancel_policy a command should carry, and why.
	CancelPolicy string `json:"cancel_policy"`
	CancelWhy    string `json:"cancel_why"`
	// StartTimeout is the --start-timeout to give, and why.
	StartTimeout string   `json:"start_timeout"`
	StartWhy     string   `json:"start_why"`
	Notes        []string `json:"notes,omitempty"`
}

// Report is what `runner check` found.
type Report struct {
	Tool   []string `json:"tool"`
	Kind   string   `json:"kind"`
	Driver string   `json:"driver,omitempty"` // the --driver file
	Init   []string `json:"init,omitempty"`
	// OK says every guarantee holds (exit 0).
	OK        bool           `json:"ok"`
	Checks    []Check        `json:"checks"`
	Recommend Recommendation `json:"recommended"`
	// Session is the temporary session, kept when a check failed (or
	// --keep) for its logs; "" once removed.
	Session string `json:"session,omitempty"`
}

// Titles are the checks in the order they run, with what the table calls
// them.
var Titles = []struct{ Name, Title string }{
	{"start", "start-up"},
	{"output", "exact output"},
	{"value", "value"},
	{"error", "an error"},
	{"big_error", "5 KB, error in the middle"},
	{"utf8", "UTF-8"},
	{"no_newline", "no final newline"},
	{"cancel", "cancel"},
	{"send", "send to a read"},
	{"restart", "kill, restart, --init"},
	{"stop", "stop"},
}

func title(name string) string {
	for _, t := range Titles {
		if t.Name == name {
			return t.Title
		}
	}
	return name
}

// Mark is a status as the table shows it.
func (s Status) Mark() string {
	switch s {
	case Holds:
		return "yes"
	case Fails:
		return "NO"
	case NotApplicable:
		return "n/a"
	}
	return "-"
}

// WriteTable prints the report as a table, the recommended command line
// and the verdict.
func (r *Report) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "runner check: %s (kind %s)\n\n", strings.Join(r.Tool, " "), r.Kind)
	wt := len("check")
	for _, c := range r.Checks {
		wt = max(wt, utf8.RuneCountInString(c.Title))
	}
	row := func(t, mark, took, detail string) {
		line := fmt.Sprintf("  %-*s  %-5s %7s  %s", wt, t, mark, took, detail)
		fmt.Fprintln(w, strings.TrimRight(line, " "))
	}
	row("check", "holds", "took", "what happened")
	for _, c := range r.Checks {
		took := ""
		if c.TookMS > 0 {
			took = FormatDuration(time.Duration(c.TookMS) * time.Millisecond)
		}
		row(c.Title, c.Status.Mark(), took, c.Detail)
	}
	fmt.Fprintf(w, "\nRecommended:\n  %s\n", shellLine(r.Recommend.Command))
	fmt.Fprintf(w, "  cancel_policy %s: %s\n", r.Recommend.CancelPolicy, r.Recommend.CancelWhy)
	fmt.Fprintf(w, "  --start-timeout %s: %s\n", r.Recommend.StartTimeout, r.Recommend.StartWhy)
	for _, n := range r.Recommend.Notes {
		fmt.Fprintf(w, "  %s\n", n)
	}
	if r.Session != "" {
		fmt.Fprintf(w, "\nThe check's session is kept for its logs: %s\n", r.Session)
	}
	if r.OK {
		na := 0
		for _, c := range r.Checks {
			if c.Status == NotApplicable {
				na++
			}
		}
		if na > 0 {
			fmt.Fprintf(w, "\nEvery guarantee the check could test holds on this tool (exit 0); %d of %d checks do not apply or could not be made (n/a above: test those in your flow's own checks).\n", na, len(r.Checks))
			return
		}
		fmt.Fprintln(w, "\nEvery guarantee the runner gives on this kind holds on this tool (exit 0).")
		return
	}
	var bad []string
	for _, c := range r.Checks {
		if c.Status == Fails {
			bad = append(bad, c.Title)
		}
	}
	fmt.Fprintf(w, "\nNot every guarantee holds on this tool (exit 1): %s.\n", strings.Join(bad, ", "))
}

// FormatDuration prints d as the table does: 12ms, 0.31s, 1m32s.
func FormatDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
	return d.Round(time.Second).String()
}

// shellLine is argv as a POSIX shell line: a word with anything but
// letters, digits and /._+,@%=:- is single-quoted, so the line can be
// pasted as it is.
func shellLine(argv []string) string {
	words := make([]string, len(argv))
	for i, a := range argv {
		plain := a != ""
		for j := 0; j < len(a) && plain; j++ {
			c := a[j]
			plain = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("/._+,@%=:-", c) >= 0
		}
		if plain {
			words[i] = a
		} else {
			words[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(words, " ")
}

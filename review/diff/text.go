package diff

import (
	"fmt"
	"io"
	"strings"
)

// WriteText writes the comparison for people.
func WriteText(w io.Writer, r *Result) error {
	var b strings.Builder
	fmt.Fprintf(&b, "A: %s\nB: %s\n", r.A, r.B)
	for _, p := range r.Differences {
		if p.PayloadB != "" { // An edited step: one change, not "only in A" plus "only in B".
			fmt.Fprintf(&b, "\n%s  edited step: %q → %q\n", strings.Join(p.Differs, ", "), oneLine(p.Payload), oneLine(p.PayloadB))
		} else {
			fmt.Fprintf(&b, "\n%s  %q (occurrence %d)\n", strings.Join(p.Differs, ", "), oneLine(p.Payload), p.Occurrence)
		}
		switch {
		case p.A == nil:
			fmt.Fprintf(&b, "  only in B: %s %s\n", p.B.CmdID, describe(p.B))
			continue
		case p.B == nil:
			fmt.Fprintf(&b, "  only in A: %s %s\n", p.A.CmdID, describe(p.A))
			continue
		}
		fmt.Fprintf(&b, "  A %s: %s\n  B %s: %s\n", p.A.CmdID, describe(p.A), p.B.CmdID, describe(p.B))
		if p.OutputDiff != "" {
			for _, l := range strings.SplitAfter(strings.TrimRight(p.OutputDiff, "\n"), "\n") {
				b.WriteString("    " + l)
			}
			b.WriteString("\n")
		}
	}
	if len(r.Slower) > 0 && r.Slower[0].DurationMS != 0 {
		b.WriteString("\nlargest duration changes (B − A):\n")
		for _, p := range r.Slower {
			if p.DurationMS == 0 {
				break
			}
			fmt.Fprintf(&b, "  %+dms  %dms → %dms  %q\n", p.DurationMS, p.A.DurationMS, p.B.DurationMS, oneLine(p.Payload))
		}
	}
	for _, wn := range r.Warnings {
		fmt.Fprintf(&b, "warning: %s\n", wn)
	}
	verdict := "the runs agree"
	if !r.Agree {
		verdict = "the runs DIFFER"
	}
	edited := ""
	if r.Edited > 0 {
		edited = fmt.Sprintf(", %d edited", r.Edited)
	}
	fmt.Fprintf(&b, "\n%s: %s matched, %d the same, %d different%s, %d only in A, %d only in B; matched commands took %dms in A, %dms in B\n",
		verdict, commands(r.Matched), r.Same, r.Different, edited, r.OnlyInA, r.OnlyInB, r.DurationA, r.DurationB)
	_, err := io.WriteString(w, b.String())
	return err
}

func describe(s *Side) string {
	v := "no value"
	if s.Value != nil {
		v = fmt.Sprintf("value %q", clip(*s.Value, 80))
	}
	d := fmt.Sprintf("%s (%s), %s, %d bytes of output, %dms", s.Status, s.ExitReason, v, s.Bytes, s.DurationMS)
	if s.Error != "" && s.Status != "error" {
		d += ", " + clip(s.Error, 80)
	}
	return d
}

func oneLine(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "\r", "\\r"), "\n", "\\n")
}

// commands is "1 command" or "N commands".
func commands(n int) string {
	if n == 1 {
		return "1 command"
	}
	return fmt.Sprintf("%d commands", n)
}

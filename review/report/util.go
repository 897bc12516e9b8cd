package report

import (
	"fmt"
	"time"
	"unicode/utf8"
)

// clip returns at most n bytes of s, cut at a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// fmtDur renders a duration compactly for people: 850ms, 12.3s, 4m05s, 2h03m.
func fmtDur(d time.Duration) string {
	switch {
	case d < 0:
		return "?"
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

func fmtMS(ms int64) string { return fmtDur(time.Duration(ms) * time.Millisecond) }

// fmtBytes renders a byte count: 512 B, 1.5 KiB, 3.2 MiB.
func fmtBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

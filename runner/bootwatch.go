package runner

import (
	"bytes"
	"strings"
	"time"
	"unicode/utf8"
)

// bootRounds is how many times the tool may answer the start-up at its
// prompt without running it before the start counts as rejected.
const bootRounds = 4

// bootQuiet is how long the tool must have printed nothing before the
// runner judges a round: the first round waits this long, each later one
// twice as long as the one before (0.5 s, 1 s, 2 s, 4 s: a rejected start
// is known within about 8 s).
const bootQuiet = 500 * time.Millisecond

// bootTail bounds what bootWatch keeps of the tool's start-up output.
const bootTail = 4 << 10

// bootVerdict is what a quiet tool's start-up output says.
type bootVerdict int

const (
	bootWait     bootVerdict = iota // still starting, or not quiet long enough
	bootRetype                      // at its prompt without answering: type the start-up again
	bootRejected                    // answered bootRounds times without running it
)

// bootWatch follows what a starting tool prints, to tell a tool still
// starting from one at its prompt that ignored or rejected the start-up.
// It is a plain value of phaseBooting; times come from the runner's clock.
type bootWatch struct {
	typedAt time.Time // when the start-up was last typed
	lastOut time.Time // when the tool last printed
	lines   int       // whole lines printed since typedAt
	since   int       // bytes printed since typedAt
	writes  int       // outputs (reads of the terminal) since typedAt
	rounds  int       // rounds judged as answered at the prompt
	tries   int       // times the start-up was typed again
	tail    []byte    // the last bootTail bytes printed
	// idle: the last verdict was to wait, and only new output can change
	// it: next has nothing to say until the tool prints again.
	idle bool
}

func newBootWatch(now time.Time) bootWatch { return bootWatch{typedAt: now} }

// typed records that the start-up was typed (again) at now.
func (w *bootWatch) typed(now time.Time) {
	w.typedAt, w.lines, w.since, w.writes = now, 0, 0, 0
	w.tries++
}

// output records bytes the tool printed at now.
func (w *bootWatch) output(b []byte, now time.Time) {
	if len(b) == 0 {
		return
	}
	w.lastOut, w.idle = now, false
	w.since += len(b)
	w.writes++
	w.lines += bytes.Count(b, []byte{'\n'})
	w.tail = append(w.tail, b...)
	if over := len(w.tail) - bootTail; over > 0 {
		w.tail = append(w.tail[:0], w.tail[over:]...)
	}
}

// quietFor is how long the current round waits for silence.
func (w *bootWatch) quietFor() time.Duration { return bootQuiet << min(w.tries, 6) }

// atPrompt reports whether the output so far ends in an unfinished line:
// what a tool waiting for input prints last.
func (w *bootWatch) atPrompt() bool {
	return len(w.tail) > 0 && w.tail[len(w.tail)-1] != '\n'
}

// next is when verdict may say something new; zero: not before the tool
// prints again (a timer due in the past would wake the loop at once, for
// ever).
func (w *bootWatch) next() time.Time {
	if w.idle {
		return time.Time{}
	}
	last := w.typedAt
	if w.lastOut.After(last) {
		last = w.lastOut
	}
	return last.Add(w.quietFor())
}

// verdict judges the round at now. A tool silent since its start is
// starting: typing into a terminal nobody reads would only fill its input
// queue. The tool reacted to what was typed
// (whole lines since then, such as errors) or printed nothing at all since,
// and it sits at a prompt: the round counts, and the start-up is typed
// again, unless bootRounds rounds went this way. A tool printing one line
// bit by bit since (progress dots), or whose last line is whole, is still
// starting: nothing is typed and nothing counts.
func (w *bootWatch) verdict(now time.Time) bootVerdict {
	if n := w.next(); n.IsZero() || now.Before(n) {
		return bootWait
	}
	if !w.atPrompt() || (w.lines == 0 && w.writes > 1) { // Progress on one line, bit by bit.
		w.idle = true
		return bootWait
	}
	w.rounds++
	if w.rounds >= bootRounds {
		return bootRejected
	}
	return bootRetype
}

// quote is the tool's last lines for a reason: ": the tool's last lines:
// "...""; empty when it printed nothing.
func (w *bootWatch) quote() string {
	s := lastLines(w.tail, 5, 600)
	if s == "" {
		return "; the tool printed nothing"
	}
	return "; the tool's last lines: " + s
}

// lastLines returns the last n non-empty lines of b (at most max bytes,
// cut at a UTF-8 boundary), CRs and control bytes dropped, joined with
// " | " and quoted.
func lastLines(b []byte, n, max int) string {
	var keep []string
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.Map(func(r rune) rune {
			if r < 0x20 || r == 0x7f || r == utf8.RuneError {
				return -1
			}
			return r
		}, l)
		if l = strings.TrimSpace(l); l != "" {
			keep = append(keep, l)
		}
	}
	if len(keep) > n {
		keep = keep[len(keep)-n:]
	}
	s := strings.Join(keep, " | ")
	if len(s) > max {
		s = s[len(s)-max:]
		for len(s) > 0 && !utf8.RuneStart(s[0]) {
			s = s[1:]
		}
		s = "…" + s
	}
	if s == "" {
		return ""
	}
	return `"` + s + `"`
}

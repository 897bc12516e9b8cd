package runner

import (
	"bytes"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// bootRounds is how many times the tool may answer the start-up with an
// error at its prompt before the start counts as rejected.
const bootRounds = 4

// bootQuiet is how long the tool must have printed nothing before the
// runner judges a round: the first round waits this long, each later one
// twice as long as the one before (0.5 s, 1 s, 2 s, 4 s: a rejected start
// is known within about 8 s).
const bootQuiet = 500 * time.Millisecond

// bootTail bounds what bootWatch keeps of the tool's start-up output.
const bootTail = 16 << 10

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
	answer  string    // the first line of the last answer that named an error, quoted
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

// verdict judges the start-up at now, typing telling whether lines the
// runner typed still wait for the terminal to take them. It decides from
// evidence only (PROTOCOL.md 11.1):
//
//   - a tool silent since the last typing, one whose last line is whole,
//     or one printing one line bit by bit (progress dots) is still
//     starting: wait (a licence checkout, a design load);
//   - a tool that printed something since the last typing and sits quiet
//     at an unfinished line (a prompt) may have dropped what was typed
//     before it read (Magic): type the start-up again, once the terminal
//     has taken what was typed before;
//   - such a tool whose whole lines since the last typing name an error
//     (answered) has rejected the start-up: a round counts, and after
//     bootRounds rounds the start is rejected.
//
// A tool quiet after a partial line that does not name an error (a
// licence checkout that prints "Checking out license..." and waits) is
// never rejected: it has --start-timeout.
func (w *bootWatch) verdict(now time.Time, typing bool) bootVerdict {
	if n := w.next(); n.IsZero() || now.Before(n) {
		return bootWait
	}
	if typing || !w.atPrompt() || w.since == 0 || (w.lines == 0 && w.writes > 1) {
		w.idle = true // Only new output (or the typist's end, which brings some) can change it.
		return bootWait
	}
	if w.lines > 0 && w.answered() {
		w.rounds++
		if w.rounds >= bootRounds {
			return bootRejected
		}
	}
	return bootRetype
}

// answerWords are what a shell's answer to a line it cannot run says.
// Compiled when first needed, not at the start: compiled in the package's
// init it was 0.3 of the runner's 0.5 ms of init (issue 44, goal 3).
var answerWords = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)error|invalid|unknown|no such|not found|syntax|illegal|unrecogni[sz]ed|not recogni[sz]ed|undefined|not defined|ambiguous|usage`)
})

// answered reports whether the whole lines the tool printed since the
// last typing name an error, and keeps the first such line for the
// reason (answer).
func (w *bootWatch) answered() bool {
	b := w.tail
	if w.since < len(b) {
		b = b[len(b)-w.since:]
	}
	i := bytes.LastIndexByte(b, '\n')
	if i < 0 {
		return false
	}
	for _, l := range bytes.Split(b[:i], []byte{'\n'}) {
		if answerWords().Match(l) {
			w.answer = lastLines(l, 1, 300)
			return true
		}
	}
	return false
}

// answerQuote is the tool's answer to the start-up and its last lines,
// for the reason a start was rejected.
func (w *bootWatch) answerQuote() string {
	if w.answer == "" {
		return w.quote()
	}
	return "; the tool answered " + w.answer + w.quote()
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

// maxQuotedLine bounds each line lastLines quotes.
const maxQuotedLine = 160

// lastLines returns the last n non-empty lines of b (at most max bytes,
// cut at a UTF-8 boundary), CRs and control bytes dropped, joined with
// " | " and quoted.
func lastLines(b []byte, n, max int) string {
	var keep []string
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.Map(func(r rune) rune {
			if r == '\t' {
				return ' '
			}
			if r < 0x20 || r == 0x7f || r == utf8.RuneError {
				return -1
			}
			return r
		}, l)
		// Runs of spaces (a caret under a long line) are one space; a
		// long line (the tool quoting what was typed) is cut.
		if l = strings.Join(strings.Fields(l), " "); l != "" {
			if len(l) > maxQuotedLine {
				l = strings.ToValidUTF8(l[:maxQuotedLine], "") + "…"
			}
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

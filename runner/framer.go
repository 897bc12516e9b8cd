package runner

import (
	"bytes"
	"strings"
)

// maxMarkerLine bounds a line held back because it may be a marker. A done
// marker carries the base64 of the payload's value (at most maxValue bytes)
// and of Tcl's errorInfo and errorCode, so it must fit those plus the
// prefix, token and fields.
const maxMarkerLine = (maxValue+eiMax+ecMax)*4/3 + 1024

// framerMode says what the framer does with the bytes it is fed.
type framerMode int

const (
	// modeDiscard: bytes go to the spool only (prompts, banners, stray
	// output between commands); whole lines are matched against want.
	modeDiscard framerMode = iota
	// modeCapture: bytes are normalised and emitted as command output until
	// a whole line matches want. With stripNL, the newline just before the
	// matching line is dropped too (the runner injected it).
	modeCapture
)

// framer turns raw PTY bytes into command output and whole-line marker
// matches. It scans each byte once and holds back at most one candidate
// line (bounded by maxMarkerLine) plus one newline and a run of CRs, so
// memory stays bounded whatever the output size. Line endings \r+\n are
// normalised to \n; a lone \r is kept, and so are \r bytes right before
// the newline the runner injects ahead of the marker (a payload that
// prints "abc\r" yields exactly "abc\r").
//
// A framer is owned by one goroutine.
type framer struct {
	mode    framerMode
	want    func(line []byte) bool // whole line (without \n) that ends the wait
	prefix  []byte                 // candidate lines start with this
	stripNL bool
	emit    func([]byte) // output sink in modeCapture

	line      []byte // current line in modeDiscard, candidate in modeCapture
	inCand    bool   // modeCapture: line holds a candidate
	lineStart bool
	overflow  bool // modeDiscard: current line too long to be a marker
	pendNL    bool // modeCapture: a held-back \n
	nlCR      int  // the \r run right before the held-back \n
	pendCR    int  // held-back \r run
	out       []byte
	hold      bool   // holdPartial: the current partial line is held in held
	held      []byte // bytes of the current line held back (hold mode)

	// prompts, if set, removes a line driver's prompts before framing
	// (linedriver.go); the spool has the raw bytes.
	prompts *promptFilter

	// A line driver's markers may end a line that began with other text
	// (anywhere): the tool's prompt, or the command's last line of output
	// when it had no newline (Yosys "log -n x", ngspice "shell printf
	// abc"). starts are what such a marker begins with; a candidate right
	// after echoGuard (the print command's text before its {}) is the
	// echo of a line the runner typed, not a marker. pre is the text
	// before the marker on the last line matched: the tool's prompt, and
	// in capture mode the output's unfinished last line, which the runner
	// emits once it knows which part is the prompt (Runner.onLineTail).
	anywhere  bool
	starts    [][]byte
	echoGuard []byte
	pre       []byte
	cur       []byte // anywhere: the current line, not yet emitted
	dropped   []byte // anywhere discard: the last lines dropped (at most anyKeep bytes), for reasons
}

// Bounds of the line an anywhere framer holds back: past anyHold bytes
// without a newline, all but the last anyKeep are emitted (a marker, with
// a prompt before it, fits in anyKeep).
const (
	anyHold = 16 << 10
	anyKeep = 1 << 10
)

// unprompt returns b without the driver's prompts (b itself when the
// driver has none); the result is valid until the next call.
func (f *framer) unprompt(b []byte) []byte {
	if f.prompts == nil {
		return b
	}
	return f.prompts.filter(b)
}

// heldPrompt returns and forgets what the prompt filter holds back.
func (f *framer) heldPrompt() []byte {
	if f.prompts == nil {
		return nil
	}
	return f.prompts.take()
}

func newFramer() *framer { return &framer{lineStart: true} }

// discard switches to modeDiscard until a whole line satisfies want.
func (f *framer) discard(want func([]byte) bool) {
	f.mode, f.want, f.emit = modeDiscard, want, nil
	f.reset()
}

// capture switches to modeCapture: bytes are emitted until a whole line that
// starts with prefix satisfies want.
func (f *framer) capture(prefix string, want func([]byte) bool, stripNL bool, emit func([]byte)) {
	f.mode, f.want, f.prefix, f.stripNL, f.emit = modeCapture, want, []byte(prefix), stripNL, emit
	f.reset()
	// A capture starts right after a matched line, i.e. at a line start.
	f.lineStart = true
}

func (f *framer) reset() {
	f.cur = f.cur[:0]
	f.line = f.line[:0]
	f.inCand, f.overflow, f.pendNL, f.pendCR, f.nlCR = false, false, false, 0, 0
	f.hold, f.held = false, f.held[:0]
}

// feed consumes b. When a wanted line completes, feed returns it (a copy)
// and the number of bytes of b consumed up to and including its newline;
// the caller switches mode and feeds the rest. Otherwise it returns nil,
// len(b).
func (f *framer) feed(b []byte) (matched []byte, n int) {
	if f.anywhere {
		return f.feedAny(b)
	}
	if f.mode == modeDiscard {
		return f.feedDiscard(b)
	}
	return f.feedCapture(b)
}

func (f *framer) feedDiscard(b []byte) ([]byte, int) {
	for i := 0; i < len(b); {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			f.appendLine(b[i:])
			return nil, len(b)
		}
		f.appendLine(b[i : i+j])
		i += j + 1
		line := bytes.TrimRight(f.line, "\r")
		ok := !f.overflow && f.want != nil && f.want(line)
		f.line, f.overflow = f.line[:0], false
		if ok {
			return bytes.Clone(line), i
		}
	}
	return nil, len(b)
}

func (f *framer) appendLine(b []byte) {
	if f.overflow {
		return
	}
	if len(f.line)+len(b) > maxMarkerLine {
		f.overflow = true
		f.line = f.line[:0]
		return
	}
	f.line = append(f.line, b...)
}

func (f *framer) feedCapture(b []byte) ([]byte, int) {
	f.out = f.out[:0]
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case c == '\r':
			f.pendCR++
		case c == '\n':
			crs := f.pendCR
			f.pendCR = 0
			if f.inCand {
				if f.want(f.line) {
					switch {
					case f.pendNL && !f.stripNL:
						f.out = append(f.out, '\n')
					case f.pendNL:
						// The newline was the runner's; the \r bytes
						// before it were the payload's.
						for ; f.nlCR > 0; f.nlCR-- {
							f.out = append(f.out, '\r')
						}
					}
					matched := bytes.Clone(f.line)
					f.flushOut()
					hold, held := f.hold, f.held
					f.reset()
					f.hold, f.held = hold, held
					f.lineStart = true
					return matched, i + 1
				}
				f.releaseCand()
			} else if f.pendNL {
				f.out = append(f.out, '\n')
			}
			f.pendNL, f.lineStart, f.nlCR = true, true, crs
		default:
			if f.pendCR > 0 {
				f.releaseCR()
			}
			f.byteInLine(c, b, &i)
		}
	}
	f.flushOut()
	return nil, len(b)
}

// byteInLine handles an ordinary byte; on a plain content run it copies the
// whole run up to the next \r or \n at once (the fast path).
func (f *framer) byteInLine(c byte, b []byte, i *int) {
	if f.lineStart {
		f.lineStart = false
		if len(f.prefix) > 0 && c == f.prefix[0] {
			f.inCand = true
			f.line = append(f.line[:0], c)
			return
		}
		if f.pendNL {
			f.out = append(f.out, '\n')
			f.pendNL = false
		}
	} else if f.inCand {
		f.line = append(f.line, c)
		k := len(f.line)
		if (k <= len(f.prefix) && c != f.prefix[k-1]) || k > maxMarkerLine {
			f.releaseCand()
		}
		return
	}
	// Plain content: copy up to the next line-ending byte in one go.
	j := *i + 1
	for j < len(b) && b[j] != '\n' && b[j] != '\r' {
		j++
	}
	f.out = append(f.out, b[*i:j]...)
	*i = j - 1
}

func (f *framer) releaseCR() {
	for ; f.pendCR > 0; f.pendCR-- {
		if f.inCand {
			f.line = append(f.line, '\r')
		} else {
			if f.lineStart {
				f.lineStart = false
				if f.pendNL {
					f.out = append(f.out, '\n')
					f.pendNL = false
				}
			}
			f.out = append(f.out, '\r')
		}
	}
}

// releaseCand emits a held-back candidate that turned out to be content.
func (f *framer) releaseCand() {
	if f.pendNL {
		f.out = append(f.out, '\n')
		f.pendNL = false
	}
	f.out = append(f.out, f.line...)
	f.line = f.line[:0]
	f.inCand = false
}

func (f *framer) flushOut() {
	if f.hold && f.emit != nil {
		// Emit complete lines only; the current partial line waits in
		// held for its newline (or for dropPartial).
		if i := bytes.LastIndexByte(f.out, '\n'); i >= 0 {
			if len(f.held) > 0 {
				f.emit(f.held)
				f.held = f.held[:0]
			}
			f.emit(f.out[:i+1])
			f.held = append(f.held, f.out[i+1:]...)
		} else {
			f.held = append(f.held, f.out...)
		}
		f.out = f.out[:0]
		return
	}
	if len(f.out) > 0 && f.emit != nil {
		f.emit(f.out)
	}
	f.out = f.out[:0]
}

// markerStarts sets what an anywhere framer's markers begin with: the
// runner's words (__SP_BEGIN__, __SP_END__, the default prefix) and
// prefix, a command's own.
func (f *framer) markerStarts(prefix string) {
	f.starts = append(f.starts[:0], []byte("__SP_"))
	if !strings.HasPrefix(prefix, "__SP_") {
		f.starts = append(f.starts, []byte(prefix+" "))
	}
}

// feedAny is feed for a line driver (anywhere): lines are whole lines of
// the tool's output, \r+\n normalised to \n, each looked at for a marker
// at its end; in capture mode the others are output.
func (f *framer) feedAny(b []byte) ([]byte, int) {
	f.out = f.out[:0]
	for i := 0; i < len(b); {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			f.cur = append(f.cur, b[i:]...)
			f.boundCur()
			break
		}
		f.cur = append(f.cur, b[i:i+j]...)
		i += j + 1
		line := bytes.TrimRight(f.cur, "\r")
		if k, ok := f.matchAny(line); ok {
			f.pre = append(f.pre[:0], line[:k]...)
			matched := bytes.Clone(line[k:])
			f.cur = f.cur[:0]
			f.flushOut()
			return matched, i
		}
		if f.mode == modeCapture {
			f.out = append(f.out, line...)
			f.out = append(f.out, '\n')
		} else {
			f.dropped = append(append(f.dropped, line...), '\n')
			if over := len(f.dropped) - anyKeep; over > 0 {
				f.dropped = append(f.dropped[:0], f.dropped[over:]...)
			}
		}
		f.cur = f.cur[:0]
	}
	f.flushOut()
	return nil, len(b)
}

// takeDropped returns and forgets the last lines an anywhere framer
// dropped in discard mode.
func (f *framer) takeDropped() []byte {
	d := bytes.Clone(f.dropped)
	f.dropped = f.dropped[:0]
	return d
}

// matchAny finds a marker the framer waits for at the end of line: the
// index where it starts.
func (f *framer) matchAny(line []byte) (int, bool) {
	if f.want == nil {
		return 0, false
	}
	for _, s := range f.starts {
		for k := bytes.LastIndex(line, s); k >= 0; k = bytes.LastIndex(line[:k], s) {
			if len(f.echoGuard) > 0 && bytes.HasSuffix(line[:k], f.echoGuard) {
				continue // The echo of a typed print line.
			}
			if f.want(line[k:]) {
				return k, true
			}
		}
	}
	return 0, false
}

// boundCur keeps the held line within anyHold bytes: in capture mode the
// front of a longer one is output, in discard mode it is dropped.
func (f *framer) boundCur() {
	if len(f.cur) <= anyHold {
		return
	}
	cut := len(f.cur) - anyKeep
	if f.mode == modeCapture {
		f.out = append(f.out, f.cur[:cut]...)
	}
	f.cur = append(f.cur[:0], f.cur[cut:]...)
}

// releasePartial emits, in anywhere capture mode, the held line up to
// where a marker may still begin: output without a newline (a question
// an expect waits for, progress) reaches the output file within the
// runner's flush delay. The part held back is what could still become a
// marker, and with holdPrompt a prompt (the driver's or the learned one)
// that ends the line: the tool's prompt after output without a newline
// ("abc" then "ngspice 4 -> "), whose marker has not come yet, is not
// output (the caller releases it once the tool has been quiet for a
// while: a question may end with the prompt's text). It reports whether
// it emitted anything, and whether it held a prompt back.
func (f *framer) releasePartial(holdPrompt bool) (released, heldPrompt bool) {
	if !f.anywhere || f.mode != modeCapture || len(f.cur) == 0 || f.emit == nil {
		return false, false
	}
	k := f.markerFrom(f.cur)
	if holdPrompt && f.prompts != nil {
		p := f.prompts.endsAt(f.cur[:k])
		k, heldPrompt = p, p < k
	}
	if k > 0 {
		f.emit(f.cur[:k])
		f.cur = append(f.cur[:0], f.cur[k:]...)
	}
	return k > 0, heldPrompt
}

// markerFrom is where in b a marker may begin: the first start in b, or
// the first suffix of b that is the beginning of a start; len(b) if none.
func (f *framer) markerFrom(b []byte) int {
	k := len(b)
	for _, s := range f.starts {
		if i := bytes.Index(b, s); i >= 0 && i < k {
			k = i
		}
		for n := min(len(s)-1, len(b)); n > 0; n-- {
			if bytes.HasSuffix(b, s[:n]) && len(b)-n < k {
				k = len(b) - n
				break
			}
		}
	}
	return k
}

// takePre returns the text before the last marker matched (anywhere).
func (f *framer) takePre() []byte {
	p := bytes.Clone(f.pre)
	f.pre = f.pre[:0]
	return p
}

// finish returns what capture still holds back (a trailing newline, CRs, a
// candidate line, a held partial line) as output; used when a command ends
// without its marker (tool death, cancel), so no printed byte is lost.
func (f *framer) finish() {
	f.releaseHeld()
	if f.mode != modeCapture {
		return
	}
	if f.anywhere {
		if len(f.cur) > 0 && f.emit != nil {
			f.emit(f.cur)
		}
		f.reset()
		return
	}
	f.out = f.out[:0]
	if f.inCand {
		f.releaseCand()
	} else if f.pendNL {
		f.out = append(f.out, '\n')
		f.pendNL = false
	}
	for ; f.pendCR > 0; f.pendCR-- {
		f.out = append(f.out, '\r')
	}
	f.flushOut()
	f.reset()
}

// releaseHeld emits a held-back partial line as output (the command's own
// done marker came after it: it was the command's).
func (f *framer) releaseHeld() {
	if len(f.held) > 0 && f.emit != nil {
		f.emit(f.held)
	}
	f.held = f.held[:0]
	f.hold = false
}

package cli

import (
	"bytes"
	"io"

	"github.com/skillpilot/skillpilot/protocol"
)

// beginWord starts the line the runner's wrapper prints right before a
// payload runs (PROTOCOL.md section 6.2).
const beginWord = "__SP_BEGIN__ "

// maxCleanLine bounds the unterminated line the clean view holds back: a
// longer one cannot be a marker line and is passed on (or dropped outside
// a command).
const maxCleanLine = 64<<10 + 1024

// cleanWriter turns the raw spool into the clean view of `master tail
// --clean`: only what commands printed, as their output files hold it —
// the lines between a command's begin line and its done marker, with
// "\r+\n" line ends normalised to "\n", and without the newline the runner
// injects before the done marker. Prompts, echo, init output and markers
// are left out. It works line by line: an unfinished line is passed on when
// its newline arrives (or when it grows past maxCleanLine).
type cleanWriter struct {
	w     io.Writer
	line  []byte
	token string // the running command's token; "" outside a command
	owed  bool   // a newline is owed before the next output line
	out   []byte // what one Write passes on, written at its end
}

func (c *cleanWriter) Write(b []byte) (int, error) {
	n := len(b)
	c.out = c.out[:0]
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			c.line = append(c.line, b...)
			if len(c.line) > maxCleanLine {
				c.output(c.line, false)
				c.line = c.line[:0]
			}
			break
		}
		c.line = append(c.line, b[:i]...)
		c.endLine()
		c.line = c.line[:0]
		b = b[i+1:]
	}
	if len(c.out) > 0 {
		if _, err := c.w.Write(c.out); err != nil {
			return 0, err
		}
	}
	return n, nil
}

func (c *cleanWriter) endLine() {
	l := bytes.TrimRight(c.line, "\r")
	if tok, ok := bytes.CutPrefix(l, []byte(beginWord)); ok && len(tok) > 0 && bytes.IndexByte(tok, ' ') < 0 {
		c.token, c.owed = string(tok), false // A command without a marker ends at the next begin.
		return
	}
	if c.token == "" {
		return
	}
	if isMarkerLine(l, c.token) {
		c.token, c.owed = "", false
		return
	}
	c.output(l, true)
}

// output passes on a line of command output (complete: with its newline
// owed until the next line shows it was not the runner's).
func (c *cleanWriter) output(l []byte, complete bool) {
	if c.token == "" {
		return
	}
	if c.owed {
		c.out = append(c.out, '\n')
	}
	c.out = append(c.out, l...)
	c.owed = complete
}

// isMarkerLine reports a done marker for token ("<prefix> <token>" then
// the end or a space), or a sync marker of the runner's default prefix.
func isMarkerLine(l []byte, token string) bool {
	sp := bytes.IndexByte(l, ' ')
	if sp <= 0 {
		return false
	}
	prefix, rest := l[:sp], l[sp+1:]
	if after, ok := bytes.CutPrefix(rest, []byte(token)); ok && (len(after) == 0 || after[0] == ' ') {
		return true
	}
	return string(prefix) == protocol.DefaultMarkerPrefix && bytes.Contains(rest, []byte(" rc="))
}

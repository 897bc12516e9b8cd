package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"

	"github.com/skillpilot/skillpilot/fsq"
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
//
// A command that ends without its marker (a timeout or cancel that ended
// the tool) ends where its cmd_end event in log/meta.log says (spool_end):
// what the restarted tool prints before the next command (its prompts) is
// not the command's output.
type cleanWriter struct {
	w     io.Writer
	line  []byte
	token string // the running command's token; "" outside a command
	owed  bool   // a newline is owed before the next output line
	out   []byte // what one Write passes on, written at its end
	pos   int64  // the spool offset of the next byte written
	ends  *cmdEnds
}

func (c *cleanWriter) Write(b []byte) (int, error) {
	n := len(b)
	c.out = c.out[:0]
	if c.ends != nil {
		c.ends.refresh()
		for _, e := range c.ends.list {
			if e.off <= c.pos || e.off > c.pos+int64(len(b)) {
				continue
			}
			k := e.off - c.pos
			c.lines(b[:k])
			b, c.pos = b[k:], e.off
			if c.token == e.cmdID {
				// The command ended here without its marker: its last
				// newline, if any, is its own (no marker follows it).
				if len(c.line) > 0 {
					c.output(c.line, false)
				}
				if c.owed {
					c.out = append(c.out, '\n')
				}
				c.line, c.token, c.owed = c.line[:0], "", false
			}
		}
	}
	c.lines(b)
	c.pos += int64(len(b))
	if len(c.out) > 0 {
		if _, err := c.w.Write(c.out); err != nil {
			return 0, err
		}
	}
	return n, nil
}

func (c *cleanWriter) lines(b []byte) {
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
}

// cmdEnd is where a command's run ends in the spool (its cmd_end event).
type cmdEnd struct {
	off   int64
	cmdID string
}

// cmdEnds reads the cmd_end events of log/meta.log as it grows.
type cmdEnds struct {
	path string
	off  int64 // bytes of meta.log read (whole lines only)
	list []cmdEnd
}

func (m *cmdEnds) refresh() {
	f, err := fsq.OpenRegular(m.path)
	if err != nil {
		return
	}
	defer f.Close()
	if _, err := f.Seek(m.off, io.SeekStart); err != nil {
		return
	}
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return // An unfinished last line is read again next time.
		}
		m.off += int64(len(line))
		var ev protocol.Event
		if json.Unmarshal(line, &ev) == nil && ev.Event == protocol.EvCmdEnd && ev.SpoolEnd != nil {
			m.list = append(m.list, cmdEnd{*ev.SpoolEnd, ev.CmdID})
		}
	}
}

// lastCmdBegin is the spool_start of the last cmd_begin in meta.log at
// path (0 when there is none).
func lastCmdBegin(path string) int64 {
	f, err := fsq.OpenRegular(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	var last int64
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev protocol.Event
		if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Event == protocol.EvCmdBegin && ev.SpoolStart != nil {
			last = *ev.SpoolStart
		}
	}
	return last
}

// lastLinesOffset is where the last n lines of the file at path start, as
// tail(1) counts them (an unfinished last line is a line).
func lastLinesOffset(path string, n int) int64 {
	f, err := fsq.OpenRegular(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0
	}
	end := fi.Size()
	buf := make([]byte, 64<<10)
	seen := 0
	for pos := end; pos > 0; {
		k := min(int64(len(buf)), pos)
		pos -= k
		if _, err := f.ReadAt(buf[:k], pos); err != nil {
			return 0
		}
		for i := k - 1; i >= 0; i-- {
			if buf[i] != '\n' || pos+i == end-1 {
				continue
			}
			if seen++; seen == n {
				return pos + i + 1
			}
		}
	}
	return 0
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

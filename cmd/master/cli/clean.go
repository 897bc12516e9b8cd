package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"

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
//
// Output that merely looks like a marker stays output
// (PROTOCOL.md 6.2 item 4): a done marker is the command's own token after
// a prefix of marker characters (not indented); a sync marker has the
// token of a runner that served the session (sync-<the last 8 characters
// of its session_id>-<n>, known from its runner_start event); and with
// log/meta.log at hand a begin line inside a command is output, the
// command ending only at its marker or where its cmd_end says. The
// carriage returns before the newline the runner injects are the
// payload's and are kept, as in the output file.
type cleanWriter struct {
	w       io.Writer
	line    []byte
	token   string // the running command's token; "" outside a command
	owed    bool   // a newline is owed before the next output line
	owedCR  int    // the carriage returns before that newline
	out     []byte // what one Write passes on, written at its end
	pos     int64  // the spool offset of the next byte written
	lineEnd int64  // the spool offset after the line endLine looks at
	begun   int64  // the spool offset after the running command's begin line
	ends    *cmdEnds
}

func (c *cleanWriter) Write(b []byte) (int, error) {
	n := len(b)
	c.out = c.out[:0]
	if c.ends != nil {
		c.ends.refresh()
		for _, e := range c.ends.list {
			if e.off <= c.pos {
				if c.token == e.cmdID && e.off >= c.begun {
					c.endHere() // Read late (following): it ended before what was passed on.
				}
				continue
			}
			if e.off > c.pos+int64(len(b)) {
				continue
			}
			k := e.off - c.pos
			c.lines(b[:k])
			b, c.pos = b[k:], e.off
			if c.token == e.cmdID {
				c.endHere()
			}
		}
	}
	c.lines(b)
	if len(c.out) > 0 {
		if _, err := c.w.Write(c.out); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// endHere ends the running command where its cmd_end says, without its
// marker: its last newline, if any, is its own (no marker follows it), and
// so are carriage returns at the end of an unfinished last line.
func (c *cleanWriter) endHere() {
	if len(c.line) > 0 {
		c.output(c.line, 0, false)
	}
	if c.owed {
		c.out = append(c.out, '\n')
	}
	c.line, c.token, c.owed, c.owedCR = c.line[:0], "", false, 0
}

// lines consumes b, which starts at spool offset c.pos, and advances c.pos.
func (c *cleanWriter) lines(b []byte) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			c.line = append(c.line, b...)
			c.pos += int64(len(b))
			if len(c.line) > maxCleanLine {
				c.output(c.line, 0, false)
				c.line = c.line[:0]
			}
			break
		}
		c.line = append(c.line, b[:i]...)
		c.pos += int64(i + 1)
		c.lineEnd = c.pos
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

// cmdEnds reads the cmd_end events of log/meta.log as it grows, and the
// session ids of the runners that served the session (their sync tokens).
// A log rotated by retention (PROTOCOL.md section 23) is read as
// log/meta.log.1 first; when meta.log is rotated while it is followed, the
// rest of the file read so far (meta.log.1 now) is read, then the new one
// from its start.
type cmdEnds struct {
	path    string      // log/meta.log
	off     int64       // bytes of meta.log read (whole lines only)
	file    os.FileInfo // the file off is into
	started bool        // log/meta.log.1 was read
	list    []cmdEnd
	sync    map[string]bool // "sync-<last 8 characters of a session_id>-"
}

func (m *cmdEnds) refresh() {
	old := filepath.Join(filepath.Dir(m.path), filepath.Base(protocol.FileMetaOld))
	if !m.started {
		m.started = true
		if f, err := openRegular(old); err == nil {
			m.readFrom(f, 0)
			f.Close()
		}
	}
	f, err := openRegular(m.path)
	if err != nil {
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return
	}
	if m.file != nil && !os.SameFile(fi, m.file) {
		if of, err := openRegular(old); err == nil {
			if ofi, err := of.Stat(); err == nil && os.SameFile(ofi, m.file) {
				m.readFrom(of, m.off) // The rest of the file followed so far.
			}
			of.Close()
		}
		m.off = 0
	}
	m.file = fi
	m.off = m.readFrom(f, m.off)
}

// readFrom reads the events of f from off and returns the offset after
// the last whole line.
func (m *cmdEnds) readFrom(f *os.File, off int64) int64 {
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return off
	}
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return off // An unfinished last line is read again next time.
		}
		off += int64(len(line))
		var ev protocol.Event
		if json.Unmarshal(line, &ev) != nil {
			continue
		}
		switch {
		case ev.Event == protocol.EvCmdEnd && ev.SpoolEnd != nil:
			m.list = append(m.list, cmdEnd{*ev.SpoolEnd, ev.CmdID})
		case ev.Event == protocol.EvRunnerStart, ev.Event == protocol.EvLogRotated:
			if id, _ := ev.Detail["session_id"].(string); len(id) >= 8 {
				if m.sync == nil {
					m.sync = map[string]bool{}
				}
				m.sync["sync-"+id[len(id)-8:]+"-"] = true
			}
		}
	}
}

// lastCmdBegin is the spool_start of the last cmd_begin in meta.log at
// path, or in the log/meta.log.1 beside it when meta.log, just rotated,
// has none (0 when neither has one).
func lastCmdBegin(path string) int64 {
	if last := lastBeginIn(path); last > 0 {
		return last
	}
	return lastBeginIn(filepath.Join(filepath.Dir(path), filepath.Base(protocol.FileMetaOld)))
}

// lastBeginIn is lastCmdBegin of one file.
func lastBeginIn(path string) int64 {
	f, err := openRegular(path)
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
	f, err := openRegular(path)
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
	crs := len(c.line) - len(l)
	if tok, ok := bytes.CutPrefix(l, []byte(beginWord)); ok && len(tok) > 0 && bytes.IndexByte(tok, ' ') < 0 &&
		(c.token == "" || c.ends == nil) {
		// Without meta.log a command without a marker ends at the next
		// begin; with it, at its cmd_end, and a begin line inside a
		// command is its output.
		c.token, c.owed, c.owedCR, c.begun = string(tok), false, 0, c.lineEnd
		return
	}
	if c.token == "" {
		return
	}
	if c.isMarkerLine(l) {
		if c.owed { // The newline was the runner's; the \r bytes before it the payload's.
			c.out = append(c.out, bytes.Repeat([]byte{'\r'}, c.owedCR)...)
		}
		c.token, c.owed, c.owedCR = "", false, 0
		return
	}
	c.output(l, crs, true)
}

// output passes on a line of command output (complete: with its newline,
// after crs carriage returns, owed until the next line shows it was not
// the runner's).
func (c *cleanWriter) output(l []byte, crs int, complete bool) {
	if c.token == "" {
		return
	}
	if c.owed {
		c.out = append(c.out, '\n')
	}
	c.out = append(c.out, l...)
	c.owed, c.owedCR = complete, crs
}

// isMarkerLine reports a done marker of the running command ("<prefix>
// <token>" then the end or a space, prefix being marker characters), or a
// sync marker ("<prefix> sync-<id>-<n>", id being one a runner of the
// session logged; any id when meta.log is not read or names none).
func (c *cleanWriter) isMarkerLine(l []byte) bool {
	sp := bytes.IndexByte(l, ' ')
	if sp <= 0 || !markerChars(l[:sp]) {
		return false
	}
	rest := l[sp+1:]
	word := rest
	if i := bytes.IndexByte(rest, ' '); i >= 0 {
		word = rest[:i]
	}
	if string(word) == c.token {
		return true
	}
	tok, ok := bytes.CutPrefix(word, []byte("sync-"))
	dash := bytes.LastIndexByte(tok, '-')
	if !ok || dash <= 0 || dash == len(tok)-1 || !digits(tok[dash+1:]) {
		return false
	}
	if c.ends == nil || len(c.ends.sync) == 0 { // No runner_start named a session_id (a seed runner's log).
		return true
	}
	return c.ends.sync[string(word[:len("sync-")+dash+1])]
}

// markerChars reports whether b is a marker prefix's characters
// ([A-Za-z0-9._-], PROTOCOL.md section 4).
func markerChars(b []byte) bool {
	for _, ch := range b {
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '.' || ch == '_' || ch == '-') {
			return false
		}
	}
	return len(b) > 0
}

func digits(b []byte) bool {
	for _, ch := range b {
		if ch < '0' || ch > '9' {
			return false
		}
	}
	return len(b) > 0
}

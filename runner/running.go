package runner

// The running command: what the tool is executing, its output as it
// comes, its deadline and how it ends (its result job). The owner goroutine
// keeps one in Runner.cur; intake.go takes commands in, command.go starts
// them and routes their output, finish.go ends them.

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"math/rand/v2"
	"os"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/protocol"
)

const payloadExt = ".payload"

var newline = []byte{'\n'}

// running is the command the tool is executing.
type running struct {
	cmd        *protocol.Command
	name       string
	start      time.Time
	deadline   time.Time // zero: no timeout
	spoolStart int64
	out        *os.File
	w          *bufio.Writer
	sum        hash.Hash
	bytes      int64
	lines      int64
	begun      bool   // the begin line was seen: output is being captured
	ended      bool   // a line driver's end line was seen: the payload ran to its end
	notBegun   int    // tools that died before it began, this one included (rerun)
	lazyDone   bool   // its done line is still to be typed (a line driver's file command: Runner.typeDone)
	endPre     []byte // what preceded the end line on its line (onLineTail)
	payload    string // its payload file (a name in the session), if any
	payloadSHA string // sha256 of the payload, as cmd_begin and the result say ("" for none)
	// Set once the command is being ended by the runner rather than by
	// its marker (timeout, cancel, lease, force stop).
	endStatus protocol.Status
	endReason protocol.ExitReason
	endMsg    string
	endCtx    map[string]any // who ended it, for its error's context (errcontext.go)
	doneSeen  bool           // its done marker arrived after an interrupt
	marker    done
	// raw is its command file's bytes, as claimed: the file is made again
	// from them if it leaves inflight/ while it runs (keepRunningCommandFile).
	raw []byte
	// nonce is the secret its done line must carry (n=), "" for none: a
	// line driver's, or marker.mode payload_contains (newNonce).
	nonce     string
	outErr    error      // writing the output file failed
	toolStart int64      // which start of the tool runs it (state.json tool_starts)
	last      []byte     // the output after its last newline, at most maxLastLine bytes
	lastOut   time.Time  // when it last printed (clk); its start until then
	win       outWindow  // its recent output, for expect (input.go)
	cursor    int64      // its expect cursor: the end of the last match a send consumed
	echo      echoFilter // the terminal's echo of delivered input (echo.go)
	budget    int64      // its output budget (0: none) and what it printed past it (budget.go)
	dropped   int64
	limitStop bool // it passed its budget (acted on once)
	limitEnds bool // the budget is what ends it (no earlier interrupt)
	// reported is the spool offset its output progress was reported up
	// to (progress.go), at reportedAt.
	reported   int64
	reportedAt time.Time
	// A line driver's error pattern (linedriver.go): the first output
	// line that matched it, and the current line so far (bounded).
	errLine   string
	lineSoFar []byte
}

// maxErrLine bounds the line kept for the error pattern and error.message.
const maxErrLine = 4096

// scanError looks for ld's error pattern in output b, line by line; the
// first line that matches is kept for the result.
func (c *running) scanError(b []byte, ld *lineDriver) {
	if ld.errRe == nil || c.errLine != "" {
		return
	}
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		part := b
		if i >= 0 {
			part = b[:i]
		}
		if room := maxErrLine - len(c.lineSoFar); room > 0 {
			c.lineSoFar = append(c.lineSoFar, part[:min(room, len(part))]...)
		}
		if i < 0 {
			return
		}
		c.endLine(ld)
		if c.errLine != "" {
			return
		}
		b = b[i+1:]
	}
}

// checkLastLine checks an unfinished last line of output (no newline
// before the done marker) against ld's error pattern.
func (c *running) checkLastLine(ld *lineDriver) {
	if len(c.lineSoFar) > 0 {
		c.endLine(ld)
	}
}

// endLine checks the line so far against ld's error pattern.
func (c *running) endLine(ld *lineDriver) {
	l := bytes.TrimRight(c.lineSoFar, "\r")
	if ld.errRe != nil && ld.errRe.Match(l) {
		c.errLine = string(bytes.ToValidUTF8(l, []byte("\uFFFD")))
	}
	c.lineSoFar = c.lineSoFar[:0]
}

// maxLastLine bounds state.json's current_last_line.
const maxLastLine = 256

// write appends normalised output; it is the framer's sink. A write error
// (a full disk) is kept, and returned: the result then says the output is
// incomplete.
func (c *running) write(b []byte) error {
	c.account(b)
	_, err := c.w.Write(b)
	if err != nil && c.outErr == nil {
		c.outErr = err
	}
	return err
}

// errOutputSuspended is a running command's outErr when output it printed
// was not written because the disk is full (Runner.noSpace).
var errOutputSuspended = errors.New("output printed while the disk was full was not written")

// skip accounts for output that is not written (a full disk): the result
// says the output file is incomplete.
func (c *running) skip(b []byte) {
	c.account(b)
	if c.outErr == nil {
		c.outErr = errOutputSuspended
	}
}

// account records output in the command's counters, expect window and
// last line.
func (c *running) account(b []byte) {
	c.bytes += int64(len(b))
	c.lines += int64(bytes.Count(b, newline))
	c.sum.Write(b)
	c.win.add(b)
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		c.last = append(c.last[:0], b[i+1:]...)
	} else {
		c.last = append(c.last, b...)
	}
	if len(c.last) > maxLastLine {
		c.last = append(c.last[:0], c.last[len(c.last)-maxLastLine:]...)
	}
}

// lastLine returns the partial last line for state.json: whole UTF-8
// characters only.
func (c *running) lastLine() string {
	b := trimPartialRune(c.last)
	for len(b) > 0 && !utf8.RuneStart(b[0]) {
		b = b[1:]
	}
	return string(b)
}

// due is c's deadline, unless it is already being ended (or has none):
// then zero.
func (c *running) due() time.Time {
	if c.endStatus != "" {
		return time.Time{}
	}
	return c.deadline
}

// describeState fills state.json's current_* fields at now.
func (c *running) describeState(st *protocol.State, now time.Time) {
	id, last, quiet, n := c.cmd.CmdID, c.lastLine(), now.Sub(c.lastOut).Milliseconds(), c.bytes
	st.CurrentCmdID, st.CurrentSeq, st.CurrentStart = &id, c.cmd.Seq, protocol.Time{Time: c.start}
	st.CurrentTraceID, st.CurrentLabels = c.cmd.TraceID, c.cmd.Labels
	st.CurrentLastLine, st.CurrentQuietMS, st.CurrentOutBytes = &last, &quiet, &n
}

// describeBeat fills the heartbeat's current_* fields.
func (c *running) describeBeat(hb *protocol.Heartbeat) {
	hb.CurrentCmdID, hb.CurrentOutBytes = c.cmd.CmdID, c.bytes
}

// describeSnapshot fills the metrics snapshot's figures of c.
func (c *running) describeSnapshot(s *Snapshot) {
	s.Busy, s.CurrentOutputBytes = true, c.bytes
	s.CurrentCmdID, s.CurrentTraceID = c.cmd.CmdID, c.cmd.TraceID
}

// is reports whether c is command id; false when nothing runs (c nil).
func (c *running) is(id string) bool { return c != nil && c.cmd.CmdID == id }

// endWith records that the runner ends c as status, for reason (policy's
// when empty), with msg, unless it already does. It reports whether this
// was the first.
func (c *running) endWith(status protocol.Status, reason protocol.ExitReason, msg string, policy protocol.CancelPolicy) bool {
	if c.endStatus != "" {
		return false
	}
	c.endStatus, c.endMsg = status, msg
	c.endReason = reason
	if reason == "" {
		c.endReason = protocol.ExitReason(policy)
	}
	return true
}

// endError is how the runner ends c (ok false: it does not), after the
// tool's exit ex: the status, reason and error of c's result.
func (c *running) endError(ex *toolExit) (protocol.Status, protocol.ExitReason, *protocol.Error, bool) {
	if c.endStatus == "" {
		return "", "", nil, false
	}
	return c.endStatus, c.endReason, &protocol.Error{Code: codeFor(c.endStatus, c.endReason), Message: c.endMsg,
		Context: c.endContext(c.endStatus, ex)}, true
}

// timedOut reports whether c's deadline has passed at now (and it is not
// already being ended), and says so.
func (c *running) timedOut(now time.Time) (msg string, ok bool) {
	if c.endStatus == "" && !c.deadline.IsZero() && !now.Before(c.deadline) {
		return "timed out after " + c.deadline.Sub(c.start).String(), true
	}
	return "", false
}

// about names c in e (cmd_id, seq, trace_id, labels).
func (c *running) about(e protocol.Event) protocol.Event {
	e.CmdID, e.Seq, e.TraceID, e.Labels = c.cmd.CmdID, c.cmd.Seq, c.cmd.TraceID, c.cmd.Labels
	return e
}

// sending records that h's bytes are about to be written into c's
// terminal: its expect match, if any, moves c's cursor, and with echo on
// their echo is the terminal's, not the tool's output.
func (c *running) sending(h *heldReq, echo bool) {
	if h.matched {
		c.cursor = h.match[1]
	}
	if echo {
		c.echo.expect(h.req.Data)
	}
}

// newRunning is cmd (read from the queue file name) starting at now, with
// its output going to out from spool offset spoolStart, run by the tool's
// toolStart-th start.
func newRunning(cmd *protocol.Command, name string, now time.Time, toolStart, spoolStart int64, out *os.File) *running {
	return &running{cmd: cmd, name: name, start: now, lastOut: now, toolStart: toolStart, spoolStart: spoolStart, out: out,
		w: bufio.NewWriterSize(out, 64<<10), sum: sha256.New(), reported: spoolStart}
}

// newNonce returns a command's secret for its done line (running.nonce):
// 12 characters of [a-z0-9] from the process's random source, which a
// payload cannot read. It guards against output that happens to look like
// the command's done line (a log of an earlier run with the same cmd_ids,
// a payload echoing its own marker), not against a payload that inspects
// the helper's call frame (PROTOCOL.md 6.4).
func newNonce() string {
	const chars = "abcdefghijklmnopqrstuvwxyz0123456789"
	var b [12]byte
	for i := range b {
		b[i] = chars[rand.IntN(len(chars))]
	}
	return string(b[:])
}

// limit sets c's timeout (0: none) and output budget (0: none).
func (c *running) limit(timeout time.Duration, budget int64) {
	if timeout > 0 {
		c.deadline = c.start.Add(timeout)
	}
	c.budget = budget
}

// printed takes output b that c printed at now, and passes it on to emit
// less the terminal's echo of delivered input (echo.go).
func (c *running) printed(b []byte, now time.Time, emit func([]byte)) {
	c.lastOut = now
	c.echo.feed(b, emit)
}

// doneLine reports whether l is c's own done marker, and keeps it.
func (c *running) doneLine(l []byte) bool {
	d, ok := matchDone(l, c.cmd.Marker.Prefix, c.cmd.Marker.Token)
	if ok && d.nonce != c.nonce {
		return false // Not the helper's: a payload printed "<prefix> <token> ..." (PROTOCOL.md 6.2).
	}
	if ok {
		c.marker, c.doneSeen = d, true
	}
	return ok
}

// markerOutcome is how c's done marker ends it (endOutcome); tcl: the
// tool is Tcl.
func (c *running) markerOutcome(tcl bool) (protocol.Status, *protocol.Error) {
	return endOutcome(c.endFacts(tcl))
}

// lineOutcome is how a line driver's done line ends c (endOutcome).
func (c *running) lineOutcome(ld *lineDriver) (protocol.Status, *protocol.Error) {
	f := c.endFacts(false)
	f.line, f.ended, f.injected = true, c.ended, c.cmd.Marker.Mode == protocol.MarkerRunnerInject
	f.sourceless, f.stopsAtError = ld.spec.Source == "", ld.spec.StopsAtError
	return endOutcome(f)
}

// endFacts are c's facts for endOutcome, as a Tcl or shell command's.
func (c *running) endFacts(tcl bool) endFacts {
	d := c.marker
	return endFacts{errLine: c.errLine, hasRC: d.hasRC, rc: d.rc, value: string(d.value),
		errorInfo: string(d.errorInfo), errorCode: string(d.errorCode), tcl: tcl}
}

// endFacts are the plain values that decide how a command that printed
// its done line ended.
type endFacts struct {
	errLine   string // the first output line that matched the error pattern
	hasRC     bool   // the done line carries a return code
	rc        int
	value     string // the done line's value (a Tcl error's message)
	errorInfo string
	errorCode string
	tcl       bool // the tool is Tcl: 2 (TCL_RETURN) is a return, not a failure
	// A line driver's command (PROTOCOL.md 11.1):
	line         bool
	ended        bool // its end line was seen: the payload ran to its end
	injected     bool // the runner typed the begin, end and done lines
	sourceless   bool // the driver has no file command: the payload was typed
	stopsAtError bool // the tool stops a payload at its first error (yosys)
}

// endOutcome is PROTOCOL.md's rule for a command whose done line came
// (6.4, 11.1). First match wins:
//
//   - a line driver's payload that did not run to its end (no end line) is
//     an error: the first line matching the error pattern says why, or
//     that the tool stopped the payload (a file command), or that the
//     payload's last statement was unfinished (typed lines);
//   - a line driver's tool that stops at its first error: ok;
//   - a line matching the error pattern: error, that line its message;
//   - return code 0 or none, or 2 from Tcl: ok;
//   - another return code: error, its message the Tcl error's message
//     (with errorInfo and errorCode), or the code.
func endOutcome(f endFacts) (protocol.Status, *protocol.Error) {
	switch {
	case f.line && !f.ended && f.injected:
		msg := "the tool stopped running the payload before its end"
		if f.sourceless {
			msg = "the tool did not run the line typed after the payload: the payload's last statement is unfinished (an open block, bracket or quote took that line)"
		}
		if f.errLine != "" {
			msg = f.errLine
		}
		return protocol.StatusError, &protocol.Error{Code: protocol.CodeToolError, Message: msg,
			Context: errContext("matched", "no end line")}
	case f.line && f.stopsAtError:
		return protocol.StatusOK, nil
	case f.errLine != "":
		return protocol.StatusError, &protocol.Error{Code: protocol.CodeToolError, Message: f.errLine,
			Context: errContext("matched", "error pattern")}
	case !f.hasRC || f.rc == 0 || (f.tcl && f.rc == 2):
		return protocol.StatusOK, nil
	}
	msg := fmt.Sprintf("the payload ended with return code %d", f.rc)
	if f.tcl && f.value != "" {
		msg = f.value
	}
	return protocol.StatusError, &protocol.Error{Code: protocol.CodeToolError, Message: msg,
		ErrorInfo: f.errorInfo, ErrorCode: f.errorCode}
}

// flush writes c's buffered output into its output file, where masters
// follow it. A failure is kept, and returned: the result then says the
// output is incomplete.
func (c *running) flush() error {
	err := c.w.Flush()
	if err != nil && c.outErr == nil {
		c.outErr = err
	}
	return err
}

// resumeOutput lets c's output file resume after a full disk: a
// bufio.Writer keeps its error, so a failed one is replaced by a fresh one
// (what it held is counted lost).
func (c *running) resumeOutput() {
	if c.w.Flush() != nil {
		c.w.Reset(c.out)
	}
}

// syncOutput sends c's written output to the file server (nil c: nothing
// runs).
func (c *running) syncOutput() error {
	if c == nil || c.out == nil {
		return nil
	}
	return unix.Fdatasync(int(c.out.Fd()))
}

// end is the result job of c, ended with status, reason and errInfo (exit:
// how the tool ended, if it did) at now, its output in the spool up to
// spoolEnd. Its output was flushed (flush).
func (c *running) end(status protocol.Status, reason protocol.ExitReason, errInfo *protocol.Error, exit *toolExit, now time.Time, spoolEnd int64) resultJob {
	res := &protocol.Result{
		CmdID: c.cmd.CmdID, Seq: c.cmd.Seq, Status: status, ExitReason: reason,
		StartTS: protocol.Time{Time: c.start}, EndTS: protocol.Time{Time: now},
		OutputPath: rel(protocol.DirOutput, protocol.OutputName(c.name)),
		Stats:      protocol.Stats{Bytes: c.bytes, Lines: c.lines, DurationMS: now.Sub(c.start).Milliseconds()},
		SpoolStart: c.spoolStart, SpoolEnd: spoolEnd, Error: errInfo,
		OutputSHA256: hex.EncodeToString(c.sum.Sum(nil)),
		CommandPath:  rel(protocol.DirArchive, c.name),
		TraceID:      c.cmd.TraceID, Labels: c.cmd.Labels,
	}
	if c.marker.hasRC {
		rc := c.marker.rc
		res.ToolRC = &rc
	}
	if c.marker.hasValue {
		v := string(c.marker.value)
		res.Value, res.ValueTruncated = &v, c.marker.truncated
	}
	res.ToolStart = c.toolStart
	if exit != nil {
		res.ExitCode, res.Signal, res.ToolRestarted = exit.code, exit.signal, true
	}
	c.describeLimit(res)             // budget.go
	res.PayloadSHA256 = c.payloadSHA // Hashed for cmd_begin already; "" lets the writer hash it.
	return resultJob{kind: jobRun, name: c.name, res: res, out: c.out, outErr: c.outErr,
		cmdFile: rel(protocol.DirInflight, c.name), keepAt: res.CommandPath, payload: c.payload, text: c.cmd.Payload, raw: c.raw}
}

// runLine prepares c's payload (inline, or as a file in inflight/ of
// root) and returns the line drv types.
func (c *running) runLine(root *fsq.Root, drv driver) (string, error) {
	m := c.cmd.Marker
	wrap := m.Mode == protocol.MarkerRunnerInject
	// An empty payload goes through a (zero-length) file: the drivers read
	// inline == "" as "the payload is in file".
	if wrap && c.cmd.Payload != "" && len(c.cmd.Payload) <= drv.inlineMax() {
		return drv.run("", c.cmd.Payload, m.Prefix, m.Token, c.nonce, true), nil
	}
	c.payload = rel(protocol.DirInflight, c.name+payloadExt)
	f, err := root.CreateNew(c.payload, 0o600) // Never through a symlink planted there.
	if err != nil {
		return "", err
	}
	_, err = f.WriteString(drv.payloadFile(c.cmd.Payload, m.Token))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", err
	}
	// The tool opens the file by its path (it cannot be handed an fd).
	path := root.Abs(c.payload)
	if ld := drv.line(); ld != nil && wrap {
		// A line driver's done line is typed once the payload file has
		// run (lazyDone): typed now, a payload that reads the terminal
		// would read it.
		c.lazyDone = true
		return ld.sourceLine(path), nil
	}
	return drv.run(path, "", m.Prefix, m.Token, c.nonce, wrap), nil
}

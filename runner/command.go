package runner

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"os"
	"path/filepath"
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
	id, last, quiet := c.cmd.CmdID, c.lastLine(), now.Sub(c.lastOut).Milliseconds()
	st.CurrentCmdID, st.CurrentSeq, st.CurrentStart = &id, c.cmd.Seq, protocol.Time{Time: c.start}
	st.CurrentTraceID, st.CurrentLabels = c.cmd.TraceID, c.cmd.Labels
	st.CurrentLastLine, st.CurrentQuietMS = &last, &quiet
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

// unsent records that the last n bytes of a send were not written: their
// echo will not come.
func (c *running) unsent(n int) { c.echo.truncate(n) }

// newRunning is cmd (read from the queue file name) starting at now, with
// its output going to out from spool offset spoolStart, run by the tool's
// toolStart-th start.
func newRunning(cmd *protocol.Command, name string, now time.Time, toolStart, spoolStart int64, out *os.File) *running {
	return &running{cmd: cmd, name: name, start: now, lastOut: now, toolStart: toolStart, spoolStart: spoolStart, out: out,
		w: bufio.NewWriterSize(out, 64<<10), sum: sha256.New(), reported: spoolStart}
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
	if ok {
		c.marker, c.doneSeen = d, true
	}
	return ok
}

// markerOutcome is how c's done marker ends it: ok for return code 0 or
// 2 (or none), else a tool_error whose message is the marker's value when
// tcl (the tool is Tcl) and it has one.
func (c *running) markerOutcome(tcl bool) (protocol.Status, *protocol.Error) {
	if c.errLine != "" {
		return protocol.StatusError, &protocol.Error{Code: protocol.CodeToolError, Message: c.errLine,
			Context: errContext("matched", "error pattern")}
	}
	d := c.marker
	if !d.hasRC || d.rc == 0 || d.rc == 2 { // 2 is Tcl's TCL_RETURN: a payload that says "return".
		return protocol.StatusOK, nil
	}
	msg := fmt.Sprintf("the payload ended with return code %d", d.rc)
	if tcl && d.hasValue && len(d.value) > 0 {
		msg = string(d.value)
	}
	return protocol.StatusError, &protocol.Error{Code: protocol.CodeToolError, Message: msg}
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
		StartTS: protocol.Time{Time: c.start}, EndTS: protocol.Now(),
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
		cmdFile: rel(protocol.DirInflight, c.name), keepAt: res.CommandPath, payload: c.payload, text: c.cmd.Payload}
}

// perTurn bounds how many queued files nextCommand handles in one turn of
// the owner loop: 10,000 invalid files are rejected a batch at a time, with
// heartbeats, control requests and results served in between.
const perTurn = 64

// nextCommand takes queued commands in (seq, name) order until one starts,
// the queue is empty, or perTurn files were handled (then moreQueued
// brings the loop back at once). Files that cannot run are answered here;
// their results go to the result writer. Nothing starts before the first
// full listing of queue/ is known, so that a command dropped right after
// the start cannot overtake a backlog with lower seqs.
func (r *Runner) nextCommand() {
	r.queue.setMore(false)
	if len(r.queue.pend.ready)+len(r.queue.pend.deferred) > 0 && r.layout.err == nil && r.cur == nil {
		// queue/ is checked before any file of it is taken: replaced by
		// someone else's directory, it is not served (checkLayout clears
		// this once it is fixed).
		if err := checkSubdir(r.root, protocol.DirQueue, r.layout.perms, runnerEUID()); err != nil {
			r.setLayoutErr(err)
		}
	}
	for n := 0; r.cur == nil && r.tool.ready() && r.stop.mode == "" && r.pending.err == nil && r.layout.err == nil && r.queue.scan.listed; n++ {
		if n == perTurn || len(r.results.jobs) == cap(r.results.jobs) {
			r.queue.setMore(len(r.results.jobs) != cap(r.results.jobs))
			return
		}
		e := r.queue.pend.pop()
		if e == nil {
			return
		}
		r.status.dirty = true
		r.tryStart(e)
	}
}

func (r *Runner) tryStart(e *pendingEntry) {
	if r.queue.hasResult(e.name) {
		// Checked before the file is even read: whatever now sits under
		// a name that has a result (a symlink, a directory, a FIFO, a
		// huge file) is a re-drop, never a reason for a second result.
		r.skipDone(e.name)
		return
	}
	if e.misnamed != "" {
		r.reject(e, e.misnamed, nil)
		return
	}
	qpath := rel(protocol.DirQueue, e.name)
	data, fi, err := r.root.ReadFile(qpath, protocol.MaxCommandSize)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return // Withdrawn, or claimed by someone else.
	case errors.Is(err, fsq.ErrTooLarge):
		r.reject(e, fmt.Sprintf("file is larger than %d bytes", protocol.MaxCommandSize), errContext("limit", int64(protocol.MaxCommandSize)))
		return
	case errors.Is(err, fsq.ErrSymlink), errors.Is(err, fsq.ErrNotRegular):
		r.reject(e, "queue entries must be regular files, not symlinks or other file types ("+err.Error()+")", nil)
		return
	case errors.Is(err, os.ErrPermission):
		r.reject(e, "the runner cannot read this file ("+err.Error()+"); in a group-shared session masters must create files readable by the group (mode 0660)", nil)
		return
	case err != nil:
		// A transient error (ESTALE on NFS) is retried, but not forever:
		// after --parse-grace the file is answered with the error.
		if e.firstBad.IsZero() {
			e.firstBad = r.clk.Now()
		}
		if r.clk.Now().Sub(e.firstBad) >= r.cfg.ParseGrace {
			r.reject(e, "the runner cannot read this file: "+err.Error(), nil)
			return
		}
		r.log.Warn("read queued command; will retry", "name", e.name, "err", err)
		r.queue.retryAt(e, r.clk.Now().Add(min(r.cfg.Poll, r.cfg.ParseGrace)))
		return
	}
	cmd, err := protocol.ParseCommand(e.name, data)
	if errors.Is(err, protocol.ErrIncomplete) && r.queue.stillWriting(e, fi, r.clk.Now(), r.cfg.ParseGrace) {
		return
	}
	if err != nil {
		r.reject(e, err.Error(), contextOf(err))
		return
	}
	if cmd.Kind != r.cfg.Kind {
		msg := fmt.Sprintf("kind: this runner runs %s payloads, not %s", r.cfg.Kind, cmd.Kind)
		if _, preset := Preset(string(cmd.Kind)); !preset && cmd.Kind != protocol.KindTcl && cmd.Kind != protocol.KindSh {
			msg = fmt.Sprintf("kind: unknown kind %q (this runner runs %s payloads)", cmd.Kind, r.cfg.Kind)
		}
		r.reject(e, msg, errContext("field", "kind"))
		return
	}
	if r.queue.done[cmd.CmdID] != "" {
		r.reject(e, fmt.Sprintf("cmd_id %q already has a result under another seq; cmd_ids must be unique", cmd.CmdID), nil)
		return
	}
	r.start(e.name, qpath, cmd)
}

// hasResult reports whether name has a result, on disk or on its way there.
func (q *cmdQueue) hasResult(name string) bool {
	if q.settling[name] {
		return true
	}
	// Only a regular file is a result: anything else there (a FIFO, a
	// symlink) is moved aside when the result is written (displace).
	fi, err := q.root.Lstat(rel(protocol.DirResult, name))
	return err == nil && fi.Mode().IsRegular()
}

// stillWriting decides whether an unparsable file may be a writer still
// writing: it is given ParseGrace (on our clock) after it last changed size
// or mtime, then rejected.
func (q *cmdQueue) stillWriting(e *pendingEntry, fi os.FileInfo, now time.Time, grace time.Duration) bool {
	if e.firstBad.IsZero() || fi.Size() != e.lastSize || !fi.ModTime().Equal(e.lastMod) {
		e.firstBad, e.lastSize, e.lastMod = now, fi.Size(), fi.ModTime()
	}
	if now.Sub(e.firstBad) >= grace {
		return false
	}
	q.pend.deferUntil(e, now.Add(min(100*time.Millisecond, grace)))
	return true
}

// skipDone clears a queued name that already has a result: the entry
// (whatever its type) is moved into tmp/ and deleted there, and a
// cmd_skipped event says so. The result that stands is never touched.
func (r *Runner) skipDone(name string) {
	what := "a file"
	if fi, err := r.root.Lstat(rel(protocol.DirQueue, name)); err == nil {
		what = fsq.FileType(fi)
	} else if errors.Is(err, os.ErrNotExist) {
		return
	}
	if !r.queue.discard(rel(protocol.DirQueue, name)) {
		return
	}
	r.queue.skipped++
	r.status.dirty = true
	seq, id, _ := protocol.ParseCommandName(name)
	r.log.Info("skipping a command that already has a result", "name", name)
	r.event(protocol.Event{Event: protocol.EvSkipped, CmdID: id, Seq: seq, Detail: map[string]any{
		"reason": "result exists", "file": rel(protocol.DirQueue, name), "type": what}})
}

// discard moves a session entry into tmp/ and removes it there (a
// directory with everything in it): the name is free at once, and tmp/ is
// emptied at the next start should the removal fail.
func (q *cmdQueue) discard(relPath string) bool {
	q.discards++
	dst := rel(protocol.DirTmp, fmt.Sprintf("discard-%d-%s", q.discards, filepath.Base(relPath)))
	if err := q.root.Rename(relPath, dst); err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			q.log.Warn("cannot move aside", "file", relPath, "err", err)
		}
		return false
	}
	_ = q.root.RemoveAll(dst) // Best effort: tmp/ is emptied at every start.
	return true
}

// reject answers an invalid command file with an invalid_request result
// under the same name and moves the file to log/rejected/ for inspection.
// The result is written by the result writer, off the owner goroutine. A
// file whose name yields no cmd_id (mycmd.json) gets no result: it is
// moved to log/rejected/ and a cmd_rejected event names it and the rule.
// ctx is the error's context beyond the file (the field, the limit).
func (r *Runner) reject(e *pendingEntry, msg string, ctx map[string]any) {
	id, seq, derived := protocol.DeriveCmdID(e.name)
	code := protocol.CodeInvalidRequest
	ctx = addContext(ctx, "file", rel(protocol.DirQueue, e.name))
	if _, _, err := protocol.ParseCommandName(e.name); err == nil && r.queue.done[id] != "" {
		code = protocol.CodeDuplicateCmdID
		ctx = addContext(ctx, "cmd_id", id, "other_result", rel(protocol.DirResult, r.queue.done[id]))
	}
	ipath := rel(protocol.DirInflight, e.name)
	if !r.claim(e.name, ipath) {
		return
	}
	r.log.Warn("rejected an invalid command", "name", e.name, "error", msg)
	if !derived {
		r.rejectNameless(e.name, ipath, msg)
		return
	}
	res := &protocol.Result{CmdID: id, Seq: seq, Status: protocol.StatusError, ExitReason: protocol.ReasonInvalidRequest,
		Error: &protocol.Error{Code: code, Message: msg, Context: ctx}, CommandPath: rel(protocol.DirRejected, e.name)}
	r.submitResult(resultJob{kind: jobRejected, name: e.name, res: res, cmdFile: ipath, keepAt: res.CommandPath})
}

// rejectNameless moves a file without a derivable cmd_id to log/rejected/
// (under a new name if one is taken) and logs it.
func (r *Runner) rejectNameless(name, ipath, msg string) {
	dst := rel(protocol.DirRejected, name)
	for i := 1; ; i++ {
		if _, err := r.root.Lstat(dst); errors.Is(err, os.ErrNotExist) || i > 1000 {
			break
		}
		dst = rel(protocol.DirRejected, fmt.Sprintf("%s.%d", name, i))
	}
	if err := r.root.Rename(ipath, dst); err != nil {
		r.log.Error("cannot move a rejected file aside", "name", name, "err", err)
		r.queue.discard(ipath)
		dst = ""
	}
	r.queue.rejected++
	r.status.dirty = true
	r.event(protocol.Event{Event: protocol.EvRejected, Detail: map[string]any{"file": rel(protocol.DirQueue, name),
		"moved_to": dst, "error": msg, "code": protocol.CodeInvalidRequest}})
}

// claim renames queue/<name> to dst (inflight/…) and reports whether this
// runner now holds it. A missing destination directory (someone deleted
// inflight/) is recreated and the claim retried, instead of leaving the
// command queued forever.
func (r *Runner) claim(name, dst string) bool {
	src := rel(protocol.DirQueue, name)
	ok, err := r.root.Claim(src, dst)
	if ok {
		return true
	}
	if err == nil {
		if _, lerr := r.root.Lstat(src); lerr != nil {
			return false // Withdrawn, or claimed by someone else.
		}
	}
	r.checkLayout()
	if r.layout.err != nil {
		return false
	}
	ok, err = r.root.Claim(src, dst)
	if err != nil {
		r.log.Error("claim", "name", name, "err", err)
	}
	return ok
}

// unclaim puts a claimed command back into queue/ when output/ was swapped
// for a symlink (fsq.ErrLayout) between the layout check and the start: the
// command waits, queued, until the layout is fixed instead of getting an
// error result. It reports false if the file could not be put back (then
// the command is answered as before).
func (r *Runner) unclaim(name string, seq int64, why error) bool {
	r.checkLayout()
	if err := r.root.RenameNoReplace(rel(protocol.DirInflight, name), rel(protocol.DirQueue, name)); err != nil {
		r.log.Error("cannot put a claimed command back into queue/", "name", name, "err", err)
		return false
	}
	r.log.Warn("a session directory is not usable; the command waits in queue/", "name", name, "err", why)
	r.queue.pend.add(name, seq, "")
	return true
}

// submitResult hands a result to the result writer. From here on the name
// and its cmd_id count as done, so a duplicate queued right behind it is
// refused even before the result is on disk.
func (r *Runner) submitResult(j resultJob) {
	r.queue.settling[j.name] = true
	if _, _, err := protocol.ParseCommandName(j.name); err == nil {
		r.queue.done[j.res.CmdID] = j.name
		if len(r.in.waiting[j.res.CmdID]) > 0 {
			r.pumpWaiting(j.res.CmdID) // It ended without running (cancelled while queued, rejected).
		}
	}
	r.results.submit(j, r.onResult)
}

// onResult records a result the writer committed (or gave up on).
func (r *Runner) onResult(d resultDone) {
	j, res := d.job, d.job.res
	delete(r.queue.settling, j.name)
	for _, x := range d.displaced {
		r.event(protocol.Event{Event: protocol.EvWarning, CmdID: d.job.res.CmdID, Seq: d.job.res.Seq, Detail: x})
	}
	for _, d := range d.recreated {
		r.event(protocol.Event{Event: protocol.EvWarning, Detail: map[string]any{"recreated": d + "/"}})
	}
	r.status.dirty = true
	r.ringSync()
	if d.err != nil {
		r.log.Error("a result was not written; the command stays in inflight/ and the next runner settles it",
			"name", j.name, "err", d.err)
		r.event(protocol.Event{Event: protocol.EvWarning, CmdID: res.CmdID, Seq: res.Seq, Detail: map[string]any{
			"result_not_written": j.name, "error": d.err.Error()}})
		return
	}
	if !d.existed {
		r.metrics.result(r, res, j.kind == jobRun)
	}
	if d.existed && j.kind != jobRecovered {
		r.queue.skipped++
		r.log.Warn("a result already existed; it was kept and nothing was written", "name", j.name)
		r.event(protocol.Event{Event: protocol.EvSkipped, CmdID: res.CmdID, Seq: res.Seq, Detail: map[string]any{
			"reason": "result exists", "file": j.cmdFile, "would_have_been": string(res.Status)}})
		if j.kind != jobRun && j.kind != jobEarly {
			return
		}
	}
	switch j.kind {
	case jobRun, jobEarly:
		r.event(protocol.Event{Event: protocol.EvCmdEnd, CmdID: res.CmdID, Seq: res.Seq, Status: res.Status,
			ExitReason: res.ExitReason, SpoolStart: &res.SpoolStart, SpoolEnd: &res.SpoolEnd,
			TraceID: res.TraceID, Labels: res.Labels,
			Detail: endDetail(res, map[string]any{"bytes": res.Stats.Bytes, "duration_ms": res.Stats.DurationMS})})
	case jobRejected:
		r.queue.rejected++
		r.event(protocol.Event{Event: protocol.EvRejected, CmdID: res.CmdID, Seq: res.Seq, Status: res.Status,
			ExitReason: res.ExitReason, Detail: map[string]any{"file": j.cmdFile, "error": res.Error.Message, "code": res.Error.Code}})
	case jobRecovered:
		r.onRecovered(j, d.existed)
	}
}

// start claims a parsed command and hands it to the tool.
func (r *Runner) start(name, qpath string, cmd *protocol.Command) {
	if !r.claim(name, rel(protocol.DirInflight, name)) {
		return
	}
	// The claim becomes durable off the critical path, while the command
	// runs (PROTOCOL.md, "Durability and crash consistency").
	r.ringSync()
	r.checkDiskRoom() // A command started after space returned is written whole.
	spoolStart := r.disk.spoolSize
	outName := protocol.OutputName(name)
	out, err := r.createOutput(rel(protocol.DirOutput, outName))
	if errors.Is(err, os.ErrNotExist) {
		r.checkLayout() // Someone deleted output/.
		out, err = r.createOutput(rel(protocol.DirOutput, outName))
	}
	if errors.Is(err, fsq.ErrLayout) && r.unclaim(name, cmd.Seq, err) {
		return
	}
	timeout, clamped := cmd.Timeout(r.cfg.DefaultTimeout)
	budget := cmd.OutputBudget(r.cfg.MaxOutputBytes)
	payloadSHA, begin := beginDetail(cmd, timeout, budget)
	r.event(protocol.Event{Event: protocol.EvCmdBegin, CmdID: cmd.CmdID, Seq: cmd.Seq, SpoolStart: &spoolStart,
		TraceID: cmd.TraceID, Labels: cmd.Labels, Detail: begin})
	if err != nil {
		r.log.Error("create output", "err", err)
		r.finishEarly(name, cmd, protocol.CodeIO, "cannot create the output file: "+err.Error(), rel(protocol.DirOutput, outName))
		return
	}
	c := newRunning(cmd, name, r.clk.Now(), r.tool.starts, r.disk.spoolSize, out)
	c.payloadSHA = payloadSHA
	if clamped {
		r.event(protocol.Event{Event: protocol.EvWarning, CmdID: cmd.CmdID, Seq: cmd.Seq, Detail: map[string]any{
			"timeout_s": cmd.TimeoutS, "clamped_to_ms": timeout.Milliseconds()}})
	}
	c.limit(timeout, budget)
	if err := r.drv.check(cmd.Payload); err != nil {
		out.Close()
		_ = r.root.Remove(rel(protocol.DirOutput, outName))
		r.finishEarly(name, cmd, protocol.CodeInvalidRequest, err.Error(), rel(protocol.DirInflight, name))
		return
	}
	line, err := c.runLine(r.root, r.drv)
	if err != nil {
		out.Close()
		_ = r.root.Remove(rel(protocol.DirOutput, outName)) // Empty; the result names no output.
		r.finishEarly(name, cmd, protocol.CodeIO, "cannot write the payload file: "+err.Error(), rel(protocol.DirInflight, name+payloadExt))
		return
	}
	r.cur = c
	r.in.started(cmd.CmdID)
	r.enter(&phaseBusy{})
	tok := cmd.Marker.Token
	r.fr.discard(func(l []byte) bool { return isBegin(l, tok) })
	r.restoreModes(cmd)
	r.typeLine(line)
}

// beginDetail is cmd_begin's detail (PROTOCOL.md section 22): how the
// command will run — kind, cancel_policy, the effective timeout_s and
// max_output_bytes (left out when there is none) — and payload_sha256
// (left out for an empty payload, as in the result), which it returns too.
func beginDetail(cmd *protocol.Command, timeout time.Duration, budget int64) (string, map[string]any) {
	policy := cmd.CancelPolicy
	if policy == "" {
		policy = protocol.PolicyCtrlC
	}
	d := map[string]any{"kind": cmd.Kind, "cancel_policy": policy}
	if timeout > 0 {
		d["timeout_s"] = timeout.Seconds()
	}
	if budget > 0 {
		d["max_output_bytes"] = budget
	}
	var sum string
	if cmd.Payload != "" {
		sum = sha256Hex(cmd.Payload)
		d["payload_sha256"] = sum
	}
	return sum, d
}

// runLine prepares c's payload (inline, or as a file in inflight/ of
// root) and returns the line drv types.
func (c *running) runLine(root *fsq.Root, drv driver) (string, error) {
	m := c.cmd.Marker
	wrap := m.Mode == protocol.MarkerRunnerInject
	// An empty payload goes through a (zero-length) file: the drivers read
	// inline == "" as "the payload is in file".
	if wrap && c.cmd.Payload != "" && len(c.cmd.Payload) <= drv.inlineMax() {
		return drv.run("", c.cmd.Payload, m.Prefix, m.Token, true), nil
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
	return drv.run(root.Abs(c.payload), "", m.Prefix, m.Token, wrap), nil
}

// finishEarly settles a claimed command that never reached the tool; file
// is the session file the runner could not write.
func (r *Runner) finishEarly(name string, cmd *protocol.Command, code, msg, file string) {
	res := &protocol.Result{CmdID: cmd.CmdID, Seq: cmd.Seq, Status: protocol.StatusError,
		ExitReason: protocol.ReasonRunnerError, Error: &protocol.Error{Code: code, Message: msg, Context: errContext("file", file)},
		CommandPath: rel(protocol.DirArchive, name), SpoolStart: r.disk.spoolSize, SpoolEnd: r.disk.spoolSize,
		TraceID: cmd.TraceID, Labels: cmd.Labels}
	r.submitResult(resultJob{kind: jobEarly, name: name, res: res, text: cmd.Payload,
		cmdFile: rel(protocol.DirInflight, name), keepAt: res.CommandPath})
}

// onBegin switches from discarding to capturing the command's output.
func (r *Runner) onBegin() {
	c := r.cur
	c.begun = true
	_, line := r.drv.(*lineDriver) // The newline before its marker is the tool's own.
	r.fr.capture(c.cmd.Marker.Prefix, r.doneMatcher(c), c.cmd.Marker.Mode == protocol.MarkerRunnerInject && !line, r.sink)
}

// sink receives captured output of the current command. The terminal's
// echo of delivered input is left out (echo.go).
func (r *Runner) sink(b []byte) {
	r.cur.printed(b, r.clk.Now(), r.emit)
}

// emit appends to the current command's output.
func (r *Runner) emit(b []byte) {
	c := r.cur
	b = c.clip(b) // budget.go
	if ld, ok := r.drv.(*lineDriver); ok {
		c.scanError(b, ld)
	}
	if r.disk.outputSuspended(len(b)) {
		c.skip(b)
	} else {
		if err := c.write(b); err != nil && isNoSpace(err) {
			r.noSpace(c.name, err)
		}
	}
	r.tail.write(b)
}

// doneMatcher matches the command's own done marker, and while the runner
// resynchronises after an interrupt also its sync markers.
func (r *Runner) doneMatcher(c *running) func([]byte) bool {
	return func(l []byte) bool {
		return c.doneLine(l) || r.isSync(l)
	}
}

// finish writes the current command's result and clears it. A command
// ended by its marker takes its status from the return code; otherwise
// endStatus/endReason say what the runner did.
func (r *Runner) finish(status protocol.Status, reason protocol.ExitReason, errInfo *protocol.Error, exit *toolExit) {
	c := r.cur
	r.fr.finish() // Flush held-back bytes into the output before closing it.
	c.echo.flush(r.emit)
	r.cur = nil
	r.endInput() // Held send and signal requests are refused: it has ended.
	// Its output file gets the rest; a failure is kept for the result.
	_ = c.flush()
	r.flushSpool()
	j := c.end(status, reason, errInfo, exit, r.clk.Now(), r.disk.spoolSize)
	r.status.cmdsDone++
	r.submitResult(j)
}

// finishByMarker ends the current command from its done marker.
func (r *Runner) finishByMarker() {
	c := r.cur
	if c.marker.helpersGone {
		// The payload deleted the runner's helpers: type them again; the
		// tool reads them before the next command.
		r.log.Warn("the payload deleted the runner's Tcl helpers; restoring them", "cmd_id", c.cmd.CmdID)
		r.event(protocol.Event{Event: protocol.EvWarning, CmdID: c.cmd.CmdID, Seq: c.cmd.Seq, Detail: map[string]any{"helpers": "restored"}})
		r.typeLine(r.drv.bootstrap())
	}
	if status, reason, e, ok := c.endError(nil); ok {
		r.finish(status, reason, e, nil)
		return
	}
	if ld, ok := r.drv.(*lineDriver); ok {
		c.checkLastLine(ld)
	}
	status, e := c.markerOutcome(r.cfg.Kind == protocol.KindTcl)
	r.finish(status, protocol.ReasonMarkerSeen, e, nil)
}

func codeFor(s protocol.Status, reason protocol.ExitReason) string {
	switch {
	case reason == protocol.ReasonLeaseExpired:
		return protocol.CodeLeaseExpired
	case s == protocol.StatusTimeout:
		return protocol.CodeTimeout
	case s == protocol.StatusCancelled:
		return protocol.CodeCancelled
	}
	return protocol.CodeToolError
}

// createOutput makes the output file from a spare (a rename) rather than
// creating it on the critical path.
func (r *Runner) createOutput(name string) (*os.File, error) {
	// output/ swapped for another user's directory since the last
	// heartbeat: the command waits in queue/ (unclaim) instead of writing
	// its output there.
	if err := ownDir(r.root, protocol.DirOutput); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %w", fsq.ErrLayout, err)
	}
	f, err := r.disk.takeSpare()
	if err == nil {
		spare := r.root.RelOf(f.Name())
		if err = r.root.Rename(spare, name); err == nil {
			return f, nil
		}
		f.Close()
		r.root.RemoveOrLater(spare)
	}
	f, err = r.root.CreateNew(name, r.layout.perms.file)
	if err == nil {
		_ = f.Chmod(r.layout.perms.file) // Independent of the umask.
	}
	return f, err
}

func sha256Hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// correlation reads the trace_id and labels of a command file the runner
// holds but did not parse (one cancelled before it started, one recovered
// after a crash), so its result carries them too. A file that cannot be
// read, or whose fields break the rules, gives none: the result matters
// more than its labels.
func (r *Runner) correlation(name string) (string, map[string]string) {
	data, _, err := r.root.ReadFile(name, protocol.MaxCommandSize)
	if err != nil {
		return "", nil
	}
	var c struct {
		TraceID string            `json:"trace_id"`
		Labels  map[string]string `json:"labels"`
	}
	if json.Unmarshal(data, &c) != nil || protocol.ValidateCorrelation(c.TraceID, c.Labels) != nil {
		return "", nil
	}
	return c.TraceID, c.Labels
}

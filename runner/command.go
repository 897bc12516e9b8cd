package runner

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"os"
	"time"

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
	begun      bool // the begin line was seen: output is being captured
	payload    string
	// Set once the command is being ended by the runner rather than by
	// its marker (timeout, cancel, lease, force stop).
	endStatus protocol.Status
	endReason protocol.ExitReason
	endMsg    string
	doneSeen  bool // its done marker arrived after an interrupt
	marker    done
}

// write appends normalised output; it is the framer's sink.
func (c *running) write(b []byte) {
	c.bytes += int64(len(b))
	c.lines += int64(bytes.Count(b, newline))
	c.sum.Write(b)
	if _, err := c.w.Write(b); err != nil && c.endMsg == "" {
		c.endMsg = "writing output: " + err.Error()
	}
}

// nextCommand takes queued commands in (seq, name) order until one starts
// or the queue is empty. Files that cannot run get their result here.
func (r *Runner) nextCommand() {
	for r.cur == nil && r.tphase == toolReady && r.stopMode == "" {
		e := r.pend.pop()
		if e == nil {
			return
		}
		r.stateDirty = true
		r.tryStart(e)
	}
}

func (r *Runner) tryStart(e *pendingEntry) {
	qpath := r.path(rel(protocol.DirQueue, e.name))
	data, fi, err := fsq.ReadFile(qpath, protocol.MaxCommandSize)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return // Withdrawn, or claimed by someone else.
	case errors.Is(err, fsq.ErrTooLarge):
		r.reject(e, fmt.Sprintf("file is larger than %d bytes", protocol.MaxCommandSize))
		return
	case errors.Is(err, fsq.ErrSymlink), errors.Is(err, fsq.ErrNotRegular):
		r.reject(e, "queue entries must be regular files, not symlinks or other file types")
		return
	case err != nil:
		r.log.Warn("read queued command; will retry", "name", e.name, "err", err)
		r.pend.deferUntil(e, time.Now().Add(r.cfg.Poll))
		return
	}
	if _, err := os.Lstat(r.path(rel(protocol.DirResult, e.name))); err == nil {
		r.skipDone(e.name, qpath)
		return
	}
	cmd, err := protocol.ParseCommand(e.name, data)
	if errors.Is(err, protocol.ErrIncomplete) && r.stillWriting(e, fi) {
		return
	}
	if err != nil {
		r.reject(e, err.Error())
		return
	}
	if cmd.Kind != r.cfg.Kind {
		r.reject(e, fmt.Sprintf("kind: this runner runs %s payloads, not %s", r.cfg.Kind, cmd.Kind))
		return
	}
	if r.doneIDs[cmd.CmdID] {
		r.reject(e, fmt.Sprintf("cmd_id %q already has a result under another seq; cmd_ids must be unique", cmd.CmdID))
		return
	}
	r.start(e.name, qpath, cmd)
}

// stillWriting decides whether an unparsable file may be a writer still
// writing: it is given ParseGrace (on our clock) after it last changed size
// or mtime, then rejected.
func (r *Runner) stillWriting(e *pendingEntry, fi os.FileInfo) bool {
	now := time.Now()
	if e.firstBad.IsZero() || fi.Size() != e.lastSize || !fi.ModTime().Equal(e.lastMod) {
		e.firstBad, e.lastSize, e.lastMod = now, fi.Size(), fi.ModTime()
	}
	if now.Sub(e.firstBad) >= r.cfg.ParseGrace {
		return false
	}
	r.pend.deferUntil(e, now.Add(min(100*time.Millisecond, r.cfg.ParseGrace)))
	return true
}

// skipDone clears a queued command whose cmd_id already has a result.
func (r *Runner) skipDone(name, qpath string) {
	_ = os.Remove(qpath) // Gone already is fine.
	seq, id, _ := protocol.ParseCommandName(name)
	r.log.Info("skipping a command that already has a result", "name", name)
	r.event(protocol.Event{Event: protocol.EvSkipped, CmdID: id, Seq: seq, Detail: map[string]any{"reason": "result exists"}})
}

// reject answers an invalid command file with an invalid_request result
// under the same name and moves the file to log/rejected/ for inspection.
func (r *Runner) reject(e *pendingEntry, msg string) {
	seq, id, err := protocol.ParseCommandName(e.name)
	if err != nil && !errors.Is(err, protocol.ErrBadCmdID) {
		return
	}
	code := protocol.CodeInvalidRequest
	if err == nil && r.doneIDs[id] {
		code = protocol.CodeDuplicateCmdID
	}
	ipath := r.path(rel(protocol.DirInflight, e.name))
	ok, cerr := fsq.Claim(r.path(rel(protocol.DirQueue, e.name)), ipath)
	if !ok || cerr != nil {
		return
	}
	res := &protocol.Result{CmdID: id, Seq: seq, Status: protocol.StatusError, ExitReason: protocol.ReasonInvalidRequest,
		Error: &protocol.Error{Code: code, Message: msg}, CommandPath: rel(protocol.DirRejected, e.name)}
	if r.writeResult(e.name, res) != nil {
		return // Left in inflight/: the next start settles it.
	}
	if err := os.Rename(ipath, r.path(rel(protocol.DirRejected, e.name))); err != nil {
		_ = os.Remove(ipath)
	}
	r.log.Warn("rejected an invalid command", "name", e.name, "error", msg)
	r.event(protocol.Event{Event: protocol.EvRejected, CmdID: id, Seq: seq, Status: protocol.StatusError,
		ExitReason: protocol.ReasonInvalidRequest, Detail: map[string]any{"error": msg}})
}

// start claims a parsed command and hands it to the tool.
func (r *Runner) start(name, qpath string, cmd *protocol.Command) {
	ipath := r.path(rel(protocol.DirInflight, name))
	ok, err := fsq.Claim(qpath, ipath)
	if err != nil {
		r.log.Error("claim", "name", name, "err", err)
		return
	}
	if !ok {
		return
	}
	// The claim becomes durable off the critical path, while the command
	// runs (PROTOCOL.md, "Durability and crash consistency").
	r.ringSync()
	outName := protocol.OutputName(name)
	out, err := r.createOutput(r.path(rel(protocol.DirOutput, outName)))
	if err != nil {
		r.log.Error("create output", "err", err)
		r.finishEarly(name, cmd, protocol.CodeIO, "cannot create the output file: "+err.Error())
		return
	}
	c := &running{cmd: cmd, name: name, start: time.Now(), spoolStart: r.spoolSize, out: out,
		w: bufio.NewWriterSize(out, 64<<10), sum: sha256.New()}
	timeout := r.cfg.DefaultTimeout
	if cmd.TimeoutS > 0 {
		timeout = time.Duration(cmd.TimeoutS * float64(time.Second))
	}
	if timeout > 0 {
		c.deadline = c.start.Add(timeout)
	}
	line, err := r.runLine(c)
	if err != nil {
		out.Close()
		r.finishEarly(name, cmd, protocol.CodeIO, "cannot write the payload file: "+err.Error())
		return
	}
	r.cur = c
	r.tphase = toolBusy
	r.setPhase(protocol.PhaseBusy, "")
	r.event(protocol.Event{Event: protocol.EvCmdBegin, CmdID: cmd.CmdID, Seq: cmd.Seq, SpoolStart: &c.spoolStart})
	tok := cmd.Marker.Token
	r.fr.discard(func(l []byte) bool { return isBegin(l, tok) })
	if err := r.tool.writeLine(line); err != nil {
		r.log.Warn("type to tool", "err", err) // The tool is dying; its exit ends the command.
	}
}

// runLine prepares the payload (inline or as a file in inflight/) and
// returns the line to type.
func (r *Runner) runLine(c *running) (string, error) {
	m := c.cmd.Marker
	wrap := m.Mode == protocol.MarkerRunnerInject
	if wrap && len(c.cmd.Payload) <= r.drv.inlineMax() {
		return r.drv.run("", c.cmd.Payload, m.Prefix, m.Token, true), nil
	}
	c.payload = r.path(rel(protocol.DirInflight, c.name+payloadExt))
	if err := os.WriteFile(c.payload, []byte(c.cmd.Payload), 0o600); err != nil {
		return "", err
	}
	return r.drv.run(c.payload, "", m.Prefix, m.Token, wrap), nil
}

// finishEarly settles a claimed command that never reached the tool.
func (r *Runner) finishEarly(name string, cmd *protocol.Command, code, msg string) {
	res := &protocol.Result{CmdID: cmd.CmdID, Seq: cmd.Seq, Status: protocol.StatusError,
		ExitReason: protocol.ReasonToolDied, Error: &protocol.Error{Code: code, Message: msg},
		CommandPath: rel(protocol.DirArchive, name), PayloadSHA256: sha256Hex(cmd.Payload)}
	if r.writeResult(name, res) == nil {
		archiveCommand(r.path(rel(protocol.DirInflight, name)), r.path(rel(protocol.DirArchive, name)))
	}
}

// onBegin switches from discarding to capturing the command's output.
func (r *Runner) onBegin() {
	c := r.cur
	c.begun = true
	m := c.cmd.Marker
	r.fr.capture(m.Prefix, r.doneMatcher(c), m.Mode == protocol.MarkerRunnerInject, r.sink)
}

// sink receives captured output of the current command.
func (r *Runner) sink(b []byte) {
	r.cur.write(b)
	r.tail.write(b)
}

// doneMatcher matches the command's own done marker, and while the runner
// resynchronises after an interrupt also its sync markers.
func (r *Runner) doneMatcher(c *running) func([]byte) bool {
	return func(l []byte) bool {
		if d, ok := matchDone(l, c.cmd.Marker.Prefix, c.cmd.Marker.Token); ok {
			c.marker, c.doneSeen = d, true
			return true
		}
		return r.isSync(l)
	}
}

// finish writes the current command's result and clears it. A command
// ended by its marker takes its status from the return code; otherwise
// endStatus/endReason say what the runner did.
func (r *Runner) finish(status protocol.Status, reason protocol.ExitReason, errInfo *protocol.Error, exit *toolExit) {
	c := r.cur
	r.fr.finish() // Flush held-back bytes into the output before closing it.
	r.cur = nil
	flushErr := c.w.Flush()
	r.flushSpool()
	spoolEnd := r.spoolSize
	res := &protocol.Result{
		CmdID: c.cmd.CmdID, Seq: c.cmd.Seq, Status: status, ExitReason: reason,
		StartTS: protocol.Time{Time: c.start}, EndTS: protocol.Now(),
		OutputPath: rel(protocol.DirOutput, protocol.OutputName(c.name)),
		Stats:      protocol.Stats{Bytes: c.bytes, Lines: c.lines, DurationMS: since(c.start)},
		SpoolStart: c.spoolStart, SpoolEnd: spoolEnd, Error: errInfo,
		OutputSHA256: hex.EncodeToString(c.sum.Sum(nil)),
		CommandPath:  rel(protocol.DirArchive, c.name),
	}
	if c.marker.hasRC {
		rc := c.marker.rc
		res.ToolRC = &rc
	}
	if c.marker.hasValue {
		v := string(c.marker.value)
		res.Value, res.ValueTruncated = &v, c.marker.truncated
	}
	if exit != nil {
		res.ExitCode, res.Signal = describeExit(exit.state)
	}
	if flushErr != nil && res.Error == nil {
		res.Status, res.Error = protocol.StatusError, &protocol.Error{Code: protocol.CodeIO, Message: "writing output: " + flushErr.Error()}
	}
	// From here on the cmd_id counts as done, so a duplicate queued right
	// behind it is refused even before the result is on disk.
	r.doneIDs[c.cmd.CmdID] = true
	r.cmdsDone++
	r.stateDirty = true
	r.commits.submit(commitJob{name: c.name, res: res, out: c.out,
		inflight: r.path(rel(protocol.DirInflight, c.name)), archive: r.path(rel(protocol.DirArchive, c.name)),
		payload: c.payload, text: c.cmd.Payload}, r.onCommitted)
}

// onCommitted records a committed (or failed) result.
func (r *Runner) onCommitted(d commitDone) {
	res := d.job.res
	if d.err != nil {
		r.log.Error("writing the result failed; the command stays in inflight/ and the next runner settles it",
			"name", d.job.name, "err", d.err)
	} else {
		r.metrics.result(r, res, true)
	}
	r.event(protocol.Event{Event: protocol.EvCmdEnd, CmdID: res.CmdID, Seq: res.Seq, Status: res.Status,
		ExitReason: res.ExitReason, SpoolStart: &res.SpoolStart, SpoolEnd: &res.SpoolEnd,
		Detail: map[string]any{"bytes": res.Stats.Bytes, "duration_ms": res.Stats.DurationMS}})
	r.ringSync()
}

// finishByMarker ends the current command from its done marker.
func (r *Runner) finishByMarker() {
	c := r.cur
	if c.endStatus != "" {
		r.finish(c.endStatus, c.endReason, &protocol.Error{Code: codeFor(c.endStatus, c.endReason), Message: c.endMsg}, nil)
		return
	}
	d := c.marker
	if !d.hasRC || d.rc == 0 || d.rc == 2 { // 2 is Tcl's TCL_RETURN: a payload that says "return".
		r.finish(protocol.StatusOK, protocol.ReasonMarkerSeen, nil, nil)
		return
	}
	msg := fmt.Sprintf("the payload ended with return code %d", d.rc)
	if r.cfg.Kind == protocol.KindTcl && d.hasValue && len(d.value) > 0 {
		msg = string(d.value)
	}
	r.finish(protocol.StatusError, protocol.ReasonMarkerSeen, &protocol.Error{Code: protocol.CodeToolError, Message: msg}, nil)
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
func (r *Runner) createOutput(path string) (*os.File, error) {
	f, err := r.outSpares.Take()
	if err == nil {
		if err = os.Rename(f.Name(), path); err == nil {
			return f, nil
		}
		f.Close()
		os.Remove(f.Name())
	}
	return fsq.CreateFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
}

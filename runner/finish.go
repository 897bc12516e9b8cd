package runner

// Ending a command: its result job is handed to the result writer
// (results.go), whose completions come back to onResult.

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/skillpilot/skillpilot/protocol"
)

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
	if len(r.queue.handOver) > 0 || !r.results.trySubmit(j) {
		r.queue.handOver = append(r.queue.handOver, j)
	}
}

// onResult records a result the writer committed (or gave up on).
func (r *Runner) onResult(d resultDone) {
	j, res := d.job, d.job.res
	delete(r.queue.settling, j.name)
	defer r.repliesAfter(j.name)
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
			// The file as it was queued, as the result's context.file names
			// it (PROTOCOL.md 7), not inflight/ where the runner held it.
			ExitReason: res.ExitReason, Detail: map[string]any{"file": rel(protocol.DirQueue, j.name), "error": res.Error.Message, "code": res.Error.Code}})
	case jobRecovered:
		r.onRecovered(j, d.existed)
	}
	if !d.existed {
		r.keepResult(j) // Retention counts it from now on (retain.go).
	}
}

// finishEarly settles a claimed command that never reached the tool; file
// is the session file the runner could not write.
func (r *Runner) finishEarly(name string, cmd *protocol.Command, code, msg, file string) {
	reason := protocol.ReasonRunnerError
	if code == protocol.CodeInvalidRequest { // A payload the driver cannot deliver.
		reason = protocol.ReasonInvalidRequest
	}
	res := &protocol.Result{CmdID: cmd.CmdID, Seq: cmd.Seq, Status: protocol.StatusError,
		ExitReason: reason, Error: &protocol.Error{Code: code, Message: msg, Context: errContext("file", file)},
		CommandPath: rel(protocol.DirArchive, name), SpoolStart: r.disk.spoolSize, SpoolEnd: r.disk.spoolSize,
		TraceID: cmd.TraceID, Labels: cmd.Labels}
	r.submitResult(resultJob{kind: jobEarly, name: name, res: res, text: cmd.Payload,
		cmdFile: rel(protocol.DirInflight, name), keepAt: res.CommandPath})
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
	if ld := r.drv.line(); ld != nil {
		c.checkLastLine(ld)
		status, e := c.lineOutcome(ld)
		r.finish(status, protocol.ReasonMarkerSeen, e, nil)
		return
	}
	status, e := c.markerOutcome(r.cfg.Kind == protocol.KindTcl)
	r.finish(status, protocol.ReasonMarkerSeen, e, nil)
}

// finishUnstarted ends a line driver's command whose done line came
// without its begin line: the tool's file command did not run the payload
// file (it failed to open it, or is not what the driver says). What the
// tool printed meanwhile says why.
func (r *Runner) finishUnstarted(ld *lineDriver) {
	said := lastLines(r.fr.takeDropped(), 3, 400)
	if said == "" {
		said = "nothing"
	}
	msg := fmt.Sprintf("the tool did not run the payload file: its file command (%q) printed %s and the tool went on to the next line",
		strings.Replace(ld.spec.Source, "{}", "FILE", 1), said)
	r.finish(protocol.StatusError, protocol.ReasonMarkerSeen, &protocol.Error{Code: protocol.CodeToolError, Message: msg,
		Context: errContext("matched", "no begin line")}, nil)
}

// stuck ends a line driver's command whose tool read everything typed for
// it, its end and done lines included, and went quiet without printing
// them: the payload's last statement was unfinished (an open block,
// bracket or quote) and took those lines. The tool is interrupted by the
// command's cancel policy, which also ends what it waits for, and serves
// the next command.
func (r *Runner) stuck() {
	r.log.Warn("the tool read the lines that end the command without running them", "cmd_id", r.cur.cmd.CmdID)
	msg := "the tool read the lines the runner typed after the payload without running them: " +
		"the payload's last statement is unfinished (an open block, bracket or quote took them)"
	if said := lastLines(append(bytes.Clone(r.cur.last), r.fr.cur...), 1, 200); said != "" {
		msg += "; the tool waits after " + said
	}
	r.interrupt(protocol.StatusError, "", msg, "")
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

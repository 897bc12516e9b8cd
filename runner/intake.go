package runner

// Intake from queue/: which pending command runs next, and what happens
// to the files that cannot run (rejected, already done, still being
// written) before one is claimed into inflight/.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/protocol"
)

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
	r.queue.more = false
	if r.queue.pend.len() > 0 && r.layout.err == nil && r.cur == nil {
		// queue/ is checked before any file of it is taken: replaced by
		// someone else's directory, it is not served (checkLayout clears
		// this once it is fixed).
		if err := checkSubdir(r.root, protocol.DirQueue, r.layout.perms, runnerEUID()); err != nil {
			r.setLayoutErr(err)
		}
	}
	for n := 0; r.cur == nil && r.tool.ready() && r.stop.mode == "" && r.pending.err == nil && r.layout.err == nil && r.queue.scan.listed; n++ {
		if n == perTurn || len(r.results.jobs) == cap(r.results.jobs) {
			r.queue.more = len(r.results.jobs) != cap(r.results.jobs)
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
		if e.seen.at.IsZero() {
			e.seen.at = r.clk.Now()
		}
		if r.clk.Now().Sub(e.seen.at) >= r.cfg.ParseGrace {
			r.reject(e, "the runner cannot read this file: "+err.Error(), nil)
			return
		}
		r.log.Warn("read queued command; will retry", "name", e.name, "err", err)
		r.queue.pend.deferUntil(e, r.clk.Now().Add(min(r.cfg.Poll, r.cfg.ParseGrace)), true)
		return
	}
	cmd, err := protocol.ParseCommand(e.name, data)
	if errors.Is(err, protocol.ErrIncomplete) {
		var wait bool
		now := r.clk.Now()
		if e.seen, wait = stillWriting(e.seen, fi, now, r.cfg.ParseGrace); wait {
			// Held: what sorts after it waits, as it would behind a
			// file written atomically (PROTOCOL.md 6.1).
			r.queue.pend.deferUntil(e, now.Add(min(100*time.Millisecond, r.cfg.ParseGrace)), true)
			return
		}
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
	if msg, _, dup := r.duplicate(cmd.CmdID); dup {
		r.reject(e, msg, nil)
		return
	}
	r.start(e.name, qpath, cmd, data)
}

// hasResult reports whether name has a result, on disk or on its way
// there, or had one that retention pruned (the index remembers it).
func (q *cmdQueue) hasResult(name string) bool {
	if q.settling[name] || q.prunedName(name) {
		return true
	}
	// Only a regular file is a result: anything else there (a FIFO, a
	// symlink) is moved aside when the result is written (displace).
	fi, err := q.root.Lstat(rel(protocol.DirResult, name))
	return err == nil && fi.Mode().IsRegular()
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
	reason := "result exists"
	if r.queue.prunedName(name) {
		reason = "result pruned" // Its result was there, and retention removed it (PROTOCOL.md section 23).
	}
	r.log.Info("skipping a command that already has a result", "name", name, "reason", reason)
	r.event(protocol.Event{Event: protocol.EvSkipped, CmdID: id, Seq: seq, Detail: map[string]any{
		"reason": reason, "file": rel(protocol.DirQueue, name), "type": what}})
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
	ipath := rel(protocol.DirInflight, e.name)
	if !r.claim(e.name, ipath) {
		return
	}
	r.log.Warn("rejected an invalid command", "name", e.name, "error", msg)
	if !derived {
		r.rejectNameless(e.name, ipath, msg)
		return
	}
	r.submitRejected(e.name, id, seq, msg, ctx)
}

// submitRejected answers the command file name, claimed into inflight/,
// with an invalid_request result (msg, and the error's context ctx beyond
// the file) and moves it to log/rejected/: the one place such a result is
// made. Its code is duplicate_cmd_id when the name is well formed and its
// cmd_id already has a result (duplicate).
func (r *Runner) submitRejected(name, id string, seq int64, msg string, ctx map[string]any) {
	code := protocol.CodeInvalidRequest
	ctx = addContext(ctx, "file", rel(protocol.DirQueue, name))
	if _, _, err := protocol.ParseCommandName(name); err == nil {
		if _, dctx, dup := r.duplicate(id); dup {
			code = protocol.CodeDuplicateCmdID
			ctx = addContext(ctx, dctx...)
		}
	}
	res := &protocol.Result{CmdID: id, Seq: seq, Status: protocol.StatusError, ExitReason: protocol.ReasonInvalidRequest,
		Error: &protocol.Error{Code: code, Message: msg, Context: ctx}, CommandPath: rel(protocol.DirRejected, name)}
	r.submitResult(resultJob{kind: jobRejected, name: name, res: res, cmdFile: rel(protocol.DirInflight, name), keepAt: res.CommandPath})
}

// duplicate says whether cmdID already has a result (or had one that
// retention pruned): the message of its duplicate_cmd_id result and the
// context keys beyond the file (cmd_id, other_result, and pruned: true
// when the other result is gone).
func (r *Runner) duplicate(cmdID string) (msg string, ctx []any, dup bool) {
	other, pruned, ok := r.queue.answered(cmdID)
	if !ok {
		return "", nil, false
	}
	msg = fmt.Sprintf("cmd_id %q already has a result under another seq; cmd_ids must be unique", cmdID)
	ctx = []any{"cmd_id", cmdID, "other_result", rel(protocol.DirResult, other)}
	if pruned {
		msg = fmt.Sprintf("cmd_id %q already had a result (%s, removed since by the session's retention: %s); cmd_ids must be unique",
			cmdID, rel(protocol.DirResult, other), protocol.FilePruned)
		ctx = append(ctx, "pruned", true)
	}
	return msg, ctx, true
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

// maxNotBegun is how many tools may die before a command begins (its
// begin line never printed: it never ran) before it is answered with the
// death instead of run again.
const maxNotBegun = 3

// rerun puts c, which the tool never began (it died between the claim and
// the begin line: a kill at its prompt just before c was typed), back into
// queue/: the restarted tool runs it, as the first in seq order. Its empty
// output file and its payload file go. It reports false when c has been
// put back maxNotBegun-1 times already, or cannot be: then its death is
// its result.
func (r *Runner) rerun(c *running) bool {
	n := r.queue.notBegun[c.name] + 1
	c.notBegun = n
	if n >= maxNotBegun {
		delete(r.queue.notBegun, c.name)
		return false
	}
	if err := r.root.RenameNoReplace(rel(protocol.DirInflight, c.name), rel(protocol.DirQueue, c.name)); err != nil {
		r.log.Error("cannot put a command the tool never began back into queue/", "name", c.name, "err", err)
		return false
	}
	if r.queue.notBegun == nil {
		r.queue.notBegun = map[string]int{}
	}
	r.queue.notBegun[c.name] = n
	c.out.Close()
	_ = r.root.Remove(rel(protocol.DirOutput, protocol.OutputName(c.name))) // Empty: nothing ran.
	if c.payload != "" {
		_ = r.root.Remove(c.payload)
	}
	r.cur = nil
	r.endInput() // Input for it is refused: it is queued again.
	r.queue.pend.add(c.name, c.cmd.Seq, "")
	r.log.Warn("the tool died before the command began; it runs on the restarted tool", "name", c.name)
	r.event(c.about(protocol.Event{Event: protocol.EvWarning, Detail: map[string]any{"not_begun": n,
		"message": "the tool died before this command began (it never ran); it is queued again for the restarted tool"}}))
	return true
}

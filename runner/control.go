package runner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/protocol"
)

// ctlSettle is how long an empty or unparsable legacy control file must
// stay unchanged before it is acted on: a shell's `echo ... > ctl/cancel.json`
// creates the file empty before writing it (microseconds apart; its write
// also triggers a new look through inotify).
const ctlSettle = 5 * time.Millisecond

// maxLegacySize bounds ctl/cancel.json and ctl/stop.json.
const maxLegacySize = 64 << 10

// stopState is how and why the runner stops, once asked to.
type stopState struct {
	mode    protocol.StopMode // "" while running
	reason  string
	stage   stopStage       // how far shutdown has gone
	err     *protocol.Error // state.json error once stopped because of it
	signals int             // signals received
}

// stopStage is how far the runner's shutdown (loop.go) has gone.
type stopStage int

const (
	stopRunning stopStage = iota // the loop runs (a stop may be requested)
	stopClosing                  // the loop has ended: the tool is being ended
	stopDone                     // everything is ended: the runner stopped
)

// begin records a stop in mode, for why. It reports whether anything
// changed: a graceful stop while stopping does not; force after graceful
// does; nothing does after force.
func (s *stopState) begin(mode protocol.StopMode, why string) bool {
	if s.mode == protocol.StopForce || (s.mode == mode && mode == protocol.StopGraceful) {
		return false
	}
	s.mode, s.reason = mode, why
	return true
}

// signalled counts a signal received and returns the stop it asks for:
// graceful the first time, force after.
func (s *stopState) signalled() protocol.StopMode {
	s.signals++
	if s.signals > 1 {
		return protocol.StopForce
	}
	return protocol.StopGraceful
}

// lost reports whether the runner stops because the session was taken
// away, and why.
func (s *stopState) lost() (why string, ok bool) {
	if s.err != nil && s.err.Code == protocol.CodeSessionLost {
		return s.err.Message, true
	}
	return "", false
}

// takeLegacy handles a legacy single-slot file (ctl/cancel.json or
// ctl/stop.json): empty means current/graceful; anything that is not one
// of the documented forms is rejected with an event and nothing done. The
// file is consumed by moving it into tmp/ (so a request written meanwhile
// is not lost, and no fixed name is left in ctl/). It gets an event, no
// reply.
func (r *Runner) takeLegacy(file string) {
	p, name := file, filepath.Base(file)
	fi, err := r.root.Lstat(p)
	if err != nil {
		delete(r.mbox.seen, name)
		return
	}
	var perr error
	if !fi.Mode().IsRegular() {
		perr = fmt.Errorf("%s is %s; only a regular file is a request", file, fsq.FileType(fi))
	} else {
		data, fi2, err := r.root.ReadFile(p, maxLegacySize)
		switch {
		case errors.Is(err, os.ErrNotExist):
			return
		case errors.Is(err, fsq.ErrTooLarge):
			perr = &limitError{fmt.Sprintf("%s is larger than %d bytes", file, maxLegacySize), maxLegacySize}
		case errors.Is(err, fsq.ErrSymlink), errors.Is(err, fsq.ErrNotRegular):
			perr = fmt.Errorf("%s is not a regular file", file)
		case transient(err):
			r.log.Warn("read control file; will retry", "file", file, "err", err)
			r.mbox.recheckAt(r.clk.Now().Add(r.cfg.Poll))
			return
		case err != nil:
			perr = fmt.Errorf("%s cannot be read: %w", file, err)
		default:
			t := bytes.TrimSpace(data)
			if (len(t) == 0 || !json.Valid(t)) && r.mbox.stillWriting(name, fi2, ctlSettle, r.clk.Now()) {
				return
			}
		}
	}
	delete(r.mbox.seen, name)
	dst := r.mbox.asideName(name)
	if ok, err := r.root.Claim(p, dst); !ok {
		if err != nil {
			r.log.Warn("claim control file", "file", file, "err", err)
		}
		return
	}
	defer func() {
		if err := r.root.RemoveAll(dst); err != nil {
			r.log.Warn("remove a consumed control file", "file", dst, "err", err) // tmp/ is emptied at the next start.
		}
	}()
	req := &protocol.ControlRequest{Op: protocol.OpCancel}
	if file == protocol.FileStop {
		req.Op = protocol.OpStop
	}
	if st, err := r.root.Lstat(dst); err == nil {
		fi = st // The claimed file is authoritative: it may have changed since it was read.
	}
	if perr == nil {
		perr = parseLegacy(r.root, req, dst)
	}
	a := r.decide(req, perr, fi.ModTime(), file)
	r.record(req, a, file)
}

// parseLegacy reads a claimed legacy file into req.
func parseLegacy(root *fsq.Root, req *protocol.ControlRequest, name string) error {
	data, _, err := root.ReadFile(name, maxLegacySize)
	if err != nil {
		return err
	}
	if req.Op == protocol.OpStop {
		s, err := protocol.ParseStop(data)
		req.Mode = s.Mode
		return err
	}
	c, err := protocol.ParseCancel(data)
	req.Scope, req.CmdID = c.Scope, c.CmdID
	return err
}

// cancel acts on a valid cancel request and says what it did. source names
// the request in the cancelled command's result, by its context
// (requestContext).
func (r *Runner) cancel(scope protocol.CancelScope, id, source string, by map[string]any) (protocol.Outcome, string, string) {
	c := r.cur
	if scope == protocol.ScopeCurrent {
		if c == nil {
			return protocol.OutcomeIdle, "no command is running; nothing cancelled", ""
		}
		id = c.cmd.CmdID
	}
	switch {
	case c.is(id) && c.endStatus != "":
		return protocol.OutcomeAlreadyFinished, fmt.Sprintf("%s is already ending (%s); nothing more to do", id, c.endStatus), id
	case c.is(id):
		c.endCtx = by // Not ending yet (the case above): this cancel is what ends it.
		r.interrupt(protocol.StatusCancelled, "", "cancelled by "+source, "")
		return protocol.OutcomeCancelledRunning, fmt.Sprintf("%s was running; interrupted with its cancel policy %s", id, c.cmd.CancelPolicy), id
	case r.queue.done[id] != "":
		return protocol.OutcomeAlreadyFinished, id + " has already finished; nothing cancelled", id
	case r.queue.isPruned(id):
		return protocol.OutcomeAlreadyFinished, id + " has already finished (the session's retention has removed its result since); nothing cancelled", id
	}
	switch queued, err := r.cancelQueued(id, source, by); {
	case err != nil:
		// Not "not found": the runner could not look.
		return protocol.OutcomeRejected, "queue/ cannot be listed, so whether " + id + " is queued is not known; nothing cancelled: " + err.Error(), id
	case queued:
		return protocol.OutcomeCancelledQueued, id + " was queued; it got a cancelled result and will not run", id
	}
	return protocol.OutcomeNotFound, "no command " + id + " is queued, running or finished in this session", id
}

// cancelQueued gives a queued command a cancelled result without running
// it. It lists queue/ (a rare operation) to find the file by cmd_id. The
// result goes through the result writer like every other: a name that
// already has a result is only cleared (cmd_skipped), and a cmd_id that
// already has one under another seq is answered duplicate_cmd_id. It
// reports whether it cancelled one, or why queue/ could not be listed.
func (r *Runner) cancelQueued(id, source string, by map[string]any) (bool, error) {
	names, err := r.queue.list(r.queue.dir)
	if err != nil {
		return false, err
	}
	for _, name := range names {
		seq, nid, err := protocol.ParseCommandName(name)
		if err != nil || nid != id {
			continue
		}
		if r.queue.hasResult(name) {
			r.queue.pend.remove(name)
			r.skipDone(name)
			continue
		}
		ipath := rel(protocol.DirInflight, name)
		if ok, _ := r.root.Claim(rel(protocol.DirQueue, name), ipath); !ok {
			continue
		}
		r.queue.pend.remove(name)
		if msg, _, dup := r.duplicate(id); dup {
			r.submitRejected(name, id, seq, msg, nil)
			return false, nil
		}
		res := &protocol.Result{CmdID: id, Seq: seq, Status: protocol.StatusCancelled, ExitReason: protocol.ReasonCancelledQueued,
			Error:       &protocol.Error{Code: protocol.CodeCancelled, Message: "cancelled by " + source + " before it started", Context: by},
			CommandPath: rel(protocol.DirArchive, name)}
		res.TraceID, res.Labels = r.correlation(ipath)
		r.submitResult(resultJob{kind: jobCancelled, name: name, res: res, cmdFile: ipath, keepAt: res.CommandPath})
		// The cancel has acted once its result is visible: only then is it
		// answered (answer.settle), so a reply never promises a result a
		// crash could turn into runner_restarted.
		r.status.dirty = true
		return true, nil
	}
	return false, nil
}

// stopRequested acts on a valid stop request.
func (r *Runner) stopRequested(mode protocol.StopMode, source string) (protocol.Outcome, string) {
	before := r.stop.mode
	r.beginStop(mode, source)
	switch {
	case before == protocol.StopForce || before == mode:
		return protocol.OutcomeAccepted, fmt.Sprintf("already stopping (%s); nothing changed", before)
	case mode == protocol.StopForce:
		return protocol.OutcomeAccepted, "stopping now: the current command (if any) is ended, queued commands stay queued"
	}
	return protocol.OutcomeAccepted, "stopping after the current command (if any); queued commands stay queued"
}

// requestStop begins a stop that no control request asked for (a signal,
// lease expiry, the context) and records it with a stop_request event.
func (r *Runner) requestStop(mode protocol.StopMode, why string) {
	r.flushSpool()
	off := r.disk.spoolSize
	if r.beginStop(mode, why) {
		r.event(protocol.Event{Event: protocol.EvStop, SpoolOffset: &off, Detail: map[string]any{"mode": string(mode), "why": why}})
	}
}

// beginStop begins a stop. Graceful: finish the current command, start no
// new one. Force: end the current command at once (terminate_session). It
// reports whether anything changed (a graceful stop while stopping does
// not; force after graceful does).
func (r *Runner) beginStop(mode protocol.StopMode, why string) bool {
	if !r.stop.begin(mode, why) {
		return false
	}
	r.log.Info("stopping", "mode", mode, "why", r.logReason(why))
	if mode == protocol.StopForce && r.cur != nil {
		r.interrupt(protocol.StatusCancelled, protocol.ReasonForceStop, "force stop ("+why+")", protocol.PolicyTerminateSession)
	}
	if mode == protocol.StopForce {
		// Results that cannot be committed now (a full disk) are given up:
		// their commands stay in inflight/ for the next runner.
		r.results.abort()
	}
	return true
}

// settleWait bounds how long a reply waits for a result it must see
// committed (a cancelled queued command's, mailbox.afterResult). Commits
// take milliseconds; the bound keeps a disk that is full (the writer
// retrying) from holding the reply back for ever.
const settleWait = 500 * time.Millisecond

package runner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/protocol"
)

// ctlSettle is how long an empty or unparsable control file must stay
// unchanged before it is acted on: a shell's `echo ... > ctl/cancel.json`
// creates the file empty before writing it (microseconds apart; its write
// also triggers a new look through inotify).
const ctlSettle = 5 * time.Millisecond

// takeCtl returns the content of a control file once it is complete, after
// claiming it (rename to a private name, so a request written meanwhile is
// not lost) and removing it. ok is false when there is nothing to act on yet.
func (r *Runner) takeCtl(name string) (data []byte, ok bool) {
	p := r.path(name)
	data, _, err := fsq.ReadFile(p, 1<<16)
	if errors.Is(err, os.ErrNotExist) {
		delete(r.ctlPrev, name)
		return nil, false
	}
	if errors.Is(err, fsq.ErrNotRegular) || errors.Is(err, fsq.ErrSymlink) || errors.Is(err, fsq.ErrTooLarge) {
		// A directory, FIFO, symlink or huge file is no request: it is
		// moved out of ctl/ (into tmp/, where it is deleted) and nothing
		// is done.
		r.discard(name)
		ev := protocol.EvCancel
		if name == protocol.FileStop {
			ev = protocol.EvStop
		}
		r.log.Warn("a control file is not a regular file; nothing done", "file", name, "err", err)
		r.event(protocol.Event{Event: ev, Detail: map[string]any{"outcome": "rejected", "file": name,
			"message": err.Error() + "; nothing done"}})
		return nil, false
	}
	if err == nil && (len(bytes.TrimSpace(data)) == 0 || !json.Valid(data)) {
		prev, seen := r.ctlPrev[name]
		if !seen || !bytes.Equal(prev, data) || time.Since(r.ctlSeenAt[name]) < ctlSettle {
			if !seen || !bytes.Equal(prev, data) {
				r.ctlPrev[name], r.ctlSeenAt[name] = data, time.Now()
			}
			r.ctlRecheck = time.Now().Add(ctlSettle)
			return nil, false
		}
	}
	delete(r.ctlPrev, name)
	r.discards++
	taken := r.path(rel(protocol.DirTmp, fmt.Sprintf("ctl-%d-%s", r.discards, filepath.Base(name))))
	if ok, _ := fsq.Claim(p, taken); !ok {
		return nil, false
	}
	if d, _, err2 := fsq.ReadFile(taken, 1<<16); err2 == nil {
		data = d
	} else if err != nil {
		r.log.Warn("unreadable control file; acting on it as if empty", "file", name, "err", err)
	}
	_ = os.RemoveAll(taken) // Consumed.
	return data, true
}

// checkCtl acts on ctl/stop.json and ctl/cancel.json.
func (r *Runner) checkCtl() {
	fsq.Revalidate(r.path(protocol.DirCtl)) // See fsq.Revalidate: control files come from other hosts.
	if data, ok := r.takeCtl(protocol.FileStop); ok {
		req, err := protocol.ParseStop(data)
		if err != nil {
			r.log.Warn("stop.json unreadable; stopping gracefully", "err", err)
		}
		r.requestStop(req.Mode, "stop.json")
	}
	if data, ok := r.takeCtl(protocol.FileCancel); ok {
		req, err := protocol.ParseCancel(data)
		if err != nil {
			r.log.Warn("cancel.json unreadable; cancelling the current command", "err", err)
		}
		r.cancel(req, err)
	}
}

func (r *Runner) cancel(req protocol.CancelRequest, parseErr error) {
	detail := map[string]any{"scope": string(req.Scope)}
	if parseErr != nil {
		detail["parse_error"] = parseErr.Error()
	}
	ev := protocol.Event{Event: protocol.EvCancel, CmdID: req.CmdID, Detail: detail}
	switch {
	case r.cur != nil && (req.Scope == protocol.ScopeCurrent || req.CmdID == r.cur.cmd.CmdID):
		ev.CmdID, detail["action"] = r.cur.cmd.CmdID, "interrupt"
		r.event(ev)
		r.interrupt(protocol.StatusCancelled, "", "cancelled by ctl/cancel.json", "")
	case req.Scope == protocol.ScopeCmdID && r.cancelQueued(req.CmdID):
		detail["action"] = "cancelled_queued"
		r.event(ev)
	default:
		detail["action"] = "ignored"
		if req.Scope == protocol.ScopeCurrent {
			detail["why"] = "no command is running"
		} else {
			detail["why"] = "unknown or already finished cmd_id"
		}
		r.log.Info("cancel request ignored", "scope", req.Scope, "cmd_id", req.CmdID, "why", detail["why"])
		r.event(ev)
	}
}

// cancelQueued gives a queued command a cancelled result without running
// it. It lists queue/ (a rare operation) to find the file by cmd_id. The
// result goes through the result writer like every other: a name that
// already has a result is only cleared (cmd_skipped), and a cmd_id that
// already has one under another seq is answered duplicate_cmd_id.
func (r *Runner) cancelQueued(id string) bool {
	names, err := fsq.ReadNames(r.path(protocol.DirQueue))
	if err != nil {
		return false
	}
	for _, name := range names {
		seq, nid, err := protocol.ParseCommandName(name)
		if err != nil || nid != id {
			continue
		}
		if r.hasResult(name) {
			r.pend.remove(name)
			r.skipDone(name)
			continue
		}
		ipath := rel(protocol.DirInflight, name)
		if ok, _ := fsq.Claim(r.path(rel(protocol.DirQueue, name)), r.path(ipath)); !ok {
			continue
		}
		r.pend.remove(name)
		if r.doneIDs[id] {
			res := &protocol.Result{CmdID: id, Seq: seq, Status: protocol.StatusError, ExitReason: protocol.ReasonInvalidRequest,
				Error: &protocol.Error{Code: protocol.CodeDuplicateCmdID, Message: fmt.Sprintf(
					"cmd_id %q already has a result under another seq; cmd_ids must be unique", id)},
				CommandPath: rel(protocol.DirRejected, name)}
			r.submitResult(resultJob{kind: jobRejected, name: name, res: res, cmdFile: ipath, keepAt: res.CommandPath})
			return false
		}
		res := &protocol.Result{CmdID: id, Seq: seq, Status: protocol.StatusCancelled, ExitReason: protocol.ReasonCancelledQueued,
			Error:       &protocol.Error{Code: protocol.CodeCancelled, Message: "cancelled by ctl/cancel.json before it started"},
			CommandPath: rel(protocol.DirArchive, name)}
		r.submitResult(resultJob{kind: jobCancelled, name: name, res: res, cmdFile: ipath, keepAt: res.CommandPath})
		r.stateDirty = true
		return true
	}
	return false
}

// requestStop begins a stop. Graceful: finish the current command, start no
// new one. Force: end the current command at once (terminate_session).
func (r *Runner) requestStop(mode protocol.StopMode, why string) {
	if r.stopMode == protocol.StopForce || (r.stopMode == mode && mode == protocol.StopGraceful) {
		return
	}
	r.stopMode, r.stopReason = mode, why
	r.event(protocol.Event{Event: protocol.EvStop, Detail: map[string]any{"mode": string(mode), "why": why}})
	r.log.Info("stopping", "mode", mode, "why", why)
	r.setPhase(protocol.PhaseStopping, why)
	if mode == protocol.StopForce && r.cur != nil {
		r.interrupt(protocol.StatusCancelled, protocol.ReasonForceStop, "force stop ("+why+")", protocol.PolicyTerminateSession)
	}
}

// isTaken reports names the runner uses for claimed control files.
func isTaken(name string) bool { return strings.Contains(name, ".taken.") }

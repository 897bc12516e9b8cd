package master

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/skillpilot/skillpilot/internal/sessionio"
	"github.com/skillpilot/skillpilot/protocol"
)

// Request sends a control request through the session's mailbox and waits
// for the runner's reply (PROTOCOL.md section 9). Only Op and the fields of
// that op need to be set; Request fills in protocol_version, req_id (a new
// UUIDv7 unless set), seq (allocated like a command's, so requests of every
// master have one order), session_id (of the live runner), ts and
// submitter.
//
// It checks first that a runner is alive and writes nothing when none is
// (ErrRunnerNotAlive): a request for no runner would only be stale for the
// next one. A heartbeat file rewritten within the liveness window, judged by
// the session's filesystem clock against the seq reservation just made (and
// on a local filesystem a held lock), is taken as alive at once; otherwise
// the heartbeat counter is watched until it moves, and the request fails
// only on a definite sign of death (phase stopped, no state, a free lock
// on a local filesystem) or once no live runner has been seen for the
// grace (WaitForRunner, 10 s by default) — a heartbeat that is
// merely late, as on a loaded NFS client, does not fail it. While waiting
// for the reply it keeps checking liveness by the same rule; its request
// is then withdrawn (deleted) if the runner has not taken it. A reply whose outcome is not a success comes with a
// *RequestError (errors.Is: ErrUnknownCmdID, ErrAlreadyFinished, ErrIdle,
// ErrNotRunning, ErrStaleRequest, ErrRequestRejected, ...).
func (s *Session) Request(ctx context.Context, req protocol.ControlRequest) (*protocol.ControlReply, error) {
	name, _, err := s.writeRequest(ctx, req, false)
	if err != nil {
		return nil, err
	}
	return s.awaitReply(ctx, name)
}

// writeRequest is Request up to the request written: it returns the
// request's name in ctl/. With deferHint the seq/hint rewrite (best
// effort, section 5) is left to the caller, returned as hint (nil when
// the hint need not change; done at once when no request is written), so
// that the request goes out first.
func (s *Session) writeRequest(ctx context.Context, req protocol.ControlRequest, deferHint bool) (name string, hint func(), err error) {
	if req.ReqID == "" {
		req.ReqID = NewCmdID()
	}
	req.ProtocolVersion, req.TS, req.Submitter = protocol.Version, protocol.Now(), s.io.Owner()
	if err := checkRequest(req); err != nil {
		return "", nil, err
	}
	r, err := s.io.Root()
	if err != nil {
		return "", nil, err
	}
	var seq int64
	if deferHint {
		var old int64
		if seq, old, err = sessionio.ReserveSeq(r); err != nil {
			return "", nil, err
		}
		if old < seq {
			rewrite := func() { sessionio.WriteHint(r, seq) }
			hint = rewrite
			defer func() {
				if err != nil { // No request to wait for: the hint now.
					rewrite()
				}
			}()
		}
	} else if seq, err = sessionio.AllocSeq(r); err != nil {
		return "", nil, err
	}
	state, fresh := s.freshHeartbeat(seq)
	if !fresh {
		l, err := s.awaitAlive(ctx) // Watches the heartbeat counter for up to the grace.
		if err != nil {
			return "", nil, fmt.Errorf("%w; nothing was written", err)
		}
		state = l.state
	}
	req.SessionID = state.SessionID
	req.Seq = seq
	b, err := json.Marshal(req)
	if err != nil {
		return "", nil, err
	}
	name = protocol.RequestName(seq, req.ReqID)
	if err := s.io.WriteFile(protocol.DirCtl+"/"+name, b); err != nil {
		return "", nil, wrapf(err, "write request")
	}
	return name, hint, nil
}

// checkRequest validates req as the runner will, before anything is
// written; a problem is a usage error.
func checkRequest(req protocol.ControlRequest) error {
	req.Seq = 0
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	if _, err := protocol.ParseControlRequest(protocol.RequestName(0, req.ReqID), b); err != nil {
		return usageFrom(err)
	}
	return nil
}

// awaitReply waits for ctl/ack/<name>.
func (s *Session) awaitReply(ctx context.Context, name string) (*protocol.ControlReply, error) {
	w := s.newRunnerWatch()
	wake, stop := s.watch(ctx, protocol.DirAck)
	defer stop()
	for {
		if rep, err := s.readReply(name); err != nil || rep != nil {
			return rep, err
		}
		err := w.check()
		if err == nil && ctx.Err() != nil {
			err = ctxErr(ctx)
		}
		if err != nil {
			// Withdraw the request unless the runner took it meanwhile.
			if rerr := s.io.Remove(protocol.DirCtl + "/" + name); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
				err = errors.Join(err, rerr)
			}
			if rep, rerr := s.readReply(name); rerr == nil && rep != nil {
				return rep, replyErr(rep)
			}
			return nil, err
		}
		select {
		case <-ctx.Done():
		case <-wake:
		}
	}
}

// readReply returns the reply named name, or nil while there is none.
func (s *Session) readReply(name string) (*protocol.ControlReply, error) {
	b, _, err := s.io.ReadFile(protocol.DirAck+"/"+name, protocol.MaxRequestSize, true) // The runner may be on another NFS client.
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var rep protocol.ControlReply
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, wrapf(err, "reply %s", name)
	}
	return &rep, replyErr(&rep)
}

func replyErr(rep *protocol.ControlReply) error {
	if outcomeErr(rep.Outcome) == nil {
		return nil
	}
	return &RequestError{Reply: rep}
}

// Cancel asks the runner to cancel cmdID, running or queued, and returns
// its reply: outcome cancelled_running or cancelled_queued with a nil
// error; not_found (ErrUnknownCmdID), already_finished (ErrAlreadyFinished)
// and the others with a *RequestError. The cancelled command's own result
// says how it ended (Command.Wait).
func (s *Session) Cancel(ctx context.Context, cmdID string) (*protocol.ControlReply, error) {
	_, id, err := parseCommandRef(cmdID) // A command file's name names its command too (PROTOCOL.md 19).
	if err != nil {
		return nil, err
	}
	return s.Request(ctx, protocol.ControlRequest{Op: protocol.OpCancel, Scope: protocol.ScopeCmdID, CmdID: id})
}

// CancelCurrent asks the runner to cancel whatever command is running;
// outcome idle (ErrIdle) when none is.
func (s *Session) CancelCurrent(ctx context.Context) (*protocol.ControlReply, error) {
	return s.Request(ctx, protocol.ControlRequest{Op: protocol.OpCancel, Scope: protocol.ScopeCurrent})
}

// Stop asks the runner to stop (graceful or force): it writes the stop
// request, or nothing with ErrRunnerNotAlive when no runner serves (the
// check Request makes), and returns once the request is in ctl/, without
// waiting. The returned PendingStop waits: Reply for the runner's answer,
// Wait for the answer and then for the runner to have stopped. A caller
// stopping many sessions at once (master pool stop) writes every request
// first and then waits for all of them: each file creation costs CPU
// (about half a millisecond of kernel time on a busy machine), and no
// request waits behind another session's polls.
func (s *Session) Stop(ctx context.Context, mode protocol.StopMode) (*PendingStop, error) {
	name, hint, err := s.writeRequest(ctx, protocol.ControlRequest{Op: protocol.OpStop, Mode: mode}, true)
	if err != nil {
		return nil, err
	}
	return &PendingStop{s: s, name: name, hint: hint}, nil
}

// PendingStop is a stop request written by Stop and not yet answered.
// Call Reply or Wait: the first of them also rewrites seq/hint (best
// effort, PROTOCOL.md section 5) when the request's seq is past it.
type PendingStop struct {
	s    *Session
	name string
	hint func() // the seq/hint rewrite, nil once done or not needed
}

// Reply waits for the runner's reply to the stop request: outcome
// accepted with a nil error, anything else with a *RequestError. The
// runner may still be stopping when it returns (Wait waits for that too).
func (p *PendingStop) Reply(ctx context.Context) (*protocol.ControlReply, error) {
	if p.hint != nil {
		p.hint()
		p.hint = nil
	}
	return p.s.awaitReply(ctx, p.name)
}

// Wait waits for the runner's reply (Reply), and once the runner accepted,
// until it has stopped: phase stopped, its lock free, or no live runner
// seen for the grace (Session.WaitForRunner).
func (p *PendingStop) Wait(ctx context.Context) (*protocol.ControlReply, error) {
	rep, err := p.Reply(ctx)
	if err != nil {
		return rep, err
	}
	s := p.s
	wake, stop := s.watch(ctx, protocol.DirState)
	defer stop()
	w := s.newRunnerWatch()
	for {
		l := s.observe()
		if !l.alive && l.definite {
			return rep, nil
		}
		if w.judge(time.Now(), l) != nil {
			return rep, nil // Gone for the grace: stopped as far as any master can tell.
		}
		select {
		case <-ctx.Done():
			return rep, ctxErr(ctx)
		case <-wake:
		}
	}
}

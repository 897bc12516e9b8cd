package master

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

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
// the heartbeat counter is watched for up to one window (Status). While waiting for the reply it keeps checking liveness and
// fails with ErrRunnerNotAlive once no live runner has been seen for
// WaitForRunner; its request is then withdrawn (deleted) if the runner has
// not taken it. A reply whose outcome is not a success comes with a
// *RequestError (errors.Is: ErrUnknownCmdID, ErrAlreadyFinished, ErrIdle,
// ErrNotRunning, ErrStaleRequest, ErrRequestRejected, ...).
func (s *Session) Request(ctx context.Context, req protocol.ControlRequest) (*protocol.ControlReply, error) {
	if req.ReqID == "" {
		req.ReqID = NewCmdID()
	}
	req.ProtocolVersion, req.TS, req.Submitter = protocol.Version, protocol.Now(), s.owner
	if err := checkRequest(req); err != nil {
		return nil, err
	}
	r, err := s.fs()
	if err != nil {
		return nil, err
	}
	seq, err := allocSeq(r)
	if err != nil {
		return nil, err
	}
	state, fresh := s.freshHeartbeat(seq)
	if !fresh {
		st, err := s.Status(ctx) // Watches the heartbeat counter for up to one window.
		if err != nil {
			return nil, err
		}
		if !st.Alive {
			return nil, fmt.Errorf("%w: %s; nothing was written", ErrRunnerNotAlive, st.AliveReason)
		}
		state.SessionID = st.SessionID
	}
	req.SessionID = state.SessionID
	req.Seq = seq
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	name := protocol.RequestName(seq, req.ReqID)
	if err := s.writeFile(protocol.DirCtl+"/"+name, b); err != nil {
		return nil, wrapf(err, "write request")
	}
	return s.awaitReply(ctx, name)
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
		return usageErr("%v", err)
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
			if rerr := s.remove(protocol.DirCtl + "/" + name); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
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
	b, _, err := s.readFile(protocol.DirAck+"/"+name, protocol.MaxRequestSize, true) // The runner may be on another NFS client.
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
	return s.Request(ctx, protocol.ControlRequest{Op: protocol.OpCancel, Scope: protocol.ScopeCmdID, CmdID: cmdID})
}

// CancelCurrent asks the runner to cancel whatever command is running;
// outcome idle (ErrIdle) when none is.
func (s *Session) CancelCurrent(ctx context.Context) (*protocol.ControlReply, error) {
	return s.Request(ctx, protocol.ControlRequest{Op: protocol.OpCancel, Scope: protocol.ScopeCurrent})
}

// Stop asks the runner to stop (graceful or force). With no live runner it
// writes nothing and returns ErrRunnerNotAlive. With wait, once the runner
// accepted, it waits until the runner has stopped (phase stopped, its lock
// free, or no heartbeat for the liveness window).
func (s *Session) Stop(ctx context.Context, mode protocol.StopMode, wait bool) (*protocol.ControlReply, error) {
	rep, err := s.Request(ctx, protocol.ControlRequest{Op: protocol.OpStop, Mode: mode})
	if err != nil || !wait {
		return rep, err
	}
	wake, stop := s.watch(ctx, protocol.DirState)
	defer stop()
	for {
		if l := s.observe(); !l.alive && l.definite {
			return rep, nil
		}
		select {
		case <-ctx.Done():
			return rep, ctxErr(ctx)
		case <-wake:
		}
	}
}

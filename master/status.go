package master

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/gofrs/flock"
	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/protocol"
)

// Status is what a master can tell about a session.
type Status struct {
	ProtocolVersion int            `json:"protocol_version"`
	Alive           bool           `json:"alive"`
	AliveReason     string         `json:"alive_reason"`
	Phase           protocol.Phase `json:"phase"`
	Reason          string         `json:"reason,omitempty"`
	SessionID       string         `json:"session_id"`
	RunnerHost      string         `json:"runner_host"`
	RunnerPID       int            `json:"runner_pid"`
	ToolPID         int            `json:"tool_pid,omitempty"`
	CurrentCmdID    string         `json:"current_cmd_id,omitempty"`
	CurrentElapsed  time.Duration  `json:"current_elapsed_ns,omitempty"`
	CurrentOutBytes int64          `json:"current_output_bytes,omitempty"`
	QueueDepth      int            `json:"queue_depth"`
	HeartbeatAge    time.Duration  `json:"heartbeat_age_ns"`
	HeartbeatCount  int64          `json:"heartbeat_counter"`
	CommandsDone    int64          `json:"commands_done"`
	Filesystem      string         `json:"filesystem,omitempty"`
	Launch          *LaunchStatus  `json:"launch,omitempty"` // set by master status on a launched session
}

// Status reads state.json and heartbeat.json and judges whether the runner
// is alive without comparing clocks of different hosts: the runner is dead
// if its lock can be taken; otherwise it is alive if its heartbeat counter
// moves within two heartbeat periods of our own clock (Status waits that
// long at most, and not at all if this Session saw it move recently).
func (s *Session) Status(ctx context.Context) (Status, error) {
	st := Status{ProtocolVersion: protocol.Version}
	state, serr := s.readState()
	hb, herr := s.readHeartbeat()
	if serr != nil && herr != nil {
		if _, err := os.Stat(s.path(protocol.DirQueue)); err != nil {
			return st, ErrSessionMissing
		}
		st.AliveReason = "no runner has written state yet"
		st.QueueDepth = s.queueDepth()
		return st, nil
	}
	st.Phase, st.Reason, st.SessionID, st.RunnerPID, st.ToolPID = state.Phase, state.Reason, state.SessionID, state.RunnerPID, state.ToolPID
	st.RunnerHost, st.CommandsDone, st.Filesystem = state.Hostname, state.CommandsDone, state.Filesystem
	st.HeartbeatCount = hb.Counter
	if fi, err := os.Stat(s.path(protocol.FileHeartbeat)); err == nil {
		st.HeartbeatAge = time.Since(fi.ModTime()).Round(time.Millisecond)
	}
	if state.CurrentCmdID != nil {
		st.CurrentCmdID = *state.CurrentCmdID
		// Both times are the runner's clock: no skew.
		st.CurrentElapsed = hb.Timestamp.Sub(state.CurrentStart.Time).Round(time.Millisecond)
		if hb.CurrentCmdID == st.CurrentCmdID {
			st.CurrentOutBytes = hb.CurrentOutBytes
		}
	}
	st.QueueDepth = s.queueDepth()
	st.Alive, st.AliveReason = s.alive(ctx, hb, state)
	return st, nil
}

func (s *Session) queueDepth() int {
	names, _ := fsq.ReadNames(s.path(protocol.DirQueue))
	n := 0
	for _, name := range names {
		if isCommand(name) {
			n++
		}
	}
	return n
}

func (s *Session) alive(ctx context.Context, hb protocol.Heartbeat, state protocol.State) (bool, string) {
	if state.Phase == protocol.PhaseStopped || hb.Phase == protocol.PhaseStopped {
		return false, "the runner stopped"
	}
	// A free flock proves the runner gone only on a local filesystem: on
	// NFS mounted nolock, locks are private to each client.
	if !s.network && !s.lockHeld() {
		return false, "the runner's lock is free"
	}
	now := time.Now()
	s.mu.Lock()
	seen := s.lastHB
	if seen.counter != hb.Counter || seen.at.IsZero() {
		moved := !seen.at.IsZero()
		s.lastHB = hbSeen{counter: hb.Counter, at: now}
		s.mu.Unlock()
		if moved {
			return true, "heartbeat counter moved"
		}
	} else {
		s.mu.Unlock()
	}
	window := 2*time.Duration(max(hb.IntervalMS, 100))*time.Millisecond + 250*time.Millisecond
	if now.Sub(seen.at) > window && !seen.at.IsZero() {
		return false, "heartbeat counter has not moved for " + now.Sub(seen.at).Round(time.Millisecond).String()
	}
	// Watch the counter for one window on our clock.
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	end := time.NewTimer(window)
	defer end.Stop()
	for {
		select {
		case <-ctx.Done():
			return false, "status interrupted"
		case <-end.C:
			return false, "heartbeat counter did not move within " + window.String()
		case <-t.C:
			h, err := s.readHeartbeat()
			if err == nil && h.Counter != hb.Counter {
				s.mu.Lock()
				s.lastHB = hbSeen{counter: h.Counter, at: time.Now()}
				s.mu.Unlock()
				return true, "heartbeat counter moved"
			}
		}
	}
}

// lockHeld probes the runner's flock with a shared lock. Where flock does
// not work (some NFS mounts) it reports true and the heartbeat decides.
func (s *Session) lockHeld() bool {
	l := flock.New(s.path(protocol.FileLock))
	ok, err := l.TryRLock()
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	if ok {
		_ = l.Unlock()
		return false
	}
	return true
}

// CheckAlive returns ErrRunnerNotAlive when no runner serves the session.
func (s *Session) CheckAlive(ctx context.Context) error {
	st, err := s.Status(ctx)
	if err != nil {
		return err
	}
	if !st.Alive {
		return errors.Join(ErrRunnerNotAlive, errors.New(st.AliveReason))
	}
	return nil
}

// WaitReady waits until a runner serves the session in dir: the directory
// exists, the runner is alive and its phase is idle or busy. The directory
// may not exist yet when WaitReady is called (the runner creates it).
func WaitReady(ctx context.Context, dir string) (Status, error) {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		if s, err := Open(dir); err == nil {
			if st, err := s.Status(ctx); err == nil && st.Alive && (st.Phase == protocol.PhaseIdle || st.Phase == protocol.PhaseBusy) {
				return st, nil
			}
		}
		select {
		case <-ctx.Done():
			return Status{}, ctxErr(ctx)
		case <-t.C:
		}
	}
}

package runner

import (
	"context"
	"errors"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/protocol"
)

// stateDelay bounds how stale state.json may be after a busy/idle flip.
const stateDelay = 20 * time.Millisecond

// flushDelay bounds how long printed bytes may sit in the runner's buffers
// before they reach log/session.out and the command's output file, where
// masters follow them.
const flushDelay = 20 * time.Millisecond

// flushBuffers writes out the spool and the current output.
func (r *Runner) flushBuffers() {
	r.flushSpool()
	if r.cur != nil {
		_ = r.cur.w.Flush() // Partial output becomes visible; errors surface at finish.
	}
	r.bufferedAt = time.Time{}
}

// loop is the runner's one owner goroutine.
func (r *Runner) loop(ctx context.Context, signals <-chan os.Signal) error {
	hb := time.NewTicker(r.cfg.Heartbeat)
	defer hb.Stop()
	wake := time.NewTimer(time.Hour)
	defer wake.Stop()
	ctxDone := ctx.Done()
	for {
		r.nextCommand()
		if r.stopMode != "" && r.cur == nil {
			break
		}
		if r.stateDirty && r.stateAt.IsZero() {
			// Busy/idle flips are coalesced off the critical path;
			// other phases are written by setPhase at once.
			r.stateAt = time.Now().Add(stateDelay)
		}
		wake.Reset(r.nextWake())
		select {
		case c := <-r.chunks:
			r.onChunk(c)
		case ex := <-r.exited:
			r.onToolExit(ex)
		case d := <-r.commits.done:
			r.onCommitted(d)
		case ch := <-r.watcher.Changes:
			r.onChange(ch)
		case <-r.watcher.Rescan:
			r.rescan()
		case <-r.watcher.Lost:
			r.scan.lost = true
			r.maybeScan()
		case res := <-r.scan.results:
			r.onScan(res)
		case <-hb.C:
			r.onBeat()
		case <-wake.C:
			r.onTimer(time.Now())
		case sig := <-signals:
			r.onSignal(sig)
		case <-ctxDone:
			ctxDone = nil
			r.requestStop(protocol.StopGraceful, "context cancelled")
		}
	}
	return r.shutdown()
}

// nextWake returns how long until the earliest deadline the loop keeps.
func (r *Runner) nextWake() time.Duration {
	var next time.Time
	consider := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if r.cur != nil && r.cur.endStatus == "" {
		consider(r.cur.deadline)
	}
	switch r.tphase {
	case toolNone:
		consider(r.restartAt)
	case toolResync:
		consider(r.nextSyncAt)
		consider(r.deadline)
	case toolBooting, toolInit, toolKilling:
		consider(r.deadline)
	}
	consider(r.pend.promote(time.Now()))
	consider(r.mbox.recheck)
	consider(r.stateAt)
	if !r.bufferedAt.IsZero() {
		consider(r.bufferedAt.Add(flushDelay))
	}
	if next.IsZero() {
		return time.Hour
	}
	return max(time.Until(next), time.Millisecond)
}

func (r *Runner) onTimer(now time.Time) {
	if c := r.cur; c != nil && c.endStatus == "" && !c.deadline.IsZero() && !now.Before(c.deadline) {
		r.interrupt(protocol.StatusTimeout, "", "timed out after "+c.deadline.Sub(c.start).String(), "")
	}
	if !r.mbox.recheck.IsZero() && !now.Before(r.mbox.recheck) {
		r.checkCtl()
	}
	if !r.bufferedAt.IsZero() && now.Sub(r.bufferedAt) >= flushDelay {
		r.flushBuffers()
	}
	if !r.stateAt.IsZero() && !now.Before(r.stateAt) {
		r.writeState()
	}
	expired := !r.deadline.IsZero() && !now.Before(r.deadline)
	switch r.tphase {
	case toolNone:
		if !now.Before(r.restartAt) && r.stopMode == "" {
			r.startTool()
		}
	case toolBooting:
		if expired {
			r.startFailed = true
			r.setPhase(protocol.PhaseError, "the tool did not answer the start-up sync within "+r.cfg.StartTimeout.String())
			r.killTool(true)
		}
	case toolInit:
		if expired {
			r.initFailed("init script " + r.cfg.Init[r.initIdx] + " did not finish within " + r.cfg.InitTimeout.String())
		}
	case toolResync:
		if expired {
			r.log.Warn("the tool did not come back after an interrupt; terminating it")
			r.killTool(false)
		} else if !now.Before(r.nextSyncAt) {
			r.sendSync()
		}
	case toolKilling:
		if expired {
			r.log.Warn("the tool ignored SIGTERM; killing its process group")
			r.killTool(true)
		}
	}
}

func (r *Runner) onBeat() {
	r.flushBuffers()
	if r.network && r.beats%2 == 0 {
		r.touchInputs()
	}
	r.lease.check(r, time.Now())
	r.beat()
	r.flushTail()
	if r.stateDirty {
		r.writeState()
	}
}

func (r *Runner) onSignal(sig os.Signal) {
	r.signals++
	mode := protocol.StopGraceful
	if r.signals > 1 {
		mode = protocol.StopForce
	}
	r.requestStop(mode, "signal "+sig.String())
}

// onChange handles one name inotify reported.
func (r *Runner) onChange(ch fsq.Change) {
	switch ch.Dir {
	case r.path(protocol.DirQueue):
		if seq, ok := commandSeq(ch.Name); ok {
			if r.pend.add(ch.Name, seq) {
				r.stateDirty = true
			}
		}
	case r.path(protocol.DirCtl):
		if !strings.HasPrefix(ch.Name, ".") { // A master's temp file: its rename comes next.
			r.checkCtl()
		}
	}
}

// rescan runs on every poll tick: control files always, the queue
// listing when the scanner says it is due.
func (r *Runner) rescan() {
	r.checkCtl()
	r.maybeScan()
}

// shutdown ends the tool and every process it started, and records the stop.
func (r *Runner) shutdown() error {
	r.setPhase(protocol.PhaseStopping, r.stopReason)
	r.writeState()
	if t := r.tool; t != nil {
		t.signalGroup(syscall.SIGTERM)
		if !r.waitExit(t, r.cfg.KillGrace) {
			t.signalGroup(syscall.SIGKILL)
			r.waitExit(t, 10*time.Second)
		}
		t.signalGroup(syscall.SIGKILL) // Whatever else is left in its group.
		t.close()
		r.tool = nil
	}
	r.commits.close(r.onCommitted)
	r.flushTail()
	r.setPhase(protocol.PhaseStopped, r.stopReason)
	r.writeState()
	r.beat()
	r.event(protocol.Event{Event: protocol.EvRunnerStop, Detail: map[string]any{"reason": r.stopReason, "commands_done": r.cmdsDone}})
	r.log.Info("runner stopped", "reason", r.stopReason, "commands_done", r.cmdsDone)
	r.metrics.close()
	return nil
}

// waitExit waits for t's exit, spooling its output meanwhile.
func (r *Runner) waitExit(t *tool, d time.Duration) bool {
	timeout := time.After(d)
	for {
		select {
		case c := <-r.chunks:
			r.onChunk(c)
		case ex := <-r.exited:
			if ex.tool == t {
				r.drain(t, 200*time.Millisecond)
				return true
			}
		case <-timeout:
			return false
		}
	}
}

// commandSeq reports whether name is meant as a command file (including one
// with an unsafe cmd_id, which gets an error result) and its seq.
func commandSeq(name string) (int64, bool) {
	seq, _, err := protocol.ParseCommandName(name)
	return seq, err == nil || errors.Is(err, protocol.ErrBadCmdID)
}

// touchInputs bumps the mtime of the directories masters write into, on a
// network filesystem, every other heartbeat: if this client cached "absent"
// for a name a master created within the same timestamp tick as an earlier
// change (fsq.TouchDir), its own change of the directory drops that cache.
// This bounds how long a command, a cancel or a lease can go unseen.
func (r *Runner) touchInputs() {
	for _, d := range []string{protocol.DirQueue, protocol.DirCtl, protocol.DirState} {
		if err := fsq.TouchDir(r.path(d)); err != nil {
			r.log.Debug("touch", "dir", d, "err", err)
		}
	}
}

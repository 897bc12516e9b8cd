package runner

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"strings"
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

// promptRelease is how long a line driver's tool must have been quiet
// before a prompt that ends the unfinished last line of a command's output
// is output all the same: it was the tool's prompt, printed before the
// marker that follows it on that line, or a question ending with the
// prompt's text (an expect waiting for it sees it after this long). Only
// a command typed line by line holds its prompt: its end and done lines
// were typed with it, and the marker that ends the line is on its way. A
// payload file's command (lazyDone) prints its end line itself, before the
// tool's prompt, and its done line waits for that prompt: what ends its
// unfinished line meanwhile is the payload's own question.
const promptRelease = time.Second

// flushBuffers writes out the spool and the current output.
func (r *Runner) flushBuffers() {
	printed := !r.disk.bufferedAt.IsZero()
	// A line driver's unfinished line, less what may be a marker, and less
	// a prompt that ends it while the tool printed something within
	// promptRelease (onTimer flushes again then).
	c := r.cur
	hold := c != nil && !c.lazyDone && r.clk.Now().Sub(r.tool.lastOut) < promptRelease
	released, held := r.fr.releasePartial(hold)
	r.tool.promptHeld = time.Time{}
	if held {
		r.tool.promptHeld = r.tool.lastOut.Add(promptRelease)
	}
	r.flushSpool()
	if c != nil {
		// Partial output becomes visible. A failure is kept for the
		// result (finish); a full disk suspends output files.
		if err := c.flush(); err != nil && isNoSpace(err) {
			r.noSpace(c.name, err)
		}
	}
	r.disk.bufferedAt = time.Time{}
	if r.id.network && printed {
		r.pushToServer()
	}
	if released && len(r.in.held) > 0 {
		r.pumpInput() // A question without a newline is output now: an expect may match it.
	}
}

// pushToServer sends the spool's and the running command's written bytes to
// the file server. An NFS client keeps written data in its own page cache
// until the file is closed or synced (or its write-back runs, up to ~30 s
// later), so a master on another host following the spool or a command's
// output (waitfor, tail -f, Follow) would see it that late. Called when the
// buffers are flushed, i.e. within flushDelay of any printed byte.
func (r *Runner) pushToServer() {
	if err := r.disk.syncSpool(); err != nil {
		r.log.Debug("push spool to the server", "err", err)
	}
	if err := r.cur.syncOutput(); err != nil {
		r.log.Debug("push output to the server", "err", err)
	}
}

// loop is the runner's one owner goroutine.
func (r *Runner) loop(ctx context.Context, signals <-chan os.Signal) error {
	hb := r.clk.NewTicker(r.cfg.Heartbeat)
	defer hb.Stop()
	wake := r.clk.NewTimer(time.Hour)
	defer wake.Stop()
	ctxDone := ctx.Done()
	for {
		r.nextCommand()
		r.showPhase()
		// A graceful stop waits for results that wait for a retry (a full
		// disk) here, in the loop, so the heartbeat and control go on; a
		// force stop has given them up (beginStop).
		if r.stop.mode != "" && r.cur == nil && (r.pending.err == nil || r.stop.mode == protocol.StopForce) {
			if r.tool.term == nil {
				break
			}
			r.beginClosing() // The loop goes on until the tool is gone.
		}
		// Busy/idle flips are coalesced off the critical path;
		// other phases are written by showPhase at once.
		r.status.schedule(r.clk.Now())
		wake.Reset(r.nextWake())
		out, exited, input, typed := r.tool.output(), r.tool.exited(), r.in.writeDone(), r.tool.typing()
		var handOver chan<- resultJob // nil: nothing waits for the writer's queue
		var next resultJob
		if len(r.queue.handOver) > 0 {
			handOver, next = r.results.jobs, r.queue.handOver[0]
		}
		select {
		case handOver <- next:
			r.queue.handOver[0] = resultJob{}
			r.queue.handOver = r.queue.handOver[1:]
		case c, ok := <-out:
			if !ok {
				r.tool.eof = true
				r.endExit() // If it exited: its last output is read.
				continue
			}
			r.onChunk(c)
		case ex := <-exited:
			r.onToolExit(ex)
		case d := <-input:
			r.onInputDone(d)
		case d := <-typed:
			r.onTyped(d)
		case d := <-r.results.done:
			r.onResult(d)
			r.watcher.Hurry() // The master that waited for it may send the next one now.
		case st := <-r.results.status:
			r.onWriterStatus(st)
		case d := <-r.disk.retain.doneCh():
			r.onPruned(d)
		case ch := <-r.watcher.Changes:
			r.onChange(ch)
		case <-r.watcher.Rescan:
			r.rescan()
		case <-r.watcher.Lost:
			r.queue.scanLost(r.watcher.Inotify)
		case res := <-r.queue.scan.results:
			n := r.queue.pend.len()
			r.onScan(res)
			if r.queue.pend.len() > n {
				// Commands come in bursts. (Measured on NFS without this
				// hurry, leaving it to the result's: round trips were
				// slower, p50 111-125 ms against 64-104 ms.)
				r.watcher.Hurry()
			}
		case <-hb.C():
			r.onBeat()
		case <-wake.C():
			r.onTimer(r.clk.Now())
		case sig := <-signals:
			r.requestStop(r.stop.signalled(), "signal "+sig.String())
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
	now := r.clk.Now()
	if r.cur != nil {
		consider(r.cur.due())
	}
	consider(r.tool.due(r.stop.mode != ""))
	consider(r.queue.pend.promote(now))
	consider(r.mbox.recheck)
	consider(r.in.due())
	consider(r.status.writeAt)
	consider(r.disk.flushAt())
	consider(r.tool.promptHeld)
	if r.queue.more {
		consider(now)
	}
	if d, ok := r.queue.owedScanIn(); ok {
		consider(now.Add(d))
	}
	if next.IsZero() {
		return time.Hour
	}
	// What is due now fires at once (a fake clock in tests does not move
	// by itself); onTimer moves or clears whatever it handles.
	return max(next.Sub(now), 0)
}

func (r *Runner) onTimer(now time.Time) {
	if c := r.cur; c != nil {
		if msg, ok := c.timedOut(now); ok {
			r.interrupt(protocol.StatusTimeout, "", msg, "")
		}
	}
	if !r.mbox.recheck.IsZero() && !now.Before(r.mbox.recheck) {
		r.checkCtl()
	}
	r.queue.payOwedScan(r.watcher.Inotify)
	if at := r.tool.promptHeld; r.disk.flushDue(now) || (!at.IsZero() && !now.Before(at)) {
		r.flushBuffers() // First: a question it releases may answer an expect due now.
	}
	if d := r.in.due(); !d.IsZero() && !now.Before(d) {
		r.pumpInput()
		r.pumpWaiting("")
	}
	if at := r.status.writeAt; !at.IsZero() && !now.Before(at) { // A scheduled rewrite of state.json.
		r.writeState()
	}
	r.tool.timer(r, now)
}

func (r *Runner) onBeat() {
	if r.checkSessionLost() {
		return // Stopping: nothing more is looked at or written for the session.
	}
	r.checkLayout()
	r.checkDiskRoom()
	if r.pending.err == nil && r.status.beats%16 == 0 {
		r.disk.remakeBallast()
	}
	r.flushBuffers()
	r.keepRunningOutput()      // outputwatch.go
	r.keepRunningCommandFile() // outputwatch.go
	r.retainBeat()             // retain.go
	r.reportProgress()         // progress.go
	if r.id.network && r.status.beats%2 == 0 {
		r.touchInputs()
	}
	r.lease.check(r, r.clk.Now())
	r.beat()
	r.flushTail()
	if r.status.dirty || r.cur != nil || r.stateGone() {
		// While a command runs, current_quiet_ms and current_last_line
		// are refreshed every heartbeat; a state.json someone deleted
		// (or state/ with it) is written again at once.
		r.writeState()
	}
}

// stateGone reports whether state/state.json is missing.
func (r *Runner) stateGone() bool {
	_, err := r.root.Lstat(protocol.FileState)
	return errors.Is(err, fs.ErrNotExist)
}

// onChange handles one name inotify reported.
func (r *Runner) onChange(ch fsq.Change) {
	switch ch.Dir {
	case r.path(protocol.DirQueue):
		if seq, rule, ok := protocol.CheckQueueName(ch.Name); ok {
			if r.queue.pend.add(ch.Name, seq, rule) {
				r.noteQueued(ch.Name, seq, rule)
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
	r.queue.pollTick(r.watcher.Inotify) // pace.go
}

// shutdown ends the tool and every process it started, and records the stop.
func (r *Runner) shutdown() error {
	r.showClosing()
	for _, j := range r.queue.handOver {
		r.results.submit(j, r.onResult)
	}
	r.queue.handOver = nil
	r.results.close(r.onResult)
	r.settleRetention() // retain.go: the last batch's pruned event before runner_stop.
	r.flushTail()
	reason := r.stop.reason
	r.stop.stage = stopDone
	r.showPhase()
	r.writeState()
	r.beat()
	detail := map[string]any{"reason": reason, "commands_done": r.status.cmdsDone}
	if e := r.stop.err; e != nil {
		detail["error"] = e
	}
	r.event(protocol.Event{Event: protocol.EvRunnerStop, Detail: detail})
	r.log.Info("runner stopped", "reason", r.logReason(reason), "commands_done", r.status.cmdsDone)
	r.metrics.close()
	if err := r.tool.gaveUpErr(); err != nil {
		return err
	}
	if why, lost := r.stop.lost(); lost {
		return sessionLostError(why)
	}
	return nil
}

// beginClosing begins the end of the tool at a stop, the loop going on
// (phaseClosing): the stage is shown, queued commands are told they will
// not start here, and the tool gets SIGTERM.
func (r *Runner) beginClosing() {
	if _, closing := r.tool.phase.(*phaseClosing); closing || r.tool.exiting != nil {
		return
	}
	r.showClosing()
	if err := r.tool.term.Signal(sigTerm); err != nil {
		r.log.Debug("signal tool", "err", err)
	}
	r.enter(&phaseClosing{until: r.clk.Now().Add(r.cfg.KillGrace)})
}

// showClosing shows the closing stage and answers the commands still
// queued, once.
func (r *Runner) showClosing() {
	if r.stop.stage == stopClosing {
		return
	}
	r.stop.stage = stopClosing
	r.showPhase()
	r.writeState()
	r.abortInput()
	r.pumpWaiting("*") // Commands still queued will not start under this runner.
}

// touchInputs bumps the mtime of the directories masters write into, on a
// network filesystem, every other heartbeat: if this client cached "absent"
// for a name a master created within the same timestamp tick as an earlier
// change (fsq.TouchDir), its own change of the directory drops that cache.
// This bounds how long a command, a cancel or a lease can go unseen.
func (r *Runner) touchInputs() {
	for _, d := range []string{protocol.DirQueue, protocol.DirCtl, protocol.DirState} {
		if err := r.root.TouchDir(d); err != nil {
			r.log.Debug("touch", "dir", d, "err", err)
		}
	}
}

// onWriterStatus records whether results wait for a retry (a full disk, an
// I/O error). Meanwhile no new command starts, the phase is error and the
// reason says why; the heartbeat keeps beating.
func (r *Runner) onWriterStatus(st writerStatus) {
	was := r.pending.err
	r.pending = st
	if st.err != nil && isNoSpace(st.err) {
		r.noSpace("a result", st.err)
	}
	if st.err != nil {
		if was == nil || was.Error() != st.err.Error() {
			r.event(protocol.Event{Event: protocol.EvWarning, Detail: map[string]any{
				"results_pending": st.pending, "error": st.err.Error()}})
		}
		return
	}
	r.event(protocol.Event{Event: protocol.EvWarning, Detail: map[string]any{"results_pending": 0, "resolved": true}})
}

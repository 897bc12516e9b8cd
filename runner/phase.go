package runner

import (
	"fmt"
	"strings"

	"github.com/skillpilot/skillpilot/protocol"
)

// phase is the runner's phase as state.json, the heartbeat and the metrics
// show it, and why: derivePhase of the runner's conditions now. It is
// derived here, and only here; nothing sets it.
func (r *Runner) phase() (protocol.Phase, string) {
	f := phaseFacts{stop: r.stop.stage, stopping: r.stop.mode != "", stopWhy: r.stop.reason,
		layoutErr: r.layout.err, unwritten: r.pending.pending, writeErr: r.pending.err,
		tool: r.tool.facts(r.cur != nil)}
	return derivePhase(f)
}

// phaseFacts are the plain values the phase is derived from.
type phaseFacts struct {
	stop      stopStage // how far shutdown has gone
	stopping  bool      // a stop was requested
	stopWhy   string
	layoutErr error // the session directory cannot be used (layout.go)
	unwritten int   // results waiting for a retry (the result writer)
	writeErr  error // why they wait
	tool      toolFacts
}

// derivePhase is PROTOCOL.md section 8's phase. First match wins:
//
//   - stopped / stopping: shutdown (loop.go) has ended everything / ends
//     the tool now, or a stop was requested (the current command
//     finishes, results waiting for a retry are waited for);
//   - error: the session directory cannot be used (layout.go), or results
//     wait for a retry (a full disk, an I/O error: the result writer);
//   - what the tool's phase shows (toolFacts.shows).
func derivePhase(f phaseFacts) (protocol.Phase, string) {
	switch {
	case f.stop == stopDone:
		return protocol.PhaseStopped, f.stopWhy
	case f.stop == stopClosing, f.stopping:
		return protocol.PhaseStopping, f.stopWhy
	case f.layoutErr != nil:
		return protocol.PhaseError, f.layoutErr.Error()
	case f.writeErr != nil:
		return protocol.PhaseError, fmt.Sprintf("%d result(s) waiting to be written, retrying: %v", f.unwritten, f.writeErr)
	}
	return f.tool.shows()
}

// toolFacts are the plain values of the tool's life that the phase shows.
type toolFacts struct {
	now         toolShown // what the tool's phase is
	killFailure string    // phaseKilling's: the failed start being killed ("" for another kill)
	cmd         bool      // a command is running
	failure     string    // why the last start failed, with the restart to come
	wasReady    bool      // a tool reached its prompt under this runner
	diedBusy    bool      // the last ready tool died running a command
}

// toolShown sorts the tool's phases (toolphase.go) by what they show.
type toolShown int

const (
	toolBetween toolShown = iota // down, starting, running init scripts
	toolReady                    // at its prompt
	toolBusy                     // running a command, or resynchronising after one
	toolKilling                  // being killed
)

// facts are t's toolFacts; cmd says whether a command is running.
func (t *toolLife) facts(cmd bool) toolFacts {
	f := toolFacts{cmd: cmd, failure: t.failure, wasReady: t.wasReady, diedBusy: t.diedBusy}
	switch p := t.phase.(type) {
	case *phaseReady:
		f.now = toolReady
	case *phaseBusy, *phaseResync:
		f.now = toolBusy
	case *phaseKilling:
		f.now, f.killFailure = toolKilling, p.failure
	}
	return f
}

// shows is the phase the tool's life shows: idle at its prompt, busy
// running a command (interrupted or being killed included), error while
// a failed start is being killed or the next start waits (the reason
// says which restart comes when). Between two tools (down, starting,
// running init scripts) it shows what led there: starting before the
// first tool was ever ready, busy after a tool died running a command,
// idle after one died at its prompt.
func (f toolFacts) shows() (protocol.Phase, string) {
	switch {
	case f.now == toolReady:
		return protocol.PhaseIdle, ""
	case f.now == toolBusy:
		return protocol.PhaseBusy, ""
	case f.now == toolKilling && f.killFailure != "":
		return protocol.PhaseError, f.killFailure
	case f.cmd:
		return protocol.PhaseBusy, ""
	case f.failure != "":
		return protocol.PhaseError, f.failure
	case !f.wasReady:
		return protocol.PhaseStarting, ""
	case f.diedBusy:
		return protocol.PhaseBusy, ""
	}
	return protocol.PhaseIdle, ""
}

// logReason is why as the log gives it: whole the first time, and where
// it contains the reason the log gave whole last (a failed start's, with
// the tool's last lines), that part said as "(as above)": a wrong --kind
// logged its reason eight times, in the failed start, the error phase
// entered and left per start, the give-up, the stop and the runner's end.
// Events, state.json and the exit message keep it whole.
func (r *Runner) logReason(why string) string {
	const long = 40 // Shorter reasons are said whole every time.
	if last := r.status.logged; last != "" && strings.Contains(why, last) {
		return strings.Replace(why, last, "(as above)", 1)
	}
	if len(why) > long {
		r.status.logged = why
	}
	return why
}

// showPhase notices a change of the derived phase, once per turn of the
// loop and at each step of shutdown: state.json is marked for rewriting
// (busy/idle flips are coalesced by the loop; any other phase is written
// at once) and entering error is logged.
func (r *Runner) showPhase() {
	p, why := r.phase()
	if p == r.status.shown && why == r.status.shownWhy {
		return
	}
	r.status.shown, r.status.shownWhy = p, why
	r.status.dirty = true
	if p == protocol.PhaseError {
		r.log.Error("runner in error phase", "reason", r.logReason(why))
	}
	if p != protocol.PhaseBusy && p != protocol.PhaseIdle && r.watcher != nil {
		r.writeState()
	}
}

package runner

import (
	"fmt"
	"strings"

	"github.com/skillpilot/skillpilot/protocol"
)

// phase is the runner's phase as state.json, the heartbeat and the metrics
// show it, and why. It is derived here, and only here, from the runner's
// own conditions and the tool's phase (toolphase.go); nothing sets it.
// First match wins:
//
//   - stopped / stopping: shutdown (loop.go) has ended everything / ends
//     the tool now, or a stop was requested (the current command
//     finishes, results waiting for a retry are waited for);
//   - error: the session directory cannot be used (layout.go), or results
//     wait for a retry (a full disk, an I/O error: the result writer);
//   - what the tool's phase shows (toolLife.shows).
func (r *Runner) phase() (protocol.Phase, string) {
	s := &r.stop
	switch {
	case s.stage == stopDone:
		return protocol.PhaseStopped, s.reason
	case s.stage == stopClosing, s.mode != "":
		return protocol.PhaseStopping, s.reason
	case r.layout.err != nil:
		return protocol.PhaseError, r.layout.err.Error()
	case r.pending.err != nil:
		return protocol.PhaseError, fmt.Sprintf("%d result(s) waiting to be written, retrying: %v", r.pending.pending, r.pending.err)
	}
	return r.tool.shows(r.cur != nil)
}

// shows is the phase the tool's life shows: idle at its prompt, busy
// running a command (interrupted or being killed included), error while
// a failed start is being killed or the next start waits (the reason
// says which restart comes when). Between two tools (down, starting,
// running init scripts) it shows what led there: starting before the
// first tool was ever ready, busy after a tool died running a command,
// idle after one died at its prompt.
func (t *toolLife) shows(cmd bool) (protocol.Phase, string) {
	switch p := t.phase.(type) {
	case *phaseReady:
		return protocol.PhaseIdle, ""
	case *phaseBusy, *phaseResync:
		return protocol.PhaseBusy, ""
	case *phaseKilling:
		if p.failure != "" {
			return protocol.PhaseError, p.failure
		}
	}
	switch {
	case cmd:
		return protocol.PhaseBusy, ""
	case t.failure != "":
		return protocol.PhaseError, t.failure
	case !t.wasReady:
		return protocol.PhaseStarting, ""
	case t.diedBusy:
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

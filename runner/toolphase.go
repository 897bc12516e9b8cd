package runner

import (
	"errors"
	"fmt"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
)

// toolPhase is where the tool is in its own life. Each phase is a type
// that gathers everything the runner does while the tool is in it: the
// lines it waits for, its deadline, and what the tool's exit means there
// (the structure of hashicorp/raft's runFollower/runCandidate/runLeader).
// The owner goroutine calls these methods; r.enter switches phases.
type toolPhase interface {
	String() string
	// line handles a whole line the framer was told to look for.
	line(r *Runner, l []byte)
	// due is when timer wants to run next; zero means never.
	due() time.Time
	timer(r *Runner, now time.Time)
	// exited handles the end of the tool process, after its last output
	// was read and its process group cleared.
	exited(r *Runner, ex toolExit)
}

// phaseDown: no tool. A new one starts at `at`, unless the runner stops.
type phaseDown struct{ at time.Time }

func (p *phaseDown) String() string           { return "down" }
func (p *phaseDown) line(*Runner, []byte)     {}
func (p *phaseDown) due() time.Time           { return p.at }
func (p *phaseDown) exited(*Runner, toolExit) {}
func (p *phaseDown) timer(r *Runner, now time.Time) {
	if !now.Before(p.at) && r.stop.mode == "" {
		r.startTool()
	}
}

// phaseBooting: the helpers were typed; the first sync marker proves the
// tool reads and runs them. Real shells differ in when they start reading:
// tclsh keeps what was typed before it was ready, Magic throws it away and
// prints its prompt, a licence checkout reads nothing for minutes. So the
// runner watches what the tool prints (bootWatch) and types the start-up
// again when the tool has printed something since the last typing and gone
// quiet at a prompt; a tool still printing, quiet after a whole line, or
// quiet after a partial line it printed before the last typing is still
// starting and gets until StartTimeout. A tool that answered bootRounds
// typings with errors at its prompt rejects the start-up: the start fails
// at once, with the tool's last lines in the reason.
type phaseBooting struct {
	until time.Time // StartTimeout
	watch bootWatch
}

func (p *phaseBooting) String() string { return "booting" }
func (p *phaseBooting) due() time.Time {
	if n := p.watch.next(); !n.IsZero() && n.Before(p.until) {
		return n
	}
	return p.until
}
func (p *phaseBooting) line(r *Runner, _ []byte) {
	r.tool.syncTokens = map[string]bool{}
	if ld := r.drv.line(); ld != nil {
		// What the tool printed before the sync line is its prompt: a
		// driver that names none still gets markers found after it, and
		// the prompt left out of output.
		r.learnPrompt(ld, r.fr.takePre())
	}
	r.startInit(0)
}
func (p *phaseBooting) timer(r *Runner, now time.Time) {
	if !now.Before(p.until) {
		r.startFailed("the tool did not answer the start-up sync within " + r.cfg.StartTimeout.String() +
			" (--start-timeout)" + p.watch.quote())
		return
	}
	switch p.watch.verdict(now, r.tool.typist.busy()) {
	case bootRetype:
		p.watch.typed(now)
		if b := r.drv.bootstrap(); b != "" {
			r.typeLine(b)
		}
		r.sendSync()
	case bootRejected:
		r.startRejected(fmt.Sprintf("the tool answered the start-up with an error at its prompt %d times and never ran it (is --kind %s right for it?)",
			p.watch.rounds, r.cfg.Kind) +
			p.watch.answerQuote())
	}
}
func (p *phaseBooting) exited(r *Runner, ex toolExit) {
	r.startFailed("the tool " + describeExit(ex) + " during start-up" + p.watch.quote())
}

// observe is told every byte the tool prints while it boots.
func (p *phaseBooting) observe(b []byte, now time.Time) { p.watch.output(b, now) }

// phaseInit: init script idx runs; no command runs before all succeed.
type phaseInit struct {
	idx        int
	tok        string
	until      time.Time
	spoolStart int64
	out        []byte // the first 4 KiB of its output, for the init_end event
	copy       string // a line driver's copy of the script (tmp/…), removed at its end
	ended      bool   // a line driver's end line was seen: the script ran to its end
}

func (p *phaseInit) String() string { return "init" }
func (p *phaseInit) due() time.Time { return p.until }
func (p *phaseInit) line(r *Runner, l []byte) {
	done := func(l []byte) bool {
		_, ok := matchDone(l, protocol.DefaultMarkerPrefix, p.tok)
		return ok
	}
	keep := func(b []byte) {
		r.tail.write(b)
		if room := 4096 - len(p.out); room > 0 {
			p.out = append(p.out, b[:min(room, len(b))]...)
		}
	}
	switch {
	case isBegin(l, p.tok):
		want := done
		if r.fr.anywhere {
			want = func(l []byte) bool { return isEnd(l, p.tok) || done(l) }
		}
		r.fr.capture(protocol.DefaultMarkerPrefix, want, !r.fr.anywhere, keep)
		return
	case isEnd(l, p.tok):
		p.ended = true
		keep(r.fr.takePre())
		r.fr.discard(done)
		return
	}
	d, _ := matchDone(l, protocol.DefaultMarkerPrefix, p.tok)
	r.typeFence(p.tok)
	end := r.disk.spoolSize
	ok := !d.hasRC || d.rc == 0 || d.rc == 2
	msg := string(d.value)
	if ld := r.drv.line(); ld != nil {
		// A line driver's script failed when it did not run to its end.
		_ = r.root.Remove(p.copy)
		ok, msg = p.ended, "it stopped before its end"
		if e := firstMatch(ld.errRe, p.out); e != "" {
			msg += ": " + e
		}
	}
	r.event(protocol.Event{Event: protocol.EvInitEnd, SpoolStart: &p.spoolStart, SpoolEnd: &end, Detail: map[string]any{
		"file": r.cfg.Init[p.idx], "rc": d.rc, "ok": ok, "output": string(p.out), "value": string(d.value)}})
	if !ok {
		r.startFailed(fmt.Sprintf("init script %s failed: %s", r.cfg.Init[p.idx], msg))
		return
	}
	r.startInit(p.idx + 1)
}
func (p *phaseInit) timer(r *Runner, now time.Time) {
	if !now.Before(p.until) {
		r.startFailed("init script " + r.cfg.Init[p.idx] + " did not finish within " + r.cfg.InitTimeout.String())
	}
}
func (p *phaseInit) exited(r *Runner, ex toolExit) {
	r.startFailed("the tool " + describeExit(ex) + " during init script " + r.cfg.Init[p.idx])
}

// phaseReady: at its prompt, nothing running; nextCommand starts one.
type phaseReady struct{}

func (p *phaseReady) String() string           { return "ready" }
func (p *phaseReady) line(*Runner, []byte)     {}
func (p *phaseReady) due() time.Time           { return time.Time{} }
func (p *phaseReady) timer(*Runner, time.Time) {}
func (p *phaseReady) exited(r *Runner, ex toolExit) {
	r.restartAfterDeath(false)
}

// phaseBusy: r.cur runs. Its begin line switches the framer to capture;
// its done marker ends it; its deadline interrupts it. A line driver's
// command (its lines all typed at once) is also watched for a tool that
// read everything typed for it and went quiet at a prompt (an unfinished
// line) without its done line: the payload's last statement was
// unfinished and took the lines after it (stuck).
type phaseBusy struct {
	check  time.Time   // when to look at the terminal's input queue next (line drivers)
	asleep *fgActivity // the tool at the last look that found it a stuck candidate (judgeBusy's busyStuck, everything read); nil otherwise
}

// stuckQuiet is how long a line driver's tool must have been quiet, with
// everything typed for the command read, before the command counts as
// stuck in an unfinished statement.
const stuckQuiet = time.Second

// promptQuiet is how long a line driver's tool must be quiet at its prompt,
// its file command read, before the done line is typed (lazyDone).
const promptQuiet = 50 * time.Millisecond

func (p *phaseBusy) String() string { return "busy" }
func (p *phaseBusy) line(r *Runner, l []byte) {
	c := r.cur
	ld := r.drv.line()
	switch {
	case !c.begun && isBegin(l, c.cmd.Marker.Token):
		r.onBegin()
		r.pumpInput() // Input held until its output is captured.
		return
	case !c.begun:
		// A line driver's done line before its begin line: the tool's
		// file command did not run the payload file.
		r.finishUnstarted(ld)
		r.becomeReady()
		return
	case ld != nil && isEnd(l, c.cmd.Marker.Token):
		r.onEnd()
		return
	case ld != nil:
		r.onLineTail(ld)
	}
	r.typeFence(c.cmd.Marker.Token)
	r.finishByMarker()
	r.becomeReady()
}
func (p *phaseBusy) due() time.Time { return p.check }
func (p *phaseBusy) timer(r *Runner, now time.Time) {
	p.check = time.Time{}
	ld := r.drv.line()
	c := r.cur
	if ld == nil || c == nil || c.doneSeen || c.endStatus != "" {
		return
	}
	last := r.tool.lastOut
	if c.start.After(last) {
		last = c.start
	}
	v := judgeBusy(busyFacts{quiet: now.Sub(last), lazyDone: c.lazyDone,
		promptKnown: ld.prompt != nil || ld.learned != nil, atPrompt: r.tool.atPrompt,
		promptMatch: ld.atPrompt(r.tool.tail)})
	if v.act != busyWait {
		read, err := r.tool.inputRead()
		if err != nil {
			r.log.Debug("the tool's input queue", "err", err)
		}
		switch {
		case read && v.act == busyStuck:
			// Quiet at an unfinished line with everything read is stuck
			// only if the tool waits: a tool that is slow, or starved on a
			// loaded host, may be quiet for as long.
			a, err := r.tool.activity()
			switch {
			case errors.Is(err, errNoProcess):
				p.asleep = nil // Ended or changed meanwhile: two new looks.
			case err != nil:
				// No /proc to look at: the terminal's evidence alone
				// decides, as before that rule had any.
				if !r.tool.noActivity {
					r.tool.noActivity = true
					r.log.Warn("cannot see what the tool's processes do; a quiet tool at an unfinished line that read everything is taken as stuck without that proof", "err", err)
				}
				r.stuck()
				return
			case provenWaiting(p.asleep, a):
				r.stuck()
				return
			default:
				p.asleep = &a
			}
			p.check = now.Add(stuckRecheck)
			return
		case read:
			r.typeDone()
		}
	}
	p.asleep = nil
	p.check = now.Add(v.wait) // Or sooner: onChunk pulls it in.
}

// stuckRecheck is how long after a look that found a stuck candidate the
// tool is looked at again (provenWaiting).
const stuckRecheck = 250 * time.Millisecond

// fgActivity is what the tool's terminal's foreground process group was
// doing at one look.
type fgActivity struct {
	working bool   // the main thread of one of its processes was running, ready to run, or waiting on the disk (R, D): groupActivity
	cpu     uint64 // the CPU time its processes and their reaped children had used, clock ticks
	procs   int    // how many processes it had
}

// provenWaiting is the evidence that a quiet tool waits (for input it will
// not get: the lines that end the command were read into a statement
// left unfinished) rather than works: at two looks in a row, stuckRecheck
// apart, no main thread of its foreground group ran or was ready to run,
// and those threads used at most idleTicks of CPU time in between. A tool starved
// on a loaded host is ready to run; one that computes uses a CPU for the
// whole interval (25 ticks); a waiting one's timers and heartbeat threads
// (a GUI's event loop, a licence client) use next to nothing.
func provenWaiting(prev *fgActivity, now fgActivity) bool {
	return prev != nil && !prev.working && !now.working && now.cpu >= prev.cpu && now.cpu-prev.cpu <= idleTicks && now.procs == prev.procs
}

// idleTicks is the CPU time (clock ticks of 10 ms) a waiting tool may use
// between two looks: 8 % of stuckRecheck.
const idleTicks = 2

// busyFacts are the plain values a line driver's busy tool is judged on,
// once its done line has not come.
type busyFacts struct {
	quiet       time.Duration // since the tool last printed, or the command started
	lazyDone    bool          // the done line waits to be typed (a file command's payload)
	promptKnown bool          // the driver's prompt is given or learned
	atPrompt    bool          // the tool's last output is an unfinished line
	promptMatch bool          // and it matches the prompt
}

// busyAct is what judgeBusy asks for, if the tool has read everything
// typed for it (its terminal's input queue is empty).
type busyAct int

const (
	busyWait     busyAct = iota // nothing: look again later
	busyTypeDone                // type the done line now
	busyStuck                   // end the command: its last statement took the lines after it
)

// busyVerdict is judgeBusy's answer: what to do, and when to look again.
type busyVerdict struct {
	act  busyAct
	wait time.Duration
}

// judgeBusy is PROTOCOL.md 11.1's rule for a line driver's command whose
// done line has not come.
//
//   - Its done line waits (a payload file still runs, waits for input, or
//     stopped at an error with the tool back at its prompt): it is typed
//     once the tool has been quiet for promptQuiet at a prompt that
//     matches the driver's, or, the prompt unknown, quiet for stuckQuiet.
//   - Its lines were all typed: quiet for stuckQuiet at an unfinished
//     line with everything read, the payload's last statement is
//     unfinished and took the done line (stuck).
func judgeBusy(f busyFacts) busyVerdict {
	if f.lazyDone {
		if f.quiet < promptQuiet {
			return busyVerdict{busyWait, promptQuiet - f.quiet}
		}
		if (f.promptKnown && f.atPrompt && f.promptMatch) || (!f.promptKnown && f.quiet >= stuckQuiet) {
			return busyVerdict{busyTypeDone, stuckQuiet}
		}
		return busyVerdict{busyWait, stuckQuiet}
	}
	if f.quiet >= stuckQuiet && f.atPrompt {
		return busyVerdict{busyStuck, stuckQuiet}
	}
	if f.quiet < stuckQuiet {
		return busyVerdict{busyWait, stuckQuiet - f.quiet}
	}
	// Quiet after a whole line: a long step. Only output changes that
	// (onChunk pulls the look in); until then, a look every stuckQuiet.
	return busyVerdict{busyWait, stuckQuiet}
}

func (p *phaseBusy) exited(r *Runner, ex toolExit) {
	hadCmd := r.cur != nil
	r.finishOnExit(ex)
	r.restartAfterDeath(hadCmd)
}

// phaseResync: the tool was interrupted (Ctrl-C). The runner keeps
// capturing the command's output until its done marker, types sync lines
// with fresh tokens every resyncEvery, and takes the first sync marker as
// proof that the tool is back at its prompt. Without one by until, the
// tool is terminated.
type phaseResync struct {
	until    time.Time
	nextSync time.Time
}

// resyncEvery is how often a sync line is typed again while
// resynchronising; the first is typed resyncFirst after the interrupt.
const (
	resyncEvery = 500 * time.Millisecond
	resyncFirst = 100 * time.Millisecond
)

func (p *phaseResync) String() string { return "resync" }
func (p *phaseResync) due() time.Time {
	if p.nextSync.Before(p.until) {
		return p.nextSync
	}
	return p.until
}
func (p *phaseResync) line(r *Runner, l []byte) {
	if r.cur != nil && !r.cur.begun && !r.isSync(l) {
		r.onBegin()
		return
	}
	if r.isSync(l) {
		r.tool.syncTokens = map[string]bool{}
		if r.cur != nil {
			r.fr.held = r.fr.held[:0]
			r.finishByMarker()
		}
		r.becomeReady()
		return
	}
	// The interrupted command's own marker: its output is complete
	// (a partial line before it was its own); wait for the sync marker
	// that proves the prompt is back. The helper first reads input up to
	// the fence, sync lines typed meanwhile included: type one more.
	if ld := r.drv.line(); ld != nil && r.cur != nil && r.cur.begun {
		if isEnd(l, r.cur.cmd.Marker.Token) {
			r.onEnd()
			return
		}
		r.onLineTail(ld)
	}
	r.fr.releaseHeld()
	r.fr.discard(r.isSync)
	if r.cur != nil {
		r.typeFence(r.cur.cmd.Marker.Token)
		r.sendSync()
	}
}
func (p *phaseResync) timer(r *Runner, now time.Time) {
	switch {
	case !now.Before(p.until):
		r.log.Warn("the tool did not come back after an interrupt; terminating it")
		r.kill(false, "")
	case !now.Before(p.nextSync):
		p.nextSync = now.Add(resyncEvery)
		// A tool that turns the terminal's echo on at its prompt (readline)
		// would echo the sync line into the interrupted command's output.
		if _, err := r.tool.restoreModes(); err != nil {
			r.log.Debug("restore terminal modes", "err", err)
		}
		r.sendSync()
	}
}
func (p *phaseResync) exited(r *Runner, ex toolExit) {
	hadCmd := r.cur != nil
	r.finishOnExit(ex)
	r.restartAfterDeath(hadCmd)
}

// phaseKilling: the tool was sent SIGTERM (hard: SIGKILL) and the runner
// waits for its exit; at until, SIGTERM escalates to SIGKILL. failure, if
// set, is why the start failed: the exit then counts as a failed start.
type phaseKilling struct {
	until   time.Time
	hard    bool
	failure string
}

func (p *phaseKilling) String() string       { return "killing" }
func (p *phaseKilling) line(*Runner, []byte) {}
func (p *phaseKilling) due() time.Time       { return p.until }
func (p *phaseKilling) timer(r *Runner, now time.Time) {
	if now.Before(p.until) {
		return
	}
	if p.hard {
		r.log.Error("the tool is still alive after SIGKILL; waiting for it")
	} else {
		r.log.Warn("the tool ignored SIGTERM; killing its process group")
		p.hard = true
		_ = r.tool.term.Signal(sigKill)
	}
	p.until = now.Add(r.cfg.KillGrace)
}
func (p *phaseKilling) exited(r *Runner, ex toolExit) {
	hadCmd := r.cur != nil
	r.finishOnExit(ex)
	if p.failure != "" {
		r.countFailedStart(p.failure)
		return
	}
	r.restartAfterDeath(hadCmd)
}

// phaseClosing: the runner stops and ends the tool (SIGTERM, then SIGKILL
// after KillGrace). The loop goes on meanwhile, so the heartbeat, ctl/ and
// results are served while a tool takes its time to exit; once the tool
// is gone (its exit handled, or given up 10 s after SIGKILL) the loop ends.
type phaseClosing struct {
	until  time.Time
	killed bool // SIGKILL was sent
}

// closingGiveUp is how long the runner waits for a tool's exit after
// SIGKILL before it clears the tool's process group and ends anyway.
const closingGiveUp = 10 * time.Second

func (p *phaseClosing) String() string           { return "closing" }
func (p *phaseClosing) line(*Runner, []byte)     {}
func (p *phaseClosing) due() time.Time           { return p.until }
func (p *phaseClosing) exited(*Runner, toolExit) {}
func (p *phaseClosing) timer(r *Runner, now time.Time) {
	if !p.killed {
		_ = r.tool.term.Signal(sigKill)
		p.killed, p.until = true, now.Add(closingGiveUp)
		return
	}
	r.log.Warn("the tool did not exit after SIGKILL; its process group is cleared and the runner ends", "waited", closingGiveUp)
	p.until = time.Time{}
	r.tool.reap()
}

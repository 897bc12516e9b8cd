package runner

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
)

const (
	sigTerm = syscall.SIGTERM
	sigKill = syscall.SIGKILL
)

// fastDeath is how long a tool must live, once ready, for its death not to
// delay the next start.
const fastDeath = 5 * time.Second

// ErrGaveUp is returned by Run (wrapped, with the reason) when the tool
// failed to start more often than Config.MaxRestarts allows within
// Config.RestartWindow.
var ErrGaveUp = errors.New("runner: gave up starting the tool")

// gaveUpError is ErrGaveUp with the reason as its whole message.
type gaveUpError string

func (e gaveUpError) Error() string        { return "runner: " + string(e) }
func (e gaveUpError) Is(target error) bool { return target == ErrGaveUp }

// toolEnv is the tool's environment: the runner's, with a predictable
// terminal (TERM=dumb: no bracketed paste, no colour) and UTF-8 if no
// locale is set, plus Config.Env and SP_SESSION_DIR.
func (r *Runner) toolEnv() []string {
	return append(toolEnviron(r.cfg.Env), "SP_SESSION_DIR="+r.dir)
}

// toolEnviron is the tool's environment but SP_SESSION_DIR: the runner's,
// TERM=dumb, LANG=C.UTF-8 when no locale is set, then extra.
func toolEnviron(extra []string) []string {
	env := make([]string, 0, len(os.Environ())+4)
	hasLocale := false
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "TERM=") {
			continue
		}
		if strings.HasPrefix(kv, "LANG=") || strings.HasPrefix(kv, "LC_ALL=") {
			hasLocale = true
		}
		env = append(env, kv)
	}
	env = append(env, "TERM=dumb")
	if !hasLocale {
		env = append(env, "LANG=C.UTF-8")
	}
	return append(env, extra...)
}

// enter switches the tool's phase and returns the one it leaves.
func (r *Runner) enter(p toolPhase) (prev toolPhase) {
	prev = r.tool.enter(p)
	r.status.dirty = true
	return prev
}

// startTool starts a fresh tool and types the bootstrap, then waits (in
// phaseBooting) for the first sync marker.
func (r *Runner) startTool() {
	cols, rows := r.in.winSize()
	pid, starts, err := r.tool.launch(termSpec{Argv: r.cfg.Tool, Env: r.toolEnv(), Cols: cols, Rows: rows}, r.clk)
	if err != nil {
		r.countFailedStart(fmt.Sprintf("cannot start the tool: %v", err))
		return
	}
	if starts > 1 {
		r.event(protocol.Event{Event: protocol.EvSessionReset, Detail: map[string]any{"tool_pid": pid, "tool_starts": starts}})
	}
	r.event(protocol.Event{Event: protocol.EvToolStart, Detail: map[string]any{"tool_pid": pid, "argv": r.cfg.Tool,
		"tool_starts": starts}})
	r.log.Info("tool started", "pid", pid, "argv", r.cfg.Tool)
	now := r.clk.Now()
	r.enter(&phaseBooting{until: now.Add(r.cfg.StartTimeout), watch: newBootWatch(now)})
	r.fr.discard(r.isSync)
	if b := r.drv.bootstrap(); b != "" {
		r.typeLine(b)
	}
	r.sendSync()
	// state.json names the new tool (tool_pgid, tool_start_time) at once,
	// so that a runner killed right now lets the next one find it.
	r.writeState()
}

// typeLine types s and a newline into the tool, after what was typed
// before, without waiting for the tool to read it (typist.go). A failure
// means the tool is dying; its exit is handled where it is reported. A
// send's bytes still being written are cut off first: the runner types
// only when the command ends or is interrupted, and its line must not be
// mixed into them.
func (r *Runner) typeLine(s string) {
	if r.tool.term == nil {
		return
	}
	r.restoreModes()
	r.abortInput()
	if err := r.tool.write([]byte(s + "\n")); err != nil {
		r.log.Warn("type to tool", "err", err)
	}
}

// onTyped takes the end of a typed write the terminal could not take at
// once, and lets a send that waited for it go.
func (r *Runner) onTyped(d inputDone) {
	if err := r.tool.typist.finished(d); err != nil && !errors.Is(err, errTypistCut) {
		r.log.Warn("type to tool", "err", err)
	}
	if !r.tool.typist.busy() && len(r.in.held) > 0 {
		r.pumpInput()
	}
}

// restoreModes puts the terminal's modes back before any line is typed
// (a command, the fence after its done marker, a sync line): a payload's
// `stty sane` would show the typed line in the output, and its `stty kill
// _` would erase the line, so that the helper waiting for the fence
// swallowed the next command. A warning event on the running (or just
// finished) command names what was put back.
func (r *Runner) restoreModes() {
	changed, err := r.tool.restoreModes()
	if err != nil {
		r.log.Warn("restore terminal modes", "err", err)
		return
	}
	if changed != "" {
		ev := protocol.Event{Event: protocol.EvWarning, Detail: map[string]any{
			"terminal_modes_restored": changed,
			"message":                 "the tool's terminal had " + changed + " set; the runner put its own settings back before typing to it again"}}
		if r.cur != nil {
			ev.CmdID, ev.Seq = r.cur.cmd.CmdID, r.cur.cmd.Seq
		}
		r.event(ev)
	}
}

// typeFence types the fence line of token, after its done marker: the
// helper that ran the payload drops input up to it (driver.go, fenceLine).
func (r *Runner) typeFence(token string) {
	if f := r.drv.fence(token); f != "" {
		r.typeLine(f)
	}
}

// sendSync types a sync request with a fresh token. Every token sent since
// the last resynchronisation is accepted.
func (r *Runner) sendSync() {
	tok := r.tool.newSyncToken(r.id.sessionID)
	r.typeLine(r.drv.sync(syncPrefix(r.cur), tok))
}

// syncPrefix is the marker prefix of sync lines: the running command's
// (c), whose output the runner may still be capturing, or the default.
func syncPrefix(c *running) string {
	if c != nil {
		return c.cmd.Marker.Prefix
	}
	return protocol.DefaultMarkerPrefix
}

func (r *Runner) isSync(l []byte) bool { return r.tool.isSync(l, syncPrefix(r.cur)) }

// onChunk spools raw output and runs it through the framer.
func (r *Runner) onChunk(c chunk) {
	defer c.release()
	b := (*c.buf)[:c.n]
	now := r.clk.Now()
	r.tool.lastOut, r.tool.atPrompt = now, b[len(b)-1] != '\n'
	if r.fr.anywhere {
		r.tool.keepTail(b)
		if p, ok := r.tool.phase.(*phaseBusy); ok && r.cur != nil && r.cur.lazyDone {
			p.check = now.Add(promptQuiet) // Is it back at its prompt once this settles?
		}
	}
	r.disk.markBuffered(now)
	r.spoolWrite(b)
	r.tool.observe(b, now)
	b = r.fr.unprompt(b)
	for len(b) > 0 {
		line, n := r.fr.feed(b)
		b = b[n:]
		if line != nil {
			r.tool.phase.line(r, line)
		}
	}
	r.enforceBudget() // budget.go: after the framer, never inside it.
	if len(r.in.held) > 0 {
		r.pumpInput() // New output: an expect may match now.
	}
}

// becomeReady puts the tool at its prompt with nothing running.
func (r *Runner) becomeReady() {
	r.enter(&phaseReady{})
	r.tool.prompted()
	r.fr.discard(nil)
}

// startInit runs init script idx, or makes the tool ready after the last.
// A line driver runs a copy of it that prints the begin and end lines
// (initFile), as a command's payload file does.
func (r *Runner) startInit(idx int) {
	if idx >= len(r.cfg.Init) {
		r.becomeReady()
		return
	}
	file, err := filepath.Abs(r.cfg.Init[idx])
	if err != nil {
		r.startFailed(err.Error())
		return
	}
	p := &phaseInit{idx: idx, tok: fmt.Sprintf("init-%d-%d", r.tool.starts, idx), spoolStart: r.disk.spoolSize,
		until: r.clk.Now().Add(r.cfg.InitTimeout)}
	run := file
	if ld := r.drv.line(); ld != nil {
		if run, err = r.initFile(ld, file, p.tok); err != nil {
			r.startFailed("init script " + r.cfg.Init[idx] + ": " + err.Error())
			return
		}
		p.copy = r.root.RelOf(run)
	}
	r.enter(p)
	r.event(protocol.Event{Event: protocol.EvInitBegin, SpoolStart: &p.spoolStart, Detail: map[string]any{"file": file}})
	r.fr.discard(func(l []byte) bool { return isBegin(l, p.tok) })
	r.typeLine(r.drv.run(run, "", protocol.DefaultMarkerPrefix, p.tok, "", true))
}

// initFile writes tmp/<tok>.payload: init script file as a line driver's
// payload file (its begin line, the script, its end line), and returns its
// path.
func (r *Runner) initFile(ld *lineDriver, file, tok string) (string, error) {
	b, err := readInit(file)
	if err != nil {
		return "", err
	}
	name := rel(protocol.DirTmp, tok+payloadExt)
	_ = r.root.Remove(name) // One left by a tool that died during its init.
	f, err := r.root.CreateNew(name, 0o600)
	if err != nil {
		return "", err
	}
	_, err = f.WriteString(ld.payloadFile(string(b), tok))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return r.root.Abs(name), err
}

// readInit reads an --init script (outside the session: the user's file),
// at most protocol.MaxCommandSize bytes, without blocking on a FIFO.
func readInit(file string) ([]byte, error) {
	f, err := os.OpenFile(file, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", file)
	}
	b, err := io.ReadAll(io.LimitReader(f, protocol.MaxCommandSize+1))
	if err == nil && len(b) > protocol.MaxCommandSize {
		err = fmt.Errorf("%s is larger than %d bytes", file, protocol.MaxCommandSize)
	}
	return b, err
}

// interrupt ends the current command on the runner's initiative, applying
// its cancel policy (or policy, when not empty).
func (r *Runner) interrupt(status protocol.Status, reason protocol.ExitReason, msg string, policy protocol.CancelPolicy) {
	c := r.cur
	if c == nil || r.tool.term == nil {
		return
	}
	if policy == "" {
		policy = c.cmd.CancelPolicy
	}
	first := c.endWith(status, reason, msg, policy)
	r.event(c.about(protocol.Event{Event: protocol.EvInterrupt, Status: status,
		Detail: map[string]any{"policy": string(policy), "reason": msg}}))
	r.endInput() // It is ending: held input is refused, a write cut off.
	switch policy {
	case protocol.PolicyCtrlC:
		if !first {
			return
		}
		// What was typed for the command and the tool has not read yet
		// (the rest of a line-typed payload, its done line) must not run
		// after the interrupt: a cancel ends the whole payload.
		if err := r.tool.flushInput(); err != nil {
			r.log.Warn("drop the tool's unread input", "err", err)
		}
		if err := r.tool.term.Interrupt(); err != nil {
			r.log.Warn("interrupt tool", "err", err)
		}
		now := r.clk.Now()
		// The first sync line waits a moment: typed at once, it reaches a
		// readline-based tool before its SIGINT handler runs, and the
		// tool takes the input and drops the interrupt (Python's REPL in
		// an unfinished statement did, and never came back).
		r.enter(&phaseResync{until: now.Add(r.cfg.ResyncWait), nextSync: now.Add(resyncFirst)})
		if !c.begun {
			tok := c.cmd.Marker.Token
			r.fr.discard(func(l []byte) bool { return isBegin(l, tok) || r.isSync(l) })
		} else if !r.fr.anywhere { // An anywhere framer holds the partial line anyway.
			r.fr.hold = true
		}
	case protocol.PolicyTerminateTool:
		r.kill(false, "")
	default:
		r.kill(true, "")
	}
}

// kill sends SIGTERM (hard: SIGKILL) to the tool's process group and waits
// in phaseKilling, where the deadline escalates to SIGKILL. failure, if
// set, makes the exit count as a failed start.
func (r *Runner) kill(hard bool, failure string) {
	if r.tool.term == nil || r.tool.escalate(hard, failure) {
		return
	}
	sig := sigTerm
	if hard {
		sig = sigKill
	}
	if err := r.tool.term.Signal(sig); err != nil {
		r.log.Warn("signal tool", "err", err)
	}
	r.enter(&phaseKilling{until: r.clk.Now().Add(r.cfg.KillGrace), hard: hard, failure: failure})
}

// onToolExit handles the tool's end: drain its last output, clear its
// process group, then let the phase decide what the exit means.
//
// The last output is read in the loop: the exit waits in r.tool.exiting
// until the terminal's output ends or exitDrain has passed (endExit), and
// the loop serves everything else meanwhile.
func (r *Runner) onToolExit(ex toolExit) {
	r.abortInput()
	r.tool.exiting = &pendingExit{ex: ex, until: r.clk.Now().Add(exitDrain)}
	if r.tool.eof {
		r.endExit()
	}
}

// exitDrain bounds how long the output a tool wrote right before its exit
// is waited for: it must not be lost, and a grandchild holding the
// terminal open must not hold the runner.
const exitDrain = 500 * time.Millisecond

// pendingExit is a tool's exit whose last output is still being read.
type pendingExit struct {
	ex    toolExit
	until time.Time
}

// endExit handles a pending exit once its output is read: clear the
// tool's process group, then let the phase decide what the exit means.
func (r *Runner) endExit() {
	pe := r.tool.exiting
	if pe == nil {
		return
	}
	r.tool.exiting = nil
	ex := pe.ex
	pid := r.tool.reap()
	lived := r.clk.Now().Sub(r.tool.born)
	r.event(protocol.Event{Event: protocol.EvToolExit, Detail: map[string]any{"tool_pid": pid, "exit_code": ex.code,
		"signal": ex.signal, "lived_ms": lived.Milliseconds()}})
	r.log.Info("tool exited", "pid", pid, "how", describeExit(ex))
	phase := r.enter(&phaseDown{})
	phase.exited(r, ex)
	r.fr.discard(nil)
}

// finishOnExit ends the current command, if any, because the tool ended.
func (r *Runner) finishOnExit(ex toolExit) {
	c := r.cur
	if c == nil {
		return
	}
	if h := r.fr.heldPrompt(); len(h) > 0 && c.begun {
		r.fr.feed(h) // What it printed last is its output, if it was no prompt.
	}
	if status, reason, e, ok := c.endError(&ex); ok {
		r.finish(status, reason, e, &ex)
		return
	}
	if !c.begun && r.rerun(c) {
		return
	}
	reason := protocol.ReasonToolExit
	if ex.signal != "" {
		reason = protocol.ReasonToolDied
	}
	msg := "the tool " + describeExit(ex) + " while running this command"
	if ld := r.drv.line(); ld != nil {
		c.checkLastLine(ld)
		if c.errLine != "" {
			// Yosys ends on a fatal ERROR: its line says why.
			msg = c.errLine + " (" + msg + ")"
		}
	}
	if !c.begun {
		msg = "the tool " + describeExit(ex) + " again and again before this command began (" + strconv.Itoa(c.notBegun) + " times); it never ran"
	}
	r.finish(protocol.StatusError, reason, &protocol.Error{Code: string(reason),
		Message: msg, Context: c.endContext(protocol.StatusError, &ex)}, &ex)
}

// restartAfterDeath starts a new tool after one that had been ready died:
// at once, or, when it died by itself while idle within fastDeath of its
// start (again and again), after a backoff. A death during or because of a
// command (exit, crash, cancel) restarts at once. Such deaths do not count
// against MaxRestarts.
func (r *Runner) restartAfterDeath(hadCmd bool) {
	if r.stop.mode != "" {
		return
	}
	now := r.clk.Now()
	r.enter(&phaseDown{at: now.Add(r.tool.restartDelay(hadCmd, now))})
}

// startFailed ends a start that did not reach the prompt: the tool, if
// alive, is killed (its exit then counts the failure); otherwise the
// failure counts at once.
func (r *Runner) startFailed(why string) {
	r.log.Error("the tool failed to start", "reason", r.logReason(why))
	if r.tool.term != nil {
		r.kill(true, why) // phaseKilling's failure: phase error, for why.
		return
	}
	r.countFailedStart(why)
}

// startRejected ends a start the tool answered at its prompt without
// running the start-up: typing it again will not help, so a second start
// rejected in a row gives up at once (exit code 4) instead of retrying
// for --max-restarts starts.
func (r *Runner) startRejected(why string) {
	r.tool.rejecting = true
	r.startFailed(why)
}

// countFailedStart records a failed start and schedules the next attempt
// with a backoff that doubles with each consecutive failure (250 ms up to
// 30 s), or gives up when more than MaxRestarts failed starts fall within
// RestartWindow. Commands stay queued meanwhile.
func (r *Runner) countFailedStart(why string) {
	now := r.clk.Now()
	recent, delay := r.tool.failedStart(now, r.cfg.RestartWindow)
	r.event(protocol.Event{Event: protocol.EvWarning, Detail: map[string]any{"start_failed": why}})
	if r.stop.mode != "" {
		return
	}
	if n := r.tool.countRejection(); n >= 2 {
		r.giveUp(fmt.Sprintf("%s (rejected the same way by %d starts in a row)", why, n))
		return
	}
	if recent > max(r.cfg.MaxRestarts, 0) {
		r.giveUp(why)
		return
	}
	r.tool.failure = fmt.Sprintf("%s; restart %d of %d in %v", why, recent, max(r.cfg.MaxRestarts, 0), delay)
	r.enter(&phaseDown{at: now.Add(delay)})
}

// backoff is the delay before start n of a run of failures: 250 ms, 500 ms,
// 1 s, … up to 30 s.
func backoff(n int) time.Duration {
	return min(250*time.Millisecond<<min(n-1, 7), 30*time.Second)
}

// giveUp stops the runner after too many failed starts (exit code 4).
func (r *Runner) giveUp(last string) {
	why := r.tool.giveUp(r.cfg.RestartWindow, max(r.cfg.MaxRestarts, 0), last)
	r.stop.err = &protocol.Error{Code: protocol.CodeToolStartFailed, Message: why}
	r.log.Error("giving up", "reason", r.logReason(why))
	r.requestStop(protocol.StopGraceful, why)
}

// describeExit says how a tool ended, for messages.
func describeExit(ex toolExit) string {
	switch {
	case ex.signal != "":
		return "was killed by " + ex.signal
	case ex.code != nil:
		return fmt.Sprintf("exited with code %d", *ex.code)
	case ex.err != nil:
		return "ended (" + ex.err.Error() + ")"
	}
	return "exited"
}

package runner

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
	"golang.org/x/sys/unix"
)

// fastDeath is how long a tool must live to count as having started well.
const fastDeath = 5 * time.Second

// toolEnv is the tool's environment: the runner's, with a predictable
// terminal (TERM=dumb: no bracketed paste, no colour) and UTF-8 if no
// locale is set, plus Config.Env and SP_SESSION_DIR.
func (r *Runner) toolEnv() []string {
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
	env = append(env, "TERM=dumb", "SP_SESSION_DIR="+r.dir)
	if !hasLocale {
		env = append(env, "LANG=C.UTF-8")
	}
	return append(env, r.cfg.Env...)
}

// startTool starts a fresh tool and types the bootstrap, then waits (in
// toolBooting) for the first sync marker.
func (r *Runner) startTool() {
	t, err := startTool(r.cfg.Tool, r.toolEnv(), "", r.chunks, r.exited)
	if err != nil {
		r.fastDeaths++
		r.scheduleRestart(fmt.Sprintf("cannot start the tool: %v", err))
		return
	}
	r.tool = t
	r.toolStarts++
	if r.toolStarts > 1 {
		r.event(protocol.Event{Event: protocol.EvSessionReset, Detail: map[string]any{"tool_pid": t.pid, "tool_starts": r.toolStarts}})
	}
	r.event(protocol.Event{Event: protocol.EvToolStart, Detail: map[string]any{"tool_pid": t.pid, "argv": r.cfg.Tool}})
	r.log.Info("tool started", "pid", t.pid, "argv", r.cfg.Tool)
	r.tphase = toolBooting
	r.deadline = time.Now().Add(r.cfg.StartTimeout)
	r.syncTokens = map[string]bool{}
	r.fr.discard(r.isSync)
	if err := t.writeLine(r.drv.bootstrap()); err != nil {
		r.log.Warn("type bootstrap", "err", err)
	}
	r.sendSync()
	r.stateDirty = true
}

// sendSync types a sync request with a fresh token. Every token sent since
// the last resynchronisation is accepted.
func (r *Runner) sendSync() {
	r.syncSeq++
	tok := fmt.Sprintf("sync-%s-%d", r.sessionID[len(r.sessionID)-8:], r.syncSeq)
	r.syncTokens[tok] = true
	r.nextSyncAt = time.Now().Add(500 * time.Millisecond)
	if r.tool != nil {
		_ = r.tool.writeLine(r.drv.sync(r.syncPrefix(), tok)) // A dying tool's exit is handled elsewhere.
	}
}

func (r *Runner) syncPrefix() string {
	if r.cur != nil {
		return r.cur.cmd.Marker.Prefix
	}
	return protocol.DefaultMarkerPrefix
}

func (r *Runner) isSync(l []byte) bool {
	for tok := range r.syncTokens {
		if _, ok := matchDone(l, r.syncPrefix(), tok); ok {
			return true
		}
	}
	return false
}

// onChunk spools raw output and runs it through the framer.
func (r *Runner) onChunk(c chunk) {
	defer chunkPool.Put(c.buf)
	b := c.bytes()
	if r.bufferedAt.IsZero() {
		r.bufferedAt = time.Now()
	}
	if _, err := r.spoolW.Write(b); err != nil {
		r.log.Error("write spool", "err", err)
	}
	r.spoolSize += int64(len(b))
	if c.tool != r.tool {
		return // Late output of a tool already replaced.
	}
	for len(b) > 0 {
		line, n := r.fr.feed(b)
		b = b[n:]
		if line != nil {
			r.onLine(line)
		}
	}
}

// onLine handles a wanted line the framer found.
func (r *Runner) onLine(line []byte) {
	switch r.tphase {
	case toolBooting:
		r.syncTokens = map[string]bool{}
		r.initIdx = 0
		r.startInit()
	case toolInit:
		r.onInitLine(line)
	case toolBusy:
		if !r.cur.begun {
			r.onBegin()
			return
		}
		r.finishByMarker()
		r.becomeReady()
	case toolResync:
		if r.cur != nil && !r.cur.begun && !r.isSync(line) {
			r.onBegin()
			return
		}
		if r.isSync(line) {
			r.syncTokens = map[string]bool{}
			if r.cur != nil {
				r.finishByMarker()
			}
			r.becomeReady()
			return
		}
		// The interrupted command's own marker: its output is complete;
		// wait for the sync marker that proves the prompt is back.
		r.fr.discard(r.isSync)
	}
}

func (r *Runner) becomeReady() {
	r.tphase = toolReady
	r.deadline = time.Time{}
	r.fastDeaths = 0
	if r.stopMode == "" {
		r.setPhase(protocol.PhaseIdle, "")
	}
	r.fr.discard(nil)
	r.stateDirty = true
}

// startInit runs the next --init script, or makes the tool ready.
func (r *Runner) startInit() {
	if r.initIdx >= len(r.cfg.Init) {
		r.becomeReady()
		return
	}
	r.tphase = toolInit
	file, err := absPath(r.cfg.Init[r.initIdx])
	if err != nil {
		r.initFailed(err.Error())
		return
	}
	tok := fmt.Sprintf("init-%d-%d", r.toolStarts, r.initIdx)
	r.initStart, r.initOut = r.spoolSize, r.initOut[:0]
	r.deadline = time.Now().Add(r.cfg.InitTimeout)
	r.event(protocol.Event{Event: protocol.EvInitBegin, SpoolStart: &r.initStart, Detail: map[string]any{"file": file}})
	r.fr.discard(func(l []byte) bool { return isBegin(l, tok) })
	_ = r.tool.writeLine(r.drv.run(file, "", protocol.DefaultMarkerPrefix, tok, true))
}

func absPath(p string) (string, error) {
	if strings.HasPrefix(p, "/") {
		return p, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	return wd + "/" + p, nil
}

func (r *Runner) onInitLine(line []byte) {
	tok := fmt.Sprintf("init-%d-%d", r.toolStarts, r.initIdx)
	if isBegin(line, tok) {
		r.fr.capture(protocol.DefaultMarkerPrefix, func(l []byte) bool {
			_, ok := matchDone(l, protocol.DefaultMarkerPrefix, tok)
			return ok
		}, true, func(b []byte) {
			r.tail.write(b)
			if room := 4096 - len(r.initOut); room > 0 {
				r.initOut = append(r.initOut, b[:min(room, len(b))]...)
			}
		})
		return
	}
	d, _ := matchDone(line, protocol.DefaultMarkerPrefix, tok)
	end := r.spoolSize
	ok := !d.hasRC || d.rc == 0 || d.rc == 2
	r.event(protocol.Event{Event: protocol.EvInitEnd, SpoolStart: &r.initStart, SpoolEnd: &end, Detail: map[string]any{
		"file": r.cfg.Init[r.initIdx], "rc": d.rc, "ok": ok, "output": string(r.initOut), "value": string(d.value)}})
	if !ok {
		r.initFailed(fmt.Sprintf("init script %s failed: %s", r.cfg.Init[r.initIdx], string(d.value)))
		return
	}
	r.initIdx++
	r.startInit()
}

// initFailed leaves no command running against a half-initialised tool:
// the tool is ended and restarted with backoff; commands stay queued.
func (r *Runner) initFailed(msg string) {
	r.startFailed = true
	r.setPhase(protocol.PhaseError, msg)
	r.log.Error("init failed", "reason", msg)
	r.killTool(true)
}

// interrupt ends the current command on the runner's initiative, applying
// its cancel policy (or policy, when not empty).
func (r *Runner) interrupt(status protocol.Status, reason protocol.ExitReason, msg string, policy protocol.CancelPolicy) {
	c := r.cur
	if c == nil || r.tool == nil {
		return
	}
	if policy == "" {
		policy = c.cmd.CancelPolicy
	}
	first := c.endStatus == ""
	if first {
		c.endStatus, c.endMsg = status, msg
		c.endReason = reason
		if reason == "" {
			c.endReason = protocol.ExitReason(policy)
		}
	}
	r.event(protocol.Event{Event: "interrupt", CmdID: c.cmd.CmdID, Seq: c.cmd.Seq, Status: status,
		Detail: map[string]any{"policy": string(policy), "reason": msg}})
	switch policy {
	case protocol.PolicyCtrlC:
		if !first {
			return
		}
		if err := r.tool.interrupt(); err != nil {
			r.log.Warn("interrupt tool", "err", err)
		}
		r.tphase = toolResync
		r.deadline = time.Now().Add(r.cfg.ResyncWait)
		if !c.begun {
			tok := c.cmd.Marker.Token
			r.fr.discard(func(l []byte) bool { return isBegin(l, tok) || r.isSync(l) })
		}
		r.sendSync()
	case protocol.PolicyTerminateTool:
		r.killTool(false)
	default:
		r.killTool(true)
	}
}

// killTool sends SIGTERM (or SIGKILL when hard) to the tool's process group
// and waits in toolKilling; the deadline escalates to SIGKILL.
func (r *Runner) killTool(hard bool) {
	if r.tool == nil {
		return
	}
	sig := unix.SIGTERM
	if hard {
		sig = unix.SIGKILL
	}
	r.tool.signalGroup(sig)
	r.tphase = toolKilling
	r.killHard = hard
	r.deadline = time.Now().Add(r.cfg.KillGrace)
}

// onToolExit handles the tool's end: drain its last output, clear its
// process group, settle the current command, and restart.
func (r *Runner) onToolExit(ex toolExit) {
	t := ex.tool
	if t != r.tool {
		return
	}
	r.drain(t, 500*time.Millisecond)
	t.signalGroup(unix.SIGKILL) // Orphans the tool left in its group.
	t.close()
	code, sig := describeExit(ex.state)
	lived := time.Since(t.started)
	r.event(protocol.Event{Event: protocol.EvToolExit, Detail: map[string]any{"tool_pid": t.pid, "exit_code": code, "signal": sig, "lived_ms": lived.Milliseconds()}})
	r.log.Info("tool exited", "pid", t.pid, "exit_code", code, "signal", sig)
	r.tool = nil
	wasStarting := r.tphase == toolBooting || r.tphase == toolInit
	hadCmd := r.cur != nil
	if c := r.cur; c != nil {
		if c.endStatus != "" {
			r.finish(c.endStatus, c.endReason, &protocol.Error{Code: codeFor(c.endStatus, c.endReason), Message: c.endMsg}, &ex)
		} else {
			reason, what := protocol.ReasonToolExit, "exited"
			if sig != "" {
				reason, what = protocol.ReasonToolDied, "was killed by "+sig
			} else if code != nil {
				what = fmt.Sprintf("exited with code %d", *code)
			}
			r.finish(protocol.StatusError, reason, &protocol.Error{Code: string(reason), Message: "the tool " + what + " while running this command"}, &ex)
		}
	}
	r.fr.discard(nil)
	if r.stopMode != "" {
		r.tphase = toolNone
		return
	}
	if wasStarting || r.startFailed || lived < fastDeath && !hadCmd && r.tphase != toolKilling {
		r.fastDeaths++
		r.startFailed = false
		if r.phase != protocol.PhaseError {
			r.setPhase(protocol.PhaseError, "the tool exited during start-up")
		}
	}
	r.scheduleRestart(r.reason)
}

// drain reads what the dead tool still had in its PTY, bounded by wait,
// because output written right before exit must not be lost.
func (r *Runner) drain(t *tool, wait time.Duration) {
	timeout := time.After(wait)
	for {
		select {
		case c := <-r.chunks:
			r.onChunk(c)
		case <-t.readEOF:
			for {
				select {
				case c := <-r.chunks:
					r.onChunk(c)
				default:
					return
				}
			}
		case <-timeout:
			return
		}
	}
}

// scheduleRestart starts a new tool now, or after a backoff that doubles
// with every consecutive failed start (250ms up to 30s).
func (r *Runner) scheduleRestart(reason string) {
	r.tphase = toolNone
	delay := time.Duration(0)
	if r.fastDeaths > 0 {
		delay = min(250*time.Millisecond<<min(r.fastDeaths-1, 7), 30*time.Second)
		r.setPhase(protocol.PhaseError, fmt.Sprintf("%s; restart %d in %v", reason, r.fastDeaths, delay))
	}
	r.restartAt = time.Now().Add(delay)
	r.stateDirty = true
}

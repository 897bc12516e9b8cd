package runner

// Starting a command (the payload typed into the tool, its output file
// created) and routing its output while it runs.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/protocol"
)

// start claims a parsed command and hands it to the tool.
func (r *Runner) start(name, qpath string, cmd *protocol.Command, raw []byte) {
	if !r.claim(name, rel(protocol.DirInflight, name)) {
		return
	}
	// The claim becomes durable off the critical path, while the command
	// runs (PROTOCOL.md, "Durability and crash consistency").
	r.ringSync()
	r.checkDiskRoom() // A command started after space returned is written whole.
	spoolStart := r.disk.spoolSize
	outName := protocol.OutputName(name)
	out, err := r.createOutput(rel(protocol.DirOutput, outName))
	if errors.Is(err, os.ErrNotExist) {
		r.checkLayout() // Someone deleted output/.
		out, err = r.createOutput(rel(protocol.DirOutput, outName))
	}
	if errors.Is(err, fsq.ErrLayout) && r.unclaim(name, cmd.Seq, err) {
		return
	}
	timeout, clamped := cmd.Timeout(r.cfg.DefaultTimeout)
	budget := cmd.OutputBudget(r.cfg.MaxOutputBytes)
	payloadSHA, begin := beginDetail(cmd, timeout, budget)
	r.event(protocol.Event{Event: protocol.EvCmdBegin, CmdID: cmd.CmdID, Seq: cmd.Seq, SpoolStart: &spoolStart,
		TraceID: cmd.TraceID, Labels: cmd.Labels, Detail: begin})
	if err != nil {
		r.log.Error("create output", "err", err)
		r.finishEarly(name, cmd, protocol.CodeIO, "cannot create the output file: "+err.Error(), rel(protocol.DirOutput, outName))
		return
	}
	c := newRunning(cmd, name, r.clk.Now(), r.tool.starts, r.disk.spoolSize, out)
	c.raw = raw
	if cmd.Marker.Mode == protocol.MarkerRunnerInject && r.drv.line() == nil {
		c.nonce = newNonce()
	}
	c.payloadSHA = payloadSHA
	if clamped {
		r.event(protocol.Event{Event: protocol.EvWarning, CmdID: cmd.CmdID, Seq: cmd.Seq, Detail: map[string]any{
			"timeout_s": cmd.TimeoutS, "clamped_to_ms": timeout.Milliseconds()}})
	}
	c.limit(timeout, budget)
	if err := r.drv.check(cmd.Payload); err != nil {
		out.Close()
		_ = r.root.Remove(rel(protocol.DirOutput, outName))
		r.finishEarly(name, cmd, protocol.CodeInvalidRequest, err.Error(), rel(protocol.DirInflight, name))
		return
	}
	line, err := c.runLine(r.root, r.drv)
	if err != nil {
		out.Close()
		_ = r.root.Remove(rel(protocol.DirOutput, outName)) // Empty; the result names no output.
		r.finishEarly(name, cmd, protocol.CodeIO, "cannot write the payload file: "+err.Error(), rel(protocol.DirInflight, name+payloadExt))
		return
	}
	r.cur = c
	r.in.started(cmd.CmdID)
	busy := &phaseBusy{}
	if r.fr.anywhere {
		busy.check = r.clk.Now().Add(stuckQuiet)
	}
	r.enter(busy)
	tok := cmd.Marker.Token
	r.fr.markerStarts(cmd.Marker.Prefix)
	if r.fr.anywhere {
		// A line driver's done line may come without its begin line: the
		// tool's file command failed (finishUnstarted).
		r.fr.discard(func(l []byte) bool { return isBegin(l, tok) || c.doneLine(l) })
	} else {
		r.fr.discard(func(l []byte) bool { return isBegin(l, tok) })
	}
	r.typeLine(line) // The terminal modes are put back first (restoreModes).
}

// beginDetail is cmd_begin's detail (PROTOCOL.md section 22): how the
// command will run — kind, cancel_policy, the effective timeout_s and
// max_output_bytes (left out when there is none) — and payload_sha256
// (left out for an empty payload, as in the result), which it returns too.
func beginDetail(cmd *protocol.Command, timeout time.Duration, budget int64) (string, map[string]any) {
	policy := cmd.CancelPolicy
	if policy == "" {
		policy = protocol.PolicyCtrlC
	}
	d := map[string]any{"kind": cmd.Kind, "cancel_policy": policy}
	if timeout > 0 {
		d["timeout_s"] = timeout.Seconds()
	}
	if budget > 0 {
		d["max_output_bytes"] = budget
	}
	var sum string
	if cmd.Payload != "" {
		sum = sha256Hex(cmd.Payload)
		d["payload_sha256"] = sum
	}
	return sum, d
}

// onBegin switches from discarding to capturing the command's output. A
// line driver's command ends with its end line (the payload ran to its
// end) and then its done line, or with its done line alone (it did not).
func (r *Runner) onBegin() {
	c := r.cur
	c.begun = true
	if r.fr.anywhere {
		tok, done := c.cmd.Marker.Token, r.doneMatcher(c)
		r.fr.capture(c.cmd.Marker.Prefix, func(l []byte) bool { return isEnd(l, tok) || done(l) }, false, r.sink)
		return
	}
	r.fr.capture(c.cmd.Marker.Prefix, r.doneMatcher(c), c.cmd.Marker.Mode == protocol.MarkerRunnerInject, r.sink)
}

// onEnd takes a line driver's end line: the payload ran to its end. What
// came before it on its line is the output's last line, and perhaps the
// prompt the tool printed before the line typed after the payload; which
// part is the prompt is known at the done line (onLineTail). Until then
// the tool prints nothing of the command's.
func (r *Runner) onEnd() {
	c := r.cur
	c.ended, c.endPre = true, r.fr.takePre()
	r.fr.discard(r.doneMatcher(c))
	r.typeDone()
}

// typeDone types a line driver's done line, if it waited (lazyDone).
func (r *Runner) typeDone() {
	if c := r.cur; c != nil && c.lazyDone {
		c.lazyDone = false
		r.typeLine(r.drv.sync(c.cmd.Marker.Prefix, c.cmd.Marker.Token))
	}
}

// onLineTail emits what a line driver's command printed last, on the line
// of its end line (or, when there was none, of its done line), less the
// prompt: the text before the done line is the tool's prompt as it is now
// (a payload may have changed it), which is learned.
func (r *Runner) onLineTail(ld *lineDriver) {
	c := r.cur
	pre := r.fr.takePre()
	tail := pre
	if c.ended {
		tail = c.endPre
		r.learnPrompt(ld, pre)
	}
	if out := ld.stripPrompt(tail, ld.learned); len(out) > 0 {
		r.sink(out)
	}
}

// learnPrompt records p, what the tool printed before a done or sync line
// at a line start, as its prompt (lineDriver.learn): it is then also left
// out where it begins a line of output.
func (r *Runner) learnPrompt(ld *lineDriver, p []byte) {
	if ld.learn(p) {
		if expr := promptExpr(p); expr != "" {
			r.fr.prompts.learn(expr, ld.spec.Prompt != "")
		}
	}
}

// sink receives captured output of the current command. The terminal's
// echo of delivered input is left out (echo.go).
func (r *Runner) sink(b []byte) {
	r.cur.printed(b, r.clk.Now(), r.emit)
}

// emit appends to the current command's output.
func (r *Runner) emit(b []byte) {
	c := r.cur
	b = c.clip(b) // budget.go
	if ld := r.drv.line(); ld != nil {
		c.scanError(b, ld)
	}
	if r.disk.outputSuspended(len(b)) {
		c.skip(b)
	} else {
		if err := c.write(b); err != nil && isNoSpace(err) {
			r.noSpace(c.name, err)
		}
	}
	r.tail.write(b)
}

// doneMatcher matches the command's own done marker, and while the runner
// resynchronises after an interrupt also its sync markers.
func (r *Runner) doneMatcher(c *running) func([]byte) bool {
	return func(l []byte) bool {
		return c.doneLine(l) || r.isSync(l)
	}
}

// createOutput makes the output file from a spare (a rename) rather than
// creating it on the critical path.
func (r *Runner) createOutput(name string) (*os.File, error) {
	// output/ swapped for another user's directory since the last
	// heartbeat: the command waits in queue/ (unclaim) instead of writing
	// its output there.
	if err := ownDir(r.root, protocol.DirOutput); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %w", fsq.ErrLayout, err)
	}
	f, err := r.disk.takeSpare()
	if err == nil {
		spare := r.root.RelOf(f.Name())
		if err = r.root.Rename(spare, name); err == nil {
			return f, nil
		}
		f.Close()
		r.root.RemoveOrLater(spare)
	}
	f, err = r.root.CreateNew(name, r.layout.perms.file)
	if err == nil {
		_ = f.Chmod(r.layout.perms.file) // Independent of the umask.
	}
	return f, err
}

func sha256Hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// correlation reads the trace_id and labels of a command file the runner
// holds but did not parse (one cancelled before it started, one recovered
// after a crash), so its result carries them too. A file that cannot be
// read, or whose fields break the rules, gives none: the result matters
// more than its labels.
func (r *Runner) correlation(name string) (string, map[string]string) {
	data, _, err := r.root.ReadFile(name, protocol.MaxCommandSize)
	if err != nil {
		return "", nil
	}
	var c struct {
		TraceID string            `json:"trace_id"`
		Labels  map[string]string `json:"labels"`
	}
	if json.Unmarshal(data, &c) != nil || protocol.ValidateCorrelation(c.TraceID, c.Labels) != nil {
		return "", nil
	}
	return c.TraceID, c.Labels
}

// aliasPath turns path, a session file's absolute path, into one through
// the root's descriptor that holds only plain characters (quote "none" of
// a driver: fsq.Root.ProcAbs).
func (r *Runner) aliasPath(path string) string { return r.root.ProcAbs(r.root.RelOf(path)) }

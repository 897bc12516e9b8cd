package runner

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
)

// Input to the running command (PROTOCOL.md section 9.8): send and signal
// requests name a command and act only while it is the running command
// and its output is being captured (its begin line was seen, its done
// marker not yet). Those for the running command are applied one at a
// time in seq order: r.inq holds them, and its head may wait — for the
// begin line, for its expect to match, or for the terminal to take its
// bytes — holding back the ones behind it. Cancel, stop and resize never
// wait behind them.
//
// Input never reaches a later command or the tool's prompt: it is written
// only before the runner has seen the command's done marker, and the
// helper that ran the payload reads and drops everything up to the fence
// line the runner types after that marker (driver.go, fenceLine).

// heldReq is a send or signal request for the running command that has
// inputQueue is the input part of the runner: the send and signal
// requests held for the running command, the send being written, sends
// waiting for a queued command to start, and the last window size. It is
// owned by the Run goroutine.
type inputQueue struct {
	held    []*heldReq            // send and signal requests for the running command, in seq order
	write   *inputWrite           // a send's bytes being written
	waiting map[string][]*heldReq // sends with an expect waiting for a queued command to start, by cmd_id
	cols    int                   // the last resize (0: none)
	rows    int
}

// been taken but not yet answered.
type heldReq struct {
	name     string // ctl/<name>
	req      *protocol.ControlRequest
	re       *regexp.Regexp // the expect of a send, compiled
	from     int64          // where the expect starts in the command's output
	deadline time.Time      // when the expect gives up (r.clk); zero: no expect
	matched  bool
	match    [2]int64 // the expect's match in the command's output
	spoolOff int64    // spool size when it took effect
	outOff   int64    // the command's output size when it took effect
}

// inputWrite is a send's bytes on their way into the terminal: the
// terminal takes input only as fast as the tool reads it (about 20 KiB
// ahead), so the bytes are written by a goroutine of their own and the
// owner goroutine never blocks on them.
type inputWrite struct {
	h     *heldReq
	abort chan struct{}
	done  chan inputDone
}

type inputDone struct {
	n   int
	err error
}

// maxHeld bounds the send and signal requests taken and not yet answered.
const maxHeld = 256

// expectWindow bounds what an expect searches: the last expectWindow bytes
// of the command's output. A match that starts earlier is not found.
const expectWindow = 64 << 10

// signals maps a signal request's name to the signal.
var signals = map[string]syscall.Signal{
	"INT": syscall.SIGINT, "QUIT": syscall.SIGQUIT, "TSTP": syscall.SIGTSTP, "CONT": syscall.SIGCONT,
	"HUP": syscall.SIGHUP, "USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2,
	"TERM": syscall.SIGTERM, "KILL": syscall.SIGKILL,
}

// takeInput takes a valid send or signal request. One for the running
// command is queued (held: answered later by completeHeld, possibly at
// once). A send with an expect for a queued command waits (in r.waitq)
// for it to start, within its expect timeout: the output it expects does
// not exist yet. Any other is refused here with not_running and the named
// command's state.
func (r *Runner) takeInput(req *protocol.ControlRequest, name string, a answer) answer {
	if len(r.mbox.held) >= maxHeld {
		// Bounded memory: each may hold 1 MiB of data.
		a.outcome = protocol.OutcomeRejected
		a.message = fmt.Sprintf("rejected, nothing done: %d send and signal requests already wait; answer or cancel them first", maxHeld)
		return a
	}
	c := r.cur
	if !c.is(req.CmdID) && r.mayWait(req) {
		r.in.wait(req.CmdID, r.newHeld(req, name))
		r.mbox.held[name] = true
		a.held = true
		return a
	}
	if !c.is(req.CmdID) || c.doneSeen {
		a.outcome, a.cmdState = protocol.OutcomeNotRunning, r.queue.cmdState(req.CmdID)
		if c.is(req.CmdID) {
			a.cmdState = "finished"
		}
		a.message = notRunning(req, a.cmdState)
		return a
	}
	if c.endStatus != "" {
		return ending(r.cur, req, a)
	}
	r.in.hold(r.newHeld(req, name))
	r.mbox.held[name] = true
	a.held = true
	return a
}

func (r *Runner) newHeld(req *protocol.ControlRequest, name string) *heldReq {
	h := &heldReq{name: name, req: req, from: -1}
	if req.Op == protocol.OpSend && req.Expect != "" {
		h.re = regexp.MustCompile(req.Expect) // Validated by protocol.ParseControlRequest.
		h.deadline = r.clk.Now().Add(time.Duration(expectMS(req)) * time.Millisecond)
		if req.ExpectFrom != nil {
			h.from = *req.ExpectFrom
		}
	}
	return h
}

// mayWait tells whether a request for a command that is not running waits
// for it: a send with an expect for a queued command, and anything behind
// one (seq order).
func (r *Runner) mayWait(req *protocol.ControlRequest) bool {
	if len(r.in.waiting[req.CmdID]) > 0 {
		return true
	}
	return req.Op == protocol.OpSend && req.Expect != "" && r.queue.done[req.CmdID] == "" && r.queue.cmdState(req.CmdID) == "queued"
}

// wait queues h until command id starts.
func (in *inputQueue) wait(id string, h *heldReq) { in.waiting[id] = append(in.waiting[id], h) }

// hold queues h for the running command.
func (in *inputQueue) hold(h *heldReq) { in.held = append(in.held, h) }

// settleWaiting offers the head of each queue of requests waiting for a
// queued command (id) to settle, again and again while it returns true:
// settle has answered h, which then leaves its queue. An emptied queue is
// forgotten.
func (in *inputQueue) settleWaiting(settle func(id string, h *heldReq) bool) {
	for id, q := range in.waiting {
		for len(q) > 0 && settle(id, q[0]) {
			q = q[1:]
		}
		if len(q) == 0 {
			delete(in.waiting, id)
		} else {
			in.waiting[id] = q
		}
	}
}

// next is the held request to decide now: the head, unless none is held
// or a write is under way (nil).
func (in *inputQueue) next() *heldReq {
	if len(in.held) == 0 || in.write != nil {
		return nil
	}
	return in.held[0]
}

// beginWrite records that the head h's bytes are being written and returns
// the write, whose abort and done the writer goroutine uses.
func (in *inputQueue) beginWrite(h *heldReq) *inputWrite {
	in.write = &inputWrite{h: h, abort: make(chan struct{}), done: make(chan inputDone, 1)}
	return in.write
}

// endWrite ends the write under way and takes its request, the head, off
// the held requests. It returns that request.
func (in *inputQueue) endWrite() *heldReq {
	w := in.write
	in.write = nil
	in.held = in.held[1:]
	return w.h
}

// writeDone is where the write under way reports its end; nil when none is.
func (in *inputQueue) writeDone() <-chan inputDone {
	if in.write == nil {
		return nil
	}
	return in.write.done
}

// abortWrite cuts off the write under way, if any, and returns how it
// ended (ok false: there was none). endWrite must follow.
func (in *inputQueue) abortWrite() (d inputDone, ok bool) {
	w := in.write
	if w == nil {
		return inputDone{}, false
	}
	close(w.abort)
	return <-w.done, true
}

// started moves the requests waiting for a command that has just
// started to the running command's queue.
func (in *inputQueue) started(id string) {
	if w, ok := in.waiting[id]; ok {
		in.held = append(in.held, w...)
		delete(in.waiting, id)
	}
}

// pumpWaiting answers the requests waiting for queued commands whose
// expect timed out (each queue's head first, in order), and, with gone
// set, all those for command id (it has a result without having run, or
// the runner stops: cmdState says which).
func (r *Runner) pumpWaiting(gone string) {
	now := r.clk.Now()
	r.in.settleWaiting(func(id string, h *heldReq) bool {
		a := &answer{cmdID: id}
		switch {
		case id == gone || gone == "*":
			r.stamp(a)
			a.outcome, a.cmdState = protocol.OutcomeNotRunning, r.queue.cmdState(id)
			a.message = notRunning(h.req, a.cmdState)
			if a.cmdState == "queued" {
				a.message = fmt.Sprintf("%s did not start before the runner stopped; nothing sent", id)
			}
		case !h.deadline.IsZero() && !now.Before(h.deadline):
			a = r.expectTimeout(h, a)
			a.message += " (it had not started)"
		default:
			a = nil
		}
		if a == nil {
			return false
		}
		r.completeHeld(h, *a)
		return true
	})
}

// waitDue is when the earliest request waiting for a queued command gives
// up on its expect.
func (in *inputQueue) waitDue() time.Time {
	var due time.Time
	for _, q := range in.waiting {
		if d := q[0].deadline; !d.IsZero() && (due.IsZero() || d.Before(due)) {
			due = d
		}
	}
	return due
}

// notRunning says why input for a command that is not running is refused.
func notRunning(req *protocol.ControlRequest, state string) string {
	what := "input"
	if req.Op == protocol.OpSignal {
		what = "signal " + req.Signal
	}
	switch state {
	case "queued":
		return fmt.Sprintf("%s is queued, not running; %s refused, nothing sent", req.CmdID, what)
	case "finished":
		return fmt.Sprintf("%s has finished; %s refused, nothing sent", req.CmdID, what)
	}
	return fmt.Sprintf("no command %s is queued, running or finished in this session; %s refused, nothing sent", req.CmdID, what)
}

// ending refuses input for the running command once the runner is ending
// it (a timeout, a cancel, a force stop).
func ending(c *running, req *protocol.ControlRequest, a answer) answer {
	a.outcome, a.cmdState = protocol.OutcomeNotRunning, "finished"
	a.message = fmt.Sprintf("%s is ending (%s); refused, nothing sent", req.CmdID, c.endStatus)
	return a
}

// cmdState says where a command that is not running is: finished (it has
// a result), queued (its file is in queue/) or unknown.
func (q *cmdQueue) cmdState(id string) string {
	if q.done[id] != "" || q.isPruned(id) {
		return "finished"
	}
	q.root.Revalidate(protocol.DirQueue) // A command written on another NFS client just before the request.
	names, err := q.root.ReadNames(protocol.DirQueue)
	if err == nil {
		for _, n := range names {
			if _, nid, err := protocol.ParseCommandName(n); err == nil && nid == id {
				return "queued"
			}
		}
	}
	return "unknown"
}

// pumpInput answers or starts the held requests in order, until one has
// to wait (or a write is under way).
func (r *Runner) pumpInput() {
	for h := r.in.next(); h != nil; h = r.in.next() {
		a := r.step(h)
		if a == nil {
			return // Waits, or its bytes are being written.
		}
		r.in.held = r.in.held[1:]
		r.completeHeld(h, *a)
	}
}

// step decides the head of the queue: its answer, or nil while it waits
// (then h is either still waiting or being written).
func (r *Runner) step(h *heldReq) *answer {
	req, c := h.req, r.cur
	a := &answer{cmdID: req.CmdID}
	if !c.is(req.CmdID) || c.doneSeen {
		a.outcome, a.cmdState = protocol.OutcomeNotRunning, "finished"
		a.message = notRunning(req, "finished")
		r.stamp(a)
		return a
	}
	if c.endStatus != "" {
		*a = ending(c, req, *a)
		r.stamp(a)
		return a
	}
	now := r.clk.Now()
	if !c.begun {
		if !h.deadline.IsZero() && !now.Before(h.deadline) {
			return r.expectTimeout(h, a)
		}
		return nil // Its begin line is on its way.
	}
	if h.re != nil && !h.matched {
		if !c.expect(h) {
			if !now.Before(h.deadline) {
				return r.expectTimeout(h, a)
			}
			return nil
		}
	}
	if req.Op == protocol.OpSend && r.tool.typist.busy() {
		return nil // The runner's own lines go in first (onTyped).
	}
	r.stamp(a)
	h.spoolOff, h.outOff = a.offset, c.bytes
	if _, err := r.root.Lstat(rel(protocol.DirCtl, h.name)); errors.Is(err, os.ErrNotExist) {
		a.outcome, a.message = protocol.OutcomeRejected, "withdrawn by its master before delivery; nothing sent"
		return a
	}
	if req.Op == protocol.OpSignal {
		return deliverSignal(&r.tool, h, a)
	}
	return r.startWrite(h, a)
}

// stamp sets where the answer took effect: the spool size now.
func (r *Runner) stamp(a *answer) {
	r.flushSpool()
	a.offset = r.disk.spoolSize
}

func (r *Runner) expectTimeout(h *heldReq, a *answer) *answer {
	r.stamp(a)
	a.outcome = protocol.OutcomeExpectTimeout
	a.message = fmt.Sprintf("/%s/ did not appear in the output of %s within %v; nothing sent", h.req.Expect, h.req.CmdID,
		time.Duration(expectMS(h.req))*time.Millisecond)
	if c := r.cur; c.is(h.req.CmdID) {
		off := c.bytes
		a.outputOffset = &off
	}
	return a
}

func expectMS(req *protocol.ControlRequest) int64 {
	if req.ExpectTimeoutMS != nil {
		return *req.ExpectTimeoutMS
	}
	return protocol.DefaultExpectTimeoutMS
}

// expect looks for h's expect in the command's output, from its start
// (expect_from, else the command's expect cursor) within the last
// expectWindow bytes.
func (c *running) expect(h *heldReq) bool {
	from := h.from
	if from < 0 {
		from = c.cursor
	}
	from = max(from, c.bytes-expectWindow, c.win.start())
	if from > c.bytes {
		return false
	}
	region := c.win.since(from)
	loc := h.re.FindIndex(region)
	if loc == nil {
		return false
	}
	h.matched, h.match = true, [2]int64{from + int64(loc[0]), from + int64(loc[1])}
	return true
}

// deliverSignal sends a signal request's signal to the foreground process
// group of t's terminal (nil: no tool). Nothing else happens: no cancel, no
// resynchronisation; the command goes on (or ends) as the tool decides.
// KILL also goes to the tool's own process group, so the tool dies
// whatever job is in the foreground: the command ends tool_died (signal
// KILL, tool_restarted) and the tool is restarted (PROTOCOL.md 9.8).
func deliverSignal(t *toolLife, h *heldReq, a *answer) *answer {
	if t.term == nil {
		a.outcome, a.cmdState, a.message = protocol.OutcomeNotRunning, "finished", h.req.CmdID+" has no tool any more; nothing sent"
		return a
	}
	kill := h.req.Signal == "KILL"
	if kill {
		// The tool's own group first: were the foreground job killed
		// first, the tool could reap it and print the command's marker
		// before its own SIGKILL lands (seen under load: the command
		// ended marker_seen, rc 137, and the tool lived on).
		_ = t.term.Signal(syscall.SIGKILL) // Best effort: the tool may have died already.
	}
	if err := t.term.SignalForeground(signals[h.req.Signal]); err != nil && !kill {
		a.outcome, a.message = protocol.OutcomeRejected, "the signal could not be sent: "+err.Error()
		return a
	}
	a.outcome = protocol.OutcomeDelivered
	a.message = fmt.Sprintf("SIG%s sent to the foreground process group of %s's terminal", h.req.Signal, h.req.CmdID)
	if kill {
		a.message += " and to the tool's process group: the tool is restarted"
	}
	return a
}

// startWrite starts writing a send's bytes (answered in finishWrite), or
// refuses a secret while the terminal echoes.
func (r *Runner) startWrite(h *heldReq, a *answer) *answer {
	c, req := r.cur, h.req
	echo, err := r.tool.term.Echo()
	if err != nil {
		a.outcome, a.message = protocol.OutcomeRejected, "cannot read the terminal's settings: "+err.Error()+"; nothing sent"
		return a
	}
	if req.Secret && echo {
		a.outcome = protocol.OutcomeRefusedEcho
		a.message = "the terminal echoes input (ECHO is on), so the secret would be printed into the session; nothing sent"
		return a
	}
	c.sending(h, echo) // With echo on, its echo is the terminal's, not the tool's output.
	w := r.in.beginWrite(h)
	r.tool.startInput(req.Data, w.abort, w.done)
	return nil
}

// onInputDone answers the send whose write ended and goes on with the queue.
func (r *Runner) onInputDone(d inputDone) {
	r.finishWrite(d)
	r.pumpInput()
}

// finishWrite answers the send whose bytes were being written: delivered
// when the terminal took all of them, else not_running with the count.
func (r *Runner) finishWrite(d inputDone) {
	h := r.in.endWrite()
	req := h.req
	a := answer{cmdID: req.CmdID, offset: h.spoolOff}
	n := int64(d.n)
	a.bytes, a.outputOffset = &n, &h.outOff
	if h.matched {
		a.matchStart, a.matchEnd = &h.match[0], &h.match[1]
	}
	if !req.Secret {
		sum := sha256.Sum256(req.Data[:d.n])
		a.sha256 = hex.EncodeToString(sum[:])
	}
	if d.n == len(req.Data) {
		a.outcome = protocol.OutcomeDelivered
		a.message = fmt.Sprintf("%d bytes written to the terminal of %s", d.n, req.CmdID)
		if h.matched {
			a.message += fmt.Sprintf(" after /%s/ matched its output at %d-%d", req.Expect, h.match[0], h.match[1])
		}
	} else {
		if c := r.cur; c != nil {
			c.echo.truncate(len(req.Data) - d.n)
		}
		a.outcome, a.cmdState = protocol.OutcomeNotRunning, "finished"
		a.message = fmt.Sprintf("%s ended before it read all its input: %d of %d bytes were written", req.CmdID, d.n, len(req.Data))
		if d.err != nil && !errors.Is(d.err, os.ErrDeadlineExceeded) {
			a.message += " (" + d.err.Error() + ")"
		}
	}
	r.completeHeld(h, a)
}

// abortInput stops a write under way (the command is ending, or the
// runner is about to type into the terminal) and answers its request.
func (r *Runner) abortInput() {
	if d, ok := r.in.abortWrite(); ok {
		r.finishWrite(d)
	}
}

// endInput answers every request still held for the current command: it
// ends (its done marker, a timeout or cancel, the tool's death).
func (r *Runner) endInput() {
	r.abortInput()
	r.pumpInput() // The command is ending or gone: each is refused.
}

// completeHeld records a held request's event and writes its reply. A
// request whose file is gone (its master withdrew it) gets its event and
// no reply.
func (r *Runner) completeHeld(h *heldReq, a answer) {
	delete(r.mbox.held, h.name)
	r.record(h.req, a, "")
	p := rel(protocol.DirCtl, h.name)
	if _, err := r.root.Lstat(p); errors.Is(err, os.ErrNotExist) {
		return
	}
	b := marshal(replyFor(h.req, a))
	if err := r.writeReply(h.name, b); err != nil {
		r.mbox.unsent[h.name] = b
		return
	}
	r.removeRequest(p)
}

// due is when the head of a queue gives up on its expect.
func (in *inputQueue) due() time.Time {
	due := in.waitDue()
	if len(in.held) == 0 || in.write != nil {
		return due
	}
	if d := in.held[0].deadline; !d.IsZero() && (due.IsZero() || d.Before(due)) {
		due = d
	}
	return due
}

// resize sets the terminal's window size (the tool's foreground process
// group gets SIGWINCH from the kernel). The size is kept for later starts
// of the tool.
func (r *Runner) resize(req *protocol.ControlRequest) (protocol.Outcome, string) {
	r.in.cols, r.in.rows = req.Cols, req.Rows
	if r.tool.term == nil {
		return protocol.OutcomeDelivered, fmt.Sprintf("no tool runs now; the next one starts with a %dx%d terminal", req.Cols, req.Rows)
	}
	if err := r.tool.term.Resize(req.Cols, req.Rows); err != nil {
		return protocol.OutcomeRejected, "the terminal could not be resized: " + err.Error()
	}
	return protocol.OutcomeDelivered, fmt.Sprintf("the terminal is now %d columns by %d rows (the tool gets SIGWINCH)", req.Cols, req.Rows)
}

// winSize is the terminal size for a new tool: the last resize, else the
// default.
func (in *inputQueue) winSize() (int, int) {
	if in.cols > 0 {
		return in.cols, in.rows
	}
	return defaultCols, defaultRows
}

// requestName returns the file name of a request's source path.
func requestName(source string) string { return filepath.Base(source) }

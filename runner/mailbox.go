package runner

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/protocol"
)

// The control mailbox (PROTOCOL.md section 9): every request is its own
// file, ctl/req_<seq>_<req_id>.json, so no request can overwrite another.
// The runner takes them in (seq, name) order, each exactly once:
//
//	validate -> act -> event -> reply (ctl/ack/<same name>) -> delete
//
// A request that already has a reply (the runner died between reply and
// delete) is only deleted. A request that was acted on but has no reply
// (the runner died between act and reply) is stale for the next runner
// (another session_id, or an mtime older than its start), so it is never
// acted on twice.

// mailbox is the runner's state for ctl/. It is owned by the Run goroutine.
type mailbox struct {
	root *fsq.Root
	log  *slog.Logger
	// startMod is the runner's start on the filesystem's clock: the mtime
	// of tmp/started, written at start and removed. A request without session_id, or a
	// legacy file, older than it was meant for an earlier runner.
	startMod time.Time
	seen     map[string]fileSeen // files not yet complete, by name in ctl/
	recheck  time.Time           // when to look at an incomplete file again
	unsent   map[string][]byte   // replies acted on whose write failed, retried
	held     map[string]bool     // send and signal requests taken, not yet answered (input.go)
	// afterResult holds replies (in unsent) that wait for a result to be
	// committed: a cancel of a queued command is answered once its
	// cancelled result is visible, or at until (settleWait) if the writer
	// is slow, so a reply never promises a result a crash could turn into
	// runner_restarted. The loop goes on meanwhile.
	afterResult map[string]awaitedResult
	moved       int64 // names files moved into tmp/
}

// awaitedResult is what a held reply waits for: the result of the
// command file name, until a deadline on the runner's clock.
type awaitedResult struct {
	name  string
	until time.Time
}

// asideName returns a new name in tmp/ for the control file name, moved
// there to be deleted.
func (m *mailbox) asideName(name string) string {
	m.moved++
	return rel(protocol.DirTmp, fmt.Sprintf("ctl.%d.%s", m.moved, name))
}

// writtenBeforeStart reports whether a request file modified at mod (zero:
// unknown) was written before this runner started (init), i.e. was meant
// for an earlier runner.
func (m *mailbox) writtenBeforeStart(mod time.Time) bool {
	return !mod.IsZero() && mod.Before(m.startMod)
}

// taken reports whether name was taken: held, or acted on with its reply
// still to be written.
func (m *mailbox) taken(name string) bool {
	_, unsent := m.unsent[name]
	return m.held[name] || unsent
}

// unsentReply returns the reply kept for name by retryReply, if any.
func (m *mailbox) unsentReply(name string) ([]byte, bool) {
	b, ok := m.unsent[name]
	return b, ok
}

// fileSeen is how an incomplete file looked when it last changed.
type fileSeen struct {
	size int64
	mod  time.Time
	at   time.Time // our clock
}

// stillWriting is the one rule for a file in queue/ or ctl/ that is not
// complete yet (PROTOCOL.md section 4, "Writers MUST"): a writer may still be
// writing it, so it is given grace, on the runner's clock, from when it
// last changed size or mtime; after that it is answered as it stands.
// last is what was seen of it before (zero: nothing); the first result is
// what to keep for the next look.
func stillWriting(last fileSeen, fi os.FileInfo, now time.Time, grace time.Duration) (fileSeen, bool) {
	if last.at.IsZero() || last.size != fi.Size() || !last.mod.Equal(fi.ModTime()) {
		last = fileSeen{size: fi.Size(), mod: fi.ModTime(), at: now}
	}
	return last, now.Sub(last.at) < grace
}

// startedFile is written (and removed) at start; its mtime is the runner's
// start as the session's filesystem tells time.
const startedFile = "started"

// init records the runner's start on the filesystem's clock. It
// writes tmp/started, then touches it until its mtime moves past the first
// one, so that a request written in the same timestamp tick as the start
// (just before it) counts as older. The price is that a request without
// session_id written within that tick after the start is judged stale too;
// masters set session_id, and a stale stop is the worse mistake.
func (m *mailbox) init(sessionID string, clk clock) {
	m.seen, m.unsent, m.held, m.afterResult = map[string]fileSeen{}, map[string][]byte{}, map[string]bool{}, map[string]awaitedResult{}
	p := rel(protocol.DirTmp, startedFile)
	first, err := writeStamp(m.root, p, sessionID)
	if err == nil {
		m.startMod = first
		for deadline := clk.Now().Add(1100 * time.Millisecond); clk.Now().Before(deadline); {
			clk.Sleep(time.Millisecond)
			var fi os.FileInfo
			if err = m.root.TouchDir(p); err == nil {
				fi, err = m.root.Lstat(p)
			}
			if err != nil {
				break
			}
			if fi.ModTime().After(first) {
				m.startMod = fi.ModTime()
				break
			}
		}
	}
	_ = m.root.Remove(p) // Only its mtime was needed (or it failed half-way: a full disk).
	if err != nil {
		// Our own clock is the same clock on a local filesystem.
		m.startMod = wallNow()
		m.log.Warn("cannot record the start time on the session's filesystem; using the runner's clock", "err", err)
	}
}

// writeStamp creates p and returns its mtime.
func writeStamp(root *fsq.Root, p, content string) (time.Time, error) {
	f, err := root.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return time.Time{}, err
	}
	defer f.Close()
	if _, err := f.WriteString(content + "\n"); err != nil {
		return time.Time{}, err
	}
	fi, err := f.Stat()
	if err != nil {
		return time.Time{}, err
	}
	return fi.ModTime(), nil
}

// checkCtl looks at every file in ctl/: the legacy single-slot files, then
// the mailbox in (seq, name) order. It stops at a request still being
// written (the order of requests is part of the contract) and comes back
// at m.recheck.
func (r *Runner) checkCtl() {
	r.mbox.recheck = time.Time{}
	// One listing per look, which runs on every poll: its open of ctl/
	// is what fsq.Root.Revalidate does (requests come from other hosts), and
	// the legacy files are looked up only when it shows them.
	names, err := r.listCtl()
	if err != nil {
		r.log.Warn("list ctl/", "err", err)
		return
	}
	reqs, fresh := r.mbox.requestsIn(names)
	if fresh {
		// Something new: list again and take it only up to the first
		// listing's last request, for seq order against a master that
		// raced with the listing (order.go). A newer one is taken at the
		// next look, at once.
		again, err := r.listCtl()
		if err != nil {
			r.log.Warn("list ctl/", "err", err)
			return
		}
		var later bool
		first := reqs
		names = again
		reqs, _ = r.mbox.requestsIn(again)
		if reqs, later = settled(first, reqs, seqKey.self); later {
			r.mbox.recheckAt(r.clk.Now())
		}
	}
	for _, f := range []string{protocol.FileCancel, protocol.FileStop} {
		if base := path.Base(f); slices.Contains(names, base) {
			r.takeLegacy(f)
		} else {
			delete(r.mbox.seen, base)
		}
	}
	for _, n := range names {
		if protocol.IsRequestName(n) {
			if _, _, err := protocol.ParseRequestName(n); err != nil {
				r.rejectRequestName(n)
			}
		}
	}
	slices.SortFunc(reqs, seqKey.compare)
	if len(reqs) > 0 {
		r.watcher.Hurry() // A master waits for the reply, and may send more.
	}
	for _, e := range reqs {
		if !r.takeRequest(e.name) {
			break
		}
	}
}

// requestsIn returns the well-named requests of a listing of ctl/, and
// whether any of them is new (neither held nor waiting for its reply to
// be written again).
func (m *mailbox) requestsIn(names []string) (reqs []seqKey, fresh bool) {
	for _, n := range names {
		if !protocol.IsRequestName(n) {
			continue
		}
		if seq, _, err := protocol.ParseRequestName(n); err == nil {
			reqs = append(reqs, seqKey{seq, n})
			fresh = fresh || !m.taken(n)
		}
	}
	return reqs, fresh
}

// listCtl lists ctl/ (through the session root; a test may list it its
// own way).
func (r *Runner) listCtl() ([]string, error) {
	if r.cfg.listCtl != nil {
		return r.cfg.listCtl(r.root.Abs(protocol.DirCtl))
	}
	return r.root.ReadNames(protocol.DirCtl)
}

// takeRequest handles ctl/<name>. It returns false when the request cannot
// be decided yet (still being written, or unreadable for now).
func (r *Runner) takeRequest(name string) bool {
	p := rel(protocol.DirCtl, name)
	if r.mbox.held[name] {
		return true // Taken; answered once it is delivered or refused.
	}
	if b, ok := r.mbox.unsentReply(name); ok {
		if w, waits := r.mbox.afterResult[name]; waits {
			if r.queue.settling[w.name] && r.clk.Now().Before(w.until) {
				return true // Answered once the result is committed (onResult).
			}
			delete(r.mbox.afterResult, name)
			r.deliverReply(name, b)
			return true
		}
		if r.writeReply(name, b) == nil {
			delete(r.mbox.unsent, name)
			r.removeRequest(p)
		}
		return true
	}
	if _, err := r.root.Lstat(rel(protocol.DirAck, name)); err == nil {
		r.removeRequest(p) // Answered by a runner that died before deleting it.
		return true
	}
	data, fi, err := r.root.ReadFile(p, protocol.MaxRequestSize)
	var req *protocol.ControlRequest
	var perr error
	switch {
	case errors.Is(err, os.ErrNotExist):
		delete(r.mbox.seen, name) // Withdrawn.
		return true
	case errors.Is(err, fsq.ErrTooLarge):
		perr = &limitError{fmt.Sprintf("file is larger than %d bytes", protocol.MaxRequestSize), protocol.MaxRequestSize}
	case errors.Is(err, fsq.ErrSymlink), errors.Is(err, fsq.ErrNotRegular):
		r.mbox.moveAside(p, name)
		perr = errors.New("a request must be a regular file, not a symlink, directory or FIFO")
	case transient(err):
		r.log.Warn("read control request; will retry", "name", name, "err", err)
		r.mbox.recheckAt(r.clk.Now().Add(r.cfg.Poll))
		return false
	case err != nil:
		// Unreadable for good (another user's file, say): answered, and
		// moved out of the way so that it does not hold back the others.
		r.mbox.moveAside(p, name)
		perr = fmt.Errorf("the request cannot be read: %w", err)
	default:
		req, perr = protocol.ParseControlRequest(name, data)
		if errors.Is(perr, protocol.ErrIncomplete) && r.mbox.stillWriting(name, fi, r.cfg.ParseGrace, r.clk.Now()) {
			return false
		}
	}
	delete(r.mbox.seen, name)
	if req == nil {
		seq, id, _ := protocol.ParseRequestName(name)
		req = &protocol.ControlRequest{ReqID: id, Seq: seq}
	}
	var mod time.Time
	if fi != nil {
		mod = fi.ModTime()
	}
	a := r.decide(req, perr, mod, rel(protocol.DirCtl, name))
	if a.held {
		r.pumpInput() // Answered now or later, by completeHeld.
		return true
	}
	r.record(req, a, "")
	b := marshal(replyFor(req, a))
	if a.settle != "" && r.queue.settling[a.settle] {
		until := r.clk.Now().Add(settleWait)
		r.mbox.unsent[name] = b // Acted on: never again.
		r.mbox.afterResult[name] = awaitedResult{name: a.settle, until: until}
		r.mbox.recheckAt(until)
		return true
	}
	r.deliverReply(name, b)
	return true
}

// deliverReply writes the reply b to the request name, acted on, and
// deletes the request; a reply that cannot be written is kept and retried.
func (r *Runner) deliverReply(name string, b []byte) {
	failpoint("ctl_after_act")
	if err := r.writeReply(name, b); err != nil {
		r.mbox.unsent[name] = b // Acted on: never again; the reply is retried.
		return
	}
	delete(r.mbox.unsent, name)
	failpoint("ctl_after_reply")
	r.removeRequest(rel(protocol.DirCtl, name))
}

// repliesAfter delivers the replies that waited for the result of the
// command file name, now committed (or given up).
func (r *Runner) repliesAfter(name string) {
	for req, w := range r.mbox.afterResult {
		if w.name == name {
			r.takeRequest(req)
		}
	}
}

// answer is what the runner did with a request.
type answer struct {
	outcome protocol.Outcome
	message string
	cmdID   string
	offset  int64  // spool size when it took effect
	held    bool   // a send or signal queued for the running command (input.go)
	settle  string // the result (command file name) to see committed before the reply
	// send and signal only (see protocol.ControlReply)
	bytes                              *int64
	sha256                             string
	matchStart, matchEnd, outputOffset *int64
	cmdState                           string
	ctx                                map[string]any // the reply's context beyond cmd_id and cmd_state (errcontext.go)
}

// replyFor is the reply to req.
func replyFor(req *protocol.ControlRequest, a answer) *protocol.ControlReply {
	return &protocol.ControlReply{
		ProtocolVersion: protocol.Version, ReqID: req.ReqID, Seq: req.Seq, Op: req.Op, CmdID: a.cmdID,
		Outcome: a.outcome, Message: a.message, TS: protocol.Now(), SpoolOffset: a.offset,
		Bytes: a.bytes, SHA256: a.sha256, MatchStart: a.matchStart, MatchEnd: a.matchEnd,
		OutputOffset: a.outputOffset, CmdState: a.cmdState, Context: replyContext(req, a),
	}
}

// decide validates, judges staleness and acts. source names the request in
// results and logs (its file: "ctl/req_<seq>_<req_id>.json", "ctl/cancel.json").
func (r *Runner) decide(req *protocol.ControlRequest, perr error, mod time.Time, source string) answer {
	r.flushSpool()
	a := answer{offset: r.disk.spoolSize, cmdID: req.CmdID}
	switch {
	case perr != nil:
		a.outcome, a.message = protocol.OutcomeRejected, "rejected, nothing done: "+perr.Error()
		a.ctx = addContext(contextOf(perr), "source", source)
	case req.SessionID != "" && req.SessionID != r.id.sessionID:
		a.outcome = protocol.OutcomeStale
		a.ctx = errContext("session_id", r.id.sessionID, "request_session_id", req.SessionID)
		a.message = fmt.Sprintf("stale, nothing done: meant for runner session %s, this is %s", req.SessionID, r.id.sessionID)
	case req.SessionID == "" && r.mbox.writtenBeforeStart(mod):
		a.outcome = protocol.OutcomeStale
		a.ctx = errContext("session_id", r.id.sessionID, "written_before_start", true)
		a.message = "stale, nothing done: written before this runner started (" + mod.UTC().Format(time.RFC3339Nano) + " < " + r.mbox.startMod.UTC().Format(time.RFC3339Nano) + " on the session's filesystem)"
	case req.Op == protocol.OpCancel:
		a.outcome, a.message, a.cmdID = r.cancel(req.Scope, req.CmdID, requestWords(req, source, mod), requestContext(req, source))
		if a.outcome == protocol.OutcomeCancelledQueued {
			a.settle = r.queue.done[a.cmdID] // Its cancelled result, handed to the writer.
		}
	case req.Op == protocol.OpStop:
		a.outcome, a.message = r.stopRequested(req.Mode, requestWords(req, source, mod))
	case req.Op == protocol.OpSend, req.Op == protocol.OpSignal:
		return r.takeInput(req, requestName(source), a)
	case req.Op == protocol.OpResize:
		a.outcome, a.message = r.resize(req)
	default:
		a.outcome, a.message = protocol.OutcomeRejected, string(req.Op)+" is not supported by this runner"
	}
	return a
}

// requestContext names a request in an error's context: its req_id (none
// for a legacy file), its file, its submitter.
func requestContext(req *protocol.ControlRequest, source string) map[string]any {
	return errContext("req_id", req.ReqID, "source", source, "submitter", req.Submitter)
}

// requestWords names a request in words for a result's error message and
// state.json's reason: "a stop request from master pid 42 on host1 at
// 2026-11-26 16:40:51 UTC" (who asked: its submitter, "name@host:pid";
// when: its ts, else the file's mtime). A request that names no
// submitter is named by its file.
func requestWords(req *protocol.ControlRequest, source string, mod time.Time) string {
	w := "a " + string(req.Op) + " request"
	switch who := req.Submitter; {
	case who == "":
		w += " (" + source + ")"
	default:
		name, where, ok := strings.Cut(who, "@")
		host, pid, ok2 := strings.Cut(where, ":")
		if ok && ok2 && name != "" && host != "" && pid != "" {
			w += fmt.Sprintf(" from %s pid %s on %s", name, pid, host)
		} else {
			w += " from " + who
		}
	}
	at := req.TS.Time
	if at.IsZero() {
		at = mod
	}
	if !at.IsZero() {
		w += " at " + at.UTC().Format("2006-01-02 15:04:05 UTC")
	}
	return w
}

// record writes the request's one event. legacy names the single-slot
// file it came from ("" for a mailbox request).
func (r *Runner) record(req *protocol.ControlRequest, a answer, legacy string) {
	detail := map[string]any{"outcome": string(a.outcome), "message": a.message}
	if legacy != "" {
		detail["file"] = legacy
	} else {
		detail["req_id"], detail["seq"] = req.ReqID, req.Seq
	}
	ev := eventFor(req.Op)
	switch req.Op {
	case protocol.OpCancel:
		if req.Scope != "" {
			detail["scope"] = string(req.Scope)
		}
	case protocol.OpStop:
		if req.Mode != "" {
			detail["mode"] = string(req.Mode)
		}
	case protocol.OpSignal:
		detail["signal"] = req.Signal
	case protocol.OpResize:
		detail["cols"], detail["rows"] = req.Cols, req.Rows
	case protocol.OpSend:
		// Never the bytes; their hash only when they are not secret.
		detail["secret"] = req.Secret
		detail["bytes"] = int64(0)
		if a.bytes != nil {
			detail["bytes"] = *a.bytes
		}
		if a.sha256 != "" && !req.Secret {
			detail["sha256"] = a.sha256
		}
		if req.Expect != "" {
			detail["expect"] = req.Expect
		}
		for k, v := range map[string]*int64{"match_start": a.matchStart, "match_end": a.matchEnd, "output_offset": a.outputOffset} {
			if v != nil {
				detail[k] = *v
			}
		}
	default:
		if req.Op != "" {
			detail["op"] = string(req.Op)
		}
	}
	if a.cmdState != "" {
		detail["cmd_state"] = a.cmdState
	}
	off := a.offset
	r.event(protocol.Event{Event: ev, CmdID: a.cmdID, SpoolOffset: &off, Detail: detail})
	r.log.Info("control request", "req_id", req.ReqID, "file", legacy, "op", req.Op, "outcome", a.outcome, "message", a.message)
}

// eventFor names the event of a request by its op.
func eventFor(op protocol.Op) string {
	switch op {
	case protocol.OpCancel:
		return protocol.EvCancel
	case protocol.OpStop:
		return protocol.EvStop
	case protocol.OpSend:
		return protocol.EvInput
	case protocol.OpSignal:
		return protocol.EvSignal
	case protocol.OpResize:
		return protocol.EvResize
	}
	return protocol.EvRequestRejected
}

// writeReply writes ctl/ack/<name> atomically (recreating ctl/ack/ if
// someone removed it).
func (r *Runner) writeReply(name string, b []byte) error {
	p := rel(protocol.DirAck, name)
	err := r.root.WriteAtomic(p, b, 0o600, fsq.Volatile)
	if errors.Is(err, os.ErrNotExist) {
		// ctl/ack/ (or ctl/) was removed: made again as MkdirAll would,
		// unless the session is being removed (mayRecreate).
		if err = r.hold.mayRecreate(r.root, protocol.DirAck); err != nil {
			// Not made again; retried below like any failure.
		} else if err = r.root.Mkdir(protocol.DirCtl, 0o700); err == nil || errors.Is(err, os.ErrExist) {
			err = r.root.Mkdir(protocol.DirAck, 0o700)
		}
		if err == nil || errors.Is(err, os.ErrExist) {
			err = r.root.WriteAtomic(p, b, 0o600, fsq.Volatile)
		}
	}
	if err != nil {
		r.log.Error("write control reply; will retry", "name", name, "err", err)
		r.mbox.recheckAt(r.clk.Now().Add(r.cfg.Poll))
		return err
	}
	r.ringSync() // On NFS the syncer then bumps ctl/ack/'s mtime (PROTOCOL.md section 16.1).
	return nil
}

func (r *Runner) removeRequest(p string) {
	if err := r.root.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		r.log.Warn("remove control request", "file", p, "err", err) // Its reply exists: never acted on again.
	}
}

// rejectRequestName answers a file named req_… against the grammar: it is
// moved out of ctl/ with an event naming it; there is no reply, since its
// name cannot be a reply's name.
func (r *Runner) rejectRequestName(name string) {
	r.flushSpool()
	off := r.disk.spoolSize
	r.mbox.moveAside(rel(protocol.DirCtl, name), name)
	msg := "rejected, nothing done: " + strconv.Quote(name) + " is not req_<seq>_<req_id>.json (req_id: 1-128 characters of [A-Za-z0-9._-])"
	r.log.Warn("control request with a bad name", "file", name)
	r.event(protocol.Event{Event: protocol.EvRequestRejected, SpoolOffset: &off,
		Detail: map[string]any{"file": rel(protocol.DirCtl, name), "outcome": string(protocol.OutcomeRejected), "message": msg}})
}

// moveAside moves a file (or directory, FIFO, symlink) out of ctl/ into the
// runner's tmp/ and deletes it there, so no fixed name is left behind.
func (m *mailbox) moveAside(p, name string) {
	dst := m.asideName(name)
	if err := m.root.Rename(p, dst); err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			m.log.Warn("move a control file aside", "file", p, "err", err)
		}
		return
	}
	if err := m.root.RemoveAll(dst); err != nil {
		m.log.Warn("remove a control file", "file", dst, "err", err) // tmp/ is emptied at the next start.
	}
}

// stillWriting applies stillWriting to the control file name, and looks
// again when its grace ends.
func (m *mailbox) stillWriting(name string, fi os.FileInfo, grace time.Duration, now time.Time) bool {
	s, wait := stillWriting(m.seen[name], fi, now, grace)
	m.seen[name] = s
	if wait {
		m.recheckAt(s.at.Add(grace))
	}
	return wait
}

// transient reports read errors worth retrying at the next poll: a
// network filesystem's stale handle or I/O hiccup, an interrupted call, a
// session directory swapped for a symlink (fsq.ErrLayout) until it is fixed.
func transient(err error) bool {
	return errors.Is(err, fsq.ErrLayout) || errors.Is(err, syscall.ESTALE) || errors.Is(err, syscall.EIO) || errors.Is(err, syscall.EINTR) || errors.Is(err, syscall.EAGAIN)
}

func (m *mailbox) recheckAt(t time.Time) {
	if m.recheck.IsZero() || t.Before(m.recheck) {
		m.recheck = t
	}
}

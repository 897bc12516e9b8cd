package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
)

// request writes a mailbox request atomically (temp file + rename), as
// every master does, and returns its name. fields are added to the body;
// a prefix (".") writes it under that prefix instead, staged for a rename.
func (h *harness) request(seq int64, id string, op protocol.Op, fields map[string]any, prefix ...string) string {
	h.t.Helper()
	body := map[string]any{"protocol_version": 1, "req_id": id, "seq": seq, "op": string(op)}
	for k, v := range fields {
		body[k] = v
	}
	b, err := json.Marshal(body)
	if err != nil {
		h.t.Fatal(err)
	}
	name := protocol.RequestName(seq, id)
	h.writeFile(rel(protocol.DirCtl, strings.Join(prefix, "")+name), string(b))
	return name
}

// reply waits for ctl/ack/<name>, validates it against the schema and
// checks that the request itself is gone.
func (h *harness) reply(name string) protocol.ControlReply {
	h.t.Helper()
	return waitReply(h.t, h.dir, name)
}

func waitReply(t testing.TB, dir, name string) protocol.ControlReply {
	t.Helper()
	p := filepath.Join(dir, protocol.DirAck, name)
	var b []byte
	(&harness{t: t}).waitFor("reply "+name, func() bool {
		var err error
		b, err = os.ReadFile(p)
		return err == nil
	})
	validateFile(t, "reply.json", b)
	var rep protocol.ControlReply
	jsonUnmarshal(b, &rep)
	(&harness{t: t}).waitFor("request "+name+" deleted", func() bool {
		_, err := os.Lstat(filepath.Join(dir, protocol.DirCtl, name))
		return os.IsNotExist(err)
	})
	return rep
}

// requestEvents returns the events of mailbox request reqID.
func requestEvents(evs []protocol.Event, reqID string) []protocol.Event {
	var out []protocol.Event
	for _, e := range evs {
		if e.Detail["req_id"] == reqID {
			out = append(out, e)
		}
	}
	return out
}

// With --poll 250ms and polling only (NFS), five cancels written
// in a row all arrive, in seq order, each with its own outcome and its one
// event; the files are created in reverse order to show that seq, not
// arrival, decides.
func TestMailboxFiveCancelsInOrder(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.Poll = 250 * time.Millisecond; c.Watch = WatchPoll }).start()
	a := h.submit("puts go; flush stdout; after 60000")
	var queued []string
	for i := 0; i < 5; i++ {
		queued = append(queued, h.submit("puts never"))
	}
	h.waitFor("a running", func() bool { return strings.Contains(readFile(h, a), "go") })
	// The five are written as dot-files (which the runner ignores), then
	// renamed into place in seq order within microseconds, as a master
	// writes a burst without waiting for replies (PROTOCOL.md 9.1,
	// "Processing"). A listing may show any first few of them: they must
	// be taken in seq order, not in the directory's order (ext4 lists by
	// hash). Renaming from the highest seq down would not make them appear
	// together: a listing between two renames (a loaded machine) shows
	// the higher seqs alone, and those are rightly taken first.
	var reqs []string
	for i := 1; i <= 5; i++ {
		name := h.request(int64(100+i), fmt.Sprintf("r%d", i), protocol.OpCancel, map[string]any{"cmd_id": fmt.Sprintf("c%d", i+1)}, ".")
		reqs = append(reqs, name)
	}
	for _, name := range reqs {
		if err := os.Rename(filepath.Join(h.dir, protocol.DirCtl, "."+name), filepath.Join(h.dir, protocol.DirCtl, name)); err != nil {
			t.Fatal(err)
		}
	}
	for i, name := range reqs {
		rep := h.reply(name)
		if rep.Outcome != protocol.OutcomeCancelledQueued || rep.CmdID != fmt.Sprintf("c%d", i+2) || rep.Op != protocol.OpCancel {
			t.Errorf("request %d: %+v", i+1, rep)
		}
		if r := h.result(queued[i]); r.Status != protocol.StatusCancelled || r.ExitReason != protocol.ReasonCancelledQueued {
			t.Errorf("%s: %+v", queued[i], r)
		}
	}
	cur := h.reply(h.request(106, "r6", protocol.OpCancel, map[string]any{"scope": "current"}))
	if cur.Outcome != protocol.OutcomeCancelledRunning || cur.CmdID != "c1" {
		t.Errorf("cancel current: %+v", cur)
	}
	if r := h.result(a); r.Status != protocol.StatusCancelled {
		t.Errorf("%+v", r)
	}
	h.stop(protocol.StopGraceful)
	var seqs []float64
	for _, e := range h.events() {
		if e.Event == protocol.EvCancel {
			seqs = append(seqs, e.Detail["seq"].(float64))
			if e.SpoolOffset == nil {
				t.Errorf("cancel event without spool_offset: %+v", e)
			}
		}
	}
	if !slices.Equal(seqs, []float64{101, 102, 103, 104, 105, 106}) {
		t.Errorf("cancel events in order %v", seqs)
	}
	invariants(t, h.dir)
}

// Every outcome a cancel, stop, send, signal or resize request can have in
// this runner, each with exactly one event and one reply.
func TestMailboxOutcomes(t *testing.T) {
	t.Parallel()
	h := newHarness(t).start()
	h.state() // Written by Run, after its first steps.
	if _, err := os.Lstat(filepath.Join(h.dir, protocol.FileTail)); err != nil {
		t.Errorf("results name %s as tail_path; it must exist from the start: %v", protocol.FileTail, err)
	}
	done := h.submit("expr 1")
	h.result(done)
	sid := h.state().SessionID
	seq := int64(0)
	req := func(op protocol.Op, fields map[string]any) protocol.ControlReply {
		t.Helper()
		seq++
		return h.reply(h.request(seq, fmt.Sprintf("q%d", seq), op, fields))
	}
	type want struct {
		op      protocol.Op
		fields  map[string]any
		outcome protocol.Outcome
		message string
	}
	check := func(cases []want) {
		t.Helper()
		for _, c := range cases {
			rep := req(c.op, c.fields)
			if rep.Outcome != c.outcome || !strings.Contains(rep.Message, c.message) {
				t.Errorf("%s %v: %s %q, want %s %q", c.op, c.fields, rep.Outcome, rep.Message, c.outcome, c.message)
			}
			if rep.Op != c.op {
				t.Errorf("%s %v: the reply's op is %q", c.op, c.fields, rep.Op)
			}
		}
	}
	check([]want{
		{protocol.OpCancel, map[string]any{"scope": "current"}, protocol.OutcomeIdle, "no command is running"},
		{protocol.OpCancel, map[string]any{"cmd_id": "nosuch"}, protocol.OutcomeNotFound, "nosuch"},
		{protocol.OpCancel, map[string]any{"cmd_id": "c1", "session_id": sid}, protocol.OutcomeAlreadyFinished, "already finished"},
		{protocol.OpCancel, map[string]any{"cmd_id": "c1", "session_id": "session_of_another_runner"}, protocol.OutcomeStale, "another_runner"},
		{protocol.OpCancel, map[string]any{"scope": "nonsense", "cmd_id": "c1"}, protocol.OutcomeRejected, "scope"},
		{protocol.OpCancel, map[string]any{"cmd_id": nil}, protocol.OutcomeRejected, "cmd_id"},
		{protocol.Op("explode"), nil, protocol.OutcomeRejected, "unknown op"},
		{protocol.OpSend, map[string]any{"cmd_id": "c1", "data_b64": "aGkK"}, protocol.OutcomeNotRunning, "c1 has finished"},
		{protocol.OpSend, map[string]any{"cmd_id": "c1", "data_b64": "c2VjcmV0Cg==", "secret": true}, protocol.OutcomeNotRunning, "finished"},
		{protocol.OpSignal, map[string]any{"cmd_id": "c1", "signal": "INT"}, protocol.OutcomeNotRunning, "finished"},
		{protocol.OpSignal, map[string]any{"cmd_id": "c1", "signal": "STOP"}, protocol.OutcomeRejected, "signal"}, // KILL is accepted.
		{protocol.OpResize, map[string]any{"cols": 100, "rows": 40}, protocol.OutcomeDelivered, "100 columns by 40 rows"},
	})
	// A request without session_id from before this runner's start (by the
	// filesystem's clock) is stale.
	seq++
	oldName := protocol.RequestName(seq, fmt.Sprintf("q%d", seq))
	tmp := filepath.Join(h.dir, protocol.DirCtl, ".old")
	body := fmt.Sprintf(`{"req_id":"q%d","seq":%d,"op":"cancel","scope":"current"}`, seq, seq)
	if err := os.WriteFile(tmp, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	hourAgo := time.Now().Add(-time.Hour)
	if err := os.Chtimes(tmp, hourAgo, hourAgo); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(h.dir, protocol.DirCtl, oldName)); err != nil {
		t.Fatal(err)
	}
	if rep := h.reply(oldName); rep.Outcome != protocol.OutcomeStale || !strings.Contains(rep.Message, "before this runner started") {
		t.Errorf("old request: %+v", rep)
	}
	// Names that are requests but not well formed, and a request written as
	// a directory, a symlink, too large, or not JSON at all.
	h.writeFile("ctl/req_bad.json", `{}`)
	seq++
	dirName := protocol.RequestName(seq, "dir")
	if err := os.MkdirAll(filepath.Join(h.dir, protocol.DirCtl, ".d", "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(h.dir, protocol.DirCtl, ".d"), filepath.Join(h.dir, protocol.DirCtl, dirName)); err != nil {
		t.Fatal(err)
	}
	if rep := h.reply(dirName); rep.Outcome != protocol.OutcomeRejected || !strings.Contains(rep.Message, "regular file") {
		t.Errorf("directory: %+v", rep)
	}
	seq++
	linkName := protocol.RequestName(seq, "link")
	if err := os.Symlink("/dev/zero", filepath.Join(h.dir, protocol.DirCtl, linkName)); err != nil {
		t.Fatal(err)
	}
	if rep := h.reply(linkName); rep.Outcome != protocol.OutcomeRejected {
		t.Errorf("symlink: %+v", rep)
	}
	seq++
	bigName := protocol.RequestName(seq, "big")
	h.writeFile(rel(protocol.DirCtl, bigName), `{"pad":"`+strings.Repeat("x", protocol.MaxRequestSize)+`"}`)
	if rep := h.reply(bigName); rep.Outcome != protocol.OutcomeRejected || !strings.Contains(rep.Message, "larger") {
		t.Errorf("too large: %+v", rep)
	}
	seq++
	junkName := protocol.RequestName(seq, "junk")
	h.writeFile(rel(protocol.DirCtl, junkName), `{"op":"cancel",`)
	if rep := h.reply(junkName); rep.Outcome != protocol.OutcomeRejected || !strings.Contains(rep.Message, "JSON") {
		t.Errorf("half a file: %+v", rep)
	}
	stop := req(protocol.OpStop, map[string]any{"mode": "graceful", "session_id": sid})
	if stop.Outcome != protocol.OutcomeAccepted {
		t.Errorf("stop: %+v", stop)
	}
	if err := h.waitExit(); err != nil {
		t.Fatal(err)
	}
	evs := h.events()
	for _, id := range []string{"q1", "q2", "q3", "q4", "q5", "q6", "q7", "q8", "q9", "q10", "q11", "q12", "q13", stop.ReqID, "dir", "link", "big", "junk"} {
		if n := len(requestEvents(evs, id)); n != 1 {
			t.Errorf("request %s has %d events, want exactly one", id, n)
		}
	}
	for _, e := range requestEvents(evs, "q9") {
		if e.Event != protocol.EvInput || strings.Contains(fmt.Sprint(e.Detail), "c2VjcmV0") {
			t.Errorf("secret send event: %+v", e)
		}
	}
	bad := 0
	for _, e := range evs {
		if e.Event == protocol.EvRequestRejected && e.Detail["file"] == "ctl/req_bad.json" {
			bad++
		}
	}
	if bad != 1 {
		t.Errorf("req_bad.json: %d events", bad)
	}
	names, _ := readNames(filepath.Join(h.dir, protocol.DirCtl))
	if !slices.Equal(names, []string{"ack"}) {
		t.Errorf("ctl/ after stop: %v, want only ack/", names)
	}
	invariants(t, h.dir)
}

// A malformed legacy request does nothing but report (it never
// falls back to the running command), and a ts without offset neither
// redirects a cancel nor turns a force stop into a graceful one.
func TestLegacyMalformedDoesNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t).start()
	a := h.submit("puts go; flush stdout; after 60000")
	b := h.submit("puts never")
	h.waitFor("a running", func() bool { return strings.Contains(readFile(h, a), "go") })
	for i, body := range []string{
		`{"scope":"everything","cmd_id":"c2"}`,
		`{"scope":"cmd_id","cmd_id":null}`,
		`{"cmd_id":null}`,
		`{"cmd_id":7}`,
		`{}`,
		`{"cmd_id":"c2","ts":"tomorrow"}`,
		`cancel it please`,
	} {
		h.writeFile(protocol.FileCancel, body)
		h.waitFor("rejection event", func() bool { return countOutcome(h.events(), protocol.EvCancel, "rejected") == i+1 })
	}
	for i, body := range []string{`{"mode":"now"}`, `{"mode":"force","ts":"soon"}`} {
		h.writeFile(protocol.FileStop, body)
		h.waitFor("stop rejection", func() bool { return countOutcome(h.events(), protocol.EvStop, "rejected") == i+1 })
	}
	if st := h.state(); st.Phase != protocol.PhaseBusy || st.CurrentCmdID == nil || *st.CurrentCmdID != "c1" {
		t.Fatalf("a malformed request changed the runner: %+v", st)
	}
	// A valid cancel naming the queued command, with an ISO ts without
	// offset, cancels that one and not the running one.
	h.writeFile(protocol.FileCancel, `{"scope":"cmd_id","cmd_id":"c2","ts":"2024-02-06T12:05:23"}`)
	if r := h.result(b); r.Status != protocol.StatusCancelled || r.ExitReason != protocol.ReasonCancelledQueued {
		t.Fatalf("%+v", r)
	}
	// A force stop with an offset-less ts is a force stop.
	h.writeFile(protocol.FileStop, `{"mode":"force","ts":"2024-02-06T12:05:23"}`)
	if r := h.result(a); r.Status != protocol.StatusCancelled || r.ExitReason != protocol.ReasonForceStop {
		t.Fatalf("force stop with an ISO ts: %+v", r)
	}
	if err := h.waitExit(); err != nil {
		t.Fatal(err)
	}
	for _, e := range h.events() {
		if (e.Event == protocol.EvCancel || e.Event == protocol.EvStop) && e.Detail["file"] != nil {
			if e.SpoolOffset == nil || e.Detail["message"] == "" {
				t.Errorf("legacy event without spool_offset or message: %+v", e)
			}
		}
	}
	invariants(t, h.dir)
}

func countOutcome(evs []protocol.Event, name, outcome string) int {
	n := 0
	for _, e := range evs {
		if e.Event == name && e.Detail["outcome"] == outcome {
			n++
		}
	}
	return n
}

// A stop request left behind while no runner ran (a
// legacy stop.json, or a mailbox stop without session_id) is older than
// the next runner's start and does not stop it; one naming another runner
// session does not either.
func TestStaleStopDoesNotStopNextRunner(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.writeFile(protocol.FileStop, "")
	h.request(1, "old-stop", protocol.OpStop, map[string]any{"mode": "force"})
	h.request(2, "other-session", protocol.OpStop, map[string]any{"session_id": "session_20200101_000000_deadbeef"})
	h.start()
	if rep := h.reply(protocol.RequestName(1, "old-stop")); rep.Outcome != protocol.OutcomeStale || !strings.Contains(rep.Message, "before this runner started") {
		t.Errorf("%+v", rep)
	}
	if rep := h.reply(protocol.RequestName(2, "other-session")); rep.Outcome != protocol.OutcomeStale {
		t.Errorf("%+v", rep)
	}
	h.waitFor("stop.json consumed", func() bool {
		_, err := os.Lstat(filepath.Join(h.dir, protocol.FileStop))
		return os.IsNotExist(err)
	})
	if r := h.result(h.submit("expr 6*7")); r.Status != protocol.StatusOK || *r.Value != "42" {
		t.Fatalf("the runner did not serve after a stale stop: %+v", r)
	}
	if st := h.state(); st.Phase == protocol.PhaseStopping || st.Phase == protocol.PhaseStopped {
		t.Fatalf("stale stop stopped the runner: %+v", st)
	}
	if n := countOutcome(h.events(), protocol.EvStop, "stale"); n != 3 {
		t.Errorf("%d stale stop events, want 3", n)
	}
	// The same for a file with an mtime far in the past.
	old := time.Now().Add(-time.Hour)
	p := filepath.Join(h.dir, protocol.DirTmp, "..", "ctl", ".stop")
	if err := os.WriteFile(p, []byte(`{"mode":"force"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, old, old); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p, filepath.Join(h.dir, protocol.FileStop)); err != nil {
		t.Fatal(err)
	}
	h.waitFor("old stop.json judged", func() bool { return countOutcome(h.events(), protocol.EvStop, "stale") == 4 })
	if r := h.result(h.submit("expr 1")); r.Status != protocol.StatusOK {
		t.Fatalf("%+v", r)
	}
	h.stop(protocol.StopGraceful)
}

// A directory, FIFO or symlink where a legacy file belongs is rejected and
// moved out of the way; nothing is cancelled or stopped and no name is left
// behind in ctl/.
func TestLegacySpecialFiles(t *testing.T) {
	t.Parallel()
	h := newHarness(t).start()
	a := h.submit("puts go; flush stdout; after 60000")
	h.waitFor("a running", func() bool { return strings.Contains(readFile(h, a), "go") })
	cancel, stop := filepath.Join(h.dir, protocol.FileCancel), filepath.Join(h.dir, protocol.FileStop)
	plant := []func() error{
		func() error {
			d := filepath.Join(h.dir, protocol.DirCtl, ".d")
			if err := os.MkdirAll(filepath.Join(d, "inside"), 0o700); err != nil {
				return err
			}
			return os.Rename(d, cancel)
		},
		func() error { return syscall.Mkfifo(cancel, 0o600) },
		func() error { return os.Symlink("/dev/zero", cancel) },
		func() error { return syscall.Mkfifo(stop, 0o600) },
		func() error { return os.Mkdir(stop, 0o700) },
		func() error {
			return writeAtomic(cancel, []byte(strings.Repeat(" ", maxLegacySize+1)))
		},
	}
	for i, p := range plant {
		if err := p(); err != nil {
			t.Fatal(err)
		}
		h.waitFor("rejection", func() bool {
			evs := h.events()
			return countOutcome(evs, protocol.EvCancel, "rejected")+countOutcome(evs, protocol.EvStop, "rejected") == i+1
		})
		h.waitFor("moved away", func() bool {
			_, e1 := os.Lstat(cancel)
			_, e2 := os.Lstat(stop)
			return os.IsNotExist(e1) && os.IsNotExist(e2)
		})
	}
	if st := h.state(); st.Phase != protocol.PhaseBusy {
		t.Fatalf("%+v", st)
	}
	names, _ := readNames(filepath.Join(h.dir, protocol.DirCtl))
	if !slices.Equal(names, []string{"ack"}) {
		t.Errorf("ctl/: %v", names)
	}
	h.writeFile(protocol.FileCancel, "")
	if r := h.result(a); r.Status != protocol.StatusCancelled {
		t.Fatalf("%+v", r)
	}
	h.stop(protocol.StopGraceful)
	invariants(t, h.dir)
}

// A request still being written holds back the requests behind it (order is
// part of the contract) until it is complete or stays unchanged for
// --parse-grace; names that are not requests are left alone; a reply whose
// write fails is retried without acting again.
func TestMailboxOrderRetryAndStrangers(t *testing.T) {
	t.Parallel()
	h := newHarness(t).start()
	h.result(h.submit("expr 1"))
	h.writeFile("ctl/notes.txt", "not a request")
	// seq 1 written non-atomically and never finished; seq 2 complete.
	p1 := filepath.Join(h.dir, protocol.DirCtl, protocol.RequestName(1, "slow"))
	if err := os.WriteFile(p1, []byte(`{"req_id":"slow","seq":1,`), 0o600); err != nil {
		t.Fatal(err)
	}
	second := h.request(2, "fast", protocol.OpCancel, map[string]any{"scope": "current"})
	if rep := h.reply(protocol.RequestName(1, "slow")); rep.Outcome != protocol.OutcomeRejected {
		t.Errorf("%+v", rep)
	}
	if rep := h.reply(second); rep.Outcome != protocol.OutcomeIdle {
		t.Errorf("%+v", rep)
	}
	var order []string
	for _, e := range h.events() {
		if id, ok := e.Detail["req_id"].(string); ok {
			order = append(order, id)
		}
	}
	if !slices.Equal(order, []string{"slow", "fast"}) {
		t.Errorf("events in order %v", order)
	}
	// ctl/ack/ replaced by a file while a command runs: the reply cannot be
	// written; the cancel acts once, and the reply appears once ack/ is
	// back. (The command starts first: a heartbeat that sees the file
	// puts the runner in phase error, where no command starts.)
	a := h.submit("puts go; flush stdout; after 60000")
	h.waitFor("a running", func() bool { return strings.Contains(readFile(h, a), "go") })
	ack := filepath.Join(h.dir, protocol.DirAck)
	if err := os.Rename(ack, ack+".away"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ack, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	name := h.request(3, "blocked", protocol.OpCancel, map[string]any{"cmd_id": "c2"})
	if r := h.result(a); r.Status != protocol.StatusCancelled {
		t.Fatalf("%+v", r)
	}
	if _, err := os.Lstat(filepath.Join(h.dir, protocol.DirCtl, name)); err != nil {
		t.Fatalf("the request went before its reply was written: %v", err)
	}
	if err := os.Remove(ack); err != nil {
		t.Fatal(err)
	}
	// Put the old ack/ back, unless the runner's layout check made a new
	// one first (a heartbeat may come between the two calls; the reply
	// may already be in it).
	if err := os.Rename(ack+".away", ack); err != nil {
		if !errors.Is(err, fs.ErrExist) && !errors.Is(err, syscall.ENOTEMPTY) {
			t.Fatal(err)
		}
		if err := os.RemoveAll(ack + ".away"); err != nil {
			t.Fatal(err)
		}
	}
	if rep := h.reply(name); rep.Outcome != protocol.OutcomeCancelledRunning {
		t.Errorf("%+v", rep)
	}
	h.stop(protocol.StopGraceful)
	if n := len(requestEvents(h.events(), "blocked")); n != 1 {
		t.Errorf("%d events for the blocked reply's request", n)
	}
	if _, err := os.Stat(filepath.Join(h.dir, "ctl/notes.txt")); err != nil {
		t.Errorf("a stranger in ctl/ was touched: %v", err)
	}
}

// A cancel of a queued command while queue/ cannot be listed is answered
// with what went wrong (rejected, naming the error), never not_found: the
// runner could not look, and a master must not report the command as
// unknown. Once queue/ can be listed again the same cancel acts.
func TestCancelWhenQueueCannotBeListed(t *testing.T) {
	t.Parallel()
	var broken atomic.Bool
	h := newHarness(t, func(c *Config) {
		c.listQueue = func(dir string) ([]string, error) {
			if broken.Load() {
				return nil, fmt.Errorf("open %s: %w", dir, syscall.EIO)
			}
			return readNames(dir)
		}
	}).start()
	running := h.submit("puts started; flush stdout; after 60000")
	h.waitFor("running", func() bool { s := h.state(); return s.CurrentCmdID != nil && *s.CurrentCmdID == "c"+fmt.Sprint(h.seq) })
	queued := h.submit("expr 3")
	id := fmt.Sprintf("c%d", h.seq)
	broken.Store(true)
	rep := h.reply(h.request(1, "q1", protocol.OpCancel, map[string]any{"cmd_id": id}))
	if rep.Outcome != protocol.OutcomeRejected || !strings.Contains(rep.Message, "queue/ cannot be listed") || !strings.Contains(rep.Message, syscall.EIO.Error()) {
		t.Fatalf("cancel while queue/ cannot be listed: %+v, want rejected naming the error", rep)
	}
	broken.Store(false)
	if rep := h.reply(h.request(2, "q2", protocol.OpCancel, map[string]any{"cmd_id": id})); rep.Outcome != protocol.OutcomeCancelledQueued {
		t.Fatalf("cancel once queue/ lists again: %+v", rep)
	}
	if r := h.result(queued); r.Status != protocol.StatusCancelled {
		t.Fatalf("queued: %+v", r)
	}
	h.request(3, "r", protocol.OpCancel, map[string]any{"cmd_id": fmt.Sprintf("c%d", h.seq-1)})
	h.result(running)
}

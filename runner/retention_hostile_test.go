package runner

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
)

// Retention against what a long-lived session meets: retried cmd_ids,
// runners whose clocks disagree, a damaged or replaced pruned index
// (PROTOCOL.md sections 21 and 23). Each test failed before its fix.

// again starts a second runner on h's session with cfg.
func (h *harness) again(cfg Config) *harness {
	h2 := &harness{t: h.t, dir: h.dir, cfg: cfg, errc: make(chan error, 1), sigs: make(chan os.Signal, 2), seq: h.seq, logw: h.logw, noCheck: h.noCheck}
	h.t.Cleanup(h2.shutdown)
	return h2.start()
}

// beats waits until the runner has written n more heartbeats: every
// heartbeat's work (retention's included) ran at least n-1 times since.
func (h *harness) beats(n int64) {
	h.t.Helper()
	counter := func() int64 {
		b, err := os.ReadFile(filepath.Join(h.dir, protocol.FileHeartbeat))
		if err != nil {
			return -1
		}
		var hb protocol.Heartbeat
		if json.Unmarshal(b, &hb) != nil {
			return -1
		}
		return hb.Counter
	}
	from := counter()
	h.waitFor(fmt.Sprintf("%d heartbeats", n), func() bool { return counter() >= from+n })
}

// prunedAway waits until name is in the index and its result is gone.
func (h *harness) prunedAway(name string) {
	h.t.Helper()
	h.waitFor(name+" pruned", func() bool {
		_, ok := prunedLines(h.t, h.dir)[name]
		_, err := os.Lstat(filepath.Join(h.dir, protocol.DirResult, name))
		return ok && os.IsNotExist(err)
	})
}

// A cmd_id retried (its duplicate_cmd_id refusal is a result under a new
// seq) has two lines in the index once both are pruned, in one generation
// or in two. A command file dropped again under either pruned name is
// removed unread and gets no second result. Before, only the line the
// lookup by cmd_id found was compared: the newer generation's, or the
// lowest seq's.
func TestRetentionRedropOfEitherPrunedName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		keepIDs int
		redrop  string // which name is dropped again: "original" or "refusal"
	}{
		{"original, lines in two generations", 2, "original"},
		{"refusal, lines in one generation", 0, "refusal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, keepLast(1), func(c *Config) {
				if tc.keepIDs > 0 {
					c.KeepIDs = tc.keepIDs
				}
			})
			h.noCheck = true // The re-dropped file is the test's, not a master's.
			h.start()
			a := h.submit("puts A")
			h.result(a)
			_, idA, _ := protocol.ParseCommandName(a)
			b := h.submit("puts B")
			h.result(b)
			h.prunedAway(a)
			d := h.submit("puts dup", func(c *protocol.Command) { c.CmdID = idA })
			if r := h.result(d); r.Error == nil || r.Error.Code != protocol.CodeDuplicateCmdID {
				t.Fatalf("the retry: %+v, want duplicate_cmd_id", r)
			}
			h.prunedAway(b)
			e := h.submit("puts E")
			h.result(e)
			h.prunedAway(d)
			again := map[string]string{"original": a, "refusal": d}[tc.redrop]
			seq, _, _ := protocol.ParseCommandName(again)
			h.writeFile(rel(protocol.DirQueue, again), fmt.Sprintf(`{"cmd_id":%q,"seq":%d,"kind":"tcl","payload":"puts REDROP"}`, idA, seq))
			h.waitFor("the re-drop handled", func() bool {
				_, err := os.Lstat(filepath.Join(h.dir, protocol.DirQueue, again))
				return os.IsNotExist(err)
			})
			f := h.submit("puts F") // Queued after the re-drop: its result comes after the re-drop was dealt with.
			h.result(f)
			if b, err := os.ReadFile(filepath.Join(h.dir, protocol.DirResult, again)); err == nil {
				t.Fatalf("the pruned name %s, dropped again, got a second result:\n%s", again, b)
			}
			skipped := false
			for _, ev := range h.events() {
				if ev.Event == protocol.EvSkipped && ev.Detail["file"] == rel(protocol.DirQueue, again) && ev.Detail["reason"] == "result pruned" {
					skipped = true
				}
			}
			if !skipped {
				t.Errorf("no cmd_skipped event for %s", again)
			}
			h.stop(protocol.StopGraceful)
		})
	}
}

// shiftEndTS moves result/<name>'s end_ts by d: what a runner whose clock
// was d ahead wrote (the session restarted on another host, or the clock
// stepped back between two runners).
func shiftEndTS(t *testing.T, dir, name string, d time.Duration) {
	t.Helper()
	p := filepath.Join(dir, protocol.DirResult, name)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	ts, err := time.Parse(time.RFC3339Nano, m["end_ts"].(string))
	if err != nil {
		t.Fatal(err)
	}
	m["end_ts"] = ts.Add(d).UTC().Format("2006-01-02T15:04:05.000Z")
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// Results whose end_ts order is not their spool order (the first runner's
// clock an hour ahead): nothing is to be pruned, so nothing of the spool
// may be cut. Before, the cut was taken below the first entry in age
// order, and two kept commands' spool ranges read as zeros.
func TestRetentionSpoolCutWithSkewedClocks(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.noCheck = true // Results edited by hand.
	h.start()
	big1 := h.submit("puts [string repeat A 700000]")
	big2 := h.submit("puts [string repeat B 700000]")
	small := h.submit("puts small")
	h.result(small)
	h.stop(protocol.StopGraceful)
	shiftEndTS(t, h.dir, big1, time.Hour)
	shiftEndTS(t, h.dir, big2, time.Hour)
	cfg := h.cfg
	cfg.KeepLast = 100
	h2 := h.again(cfg)
	h2.beats(3)
	st := h2.state()
	h2.stop(protocol.StopGraceful)
	if st.Retention == nil {
		t.Fatal("no retention in state.json")
	}
	spool, err := os.ReadFile(filepath.Join(h.dir, protocol.FileSpool))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{big1, big2, small} {
		r := readResult(t, h.dir, name)
		if st.Retention.SpoolCut > r.SpoolStart {
			t.Errorf("spool cut at %d, but kept %s needs %d..%d", st.Retention.SpoolCut, name, r.SpoolStart, r.SpoolEnd)
		}
		if bytes.Count(spool[r.SpoolStart:r.SpoolEnd], []byte{0}) > 0 {
			t.Errorf("kept %s's spool range %d..%d holds zeros (punched)", name, r.SpoolStart, r.SpoolEnd)
		}
	}
}

// One result with an end_ts an hour ahead (the same skew) no longer stops
// retention: its age counts from when this runner found it. Before, it
// sorted last, came to the front once the others left, and the grace test
// ended every pass there: --keep-last 1 kept every new result.
func TestRetentionFutureEndTS(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.noCheck = true
	h.start()
	a := h.submit("puts a")
	h.result(a)
	h.stop(protocol.StopGraceful)
	shiftEndTS(t, h.dir, a, time.Hour)
	cfg := h.cfg
	cfg.KeepLast, cfg.PruneGrace = 1, -1
	h2 := h.again(cfg)
	var last string
	for i := range 10 {
		last = h2.submit(fmt.Sprintf("puts n%d", i))
	}
	h2.result(last)
	h2.waitFor("at most 2 results kept (--keep-last 1, and the newest while its batch runs)", func() bool {
		return len(names(t, h.dir, protocol.DirResult)) <= 2
	})
	e, ok := prunedLines(t, h.dir)[a]
	h2.stop(protocol.StopGraceful)
	if !ok {
		t.Fatalf("%s (end_ts ahead) not in the index", a)
	}
	if r := time.Until(e.EndTS); r < 30*time.Minute {
		t.Errorf("the index line of %s says end_ts %s: want the result's own end_ts (an hour ahead), not the time it was found", a, e.EndTS)
	}
}

// A torn tail of log/pruned.log is cut back to the last whole line,
// however long it is. Before, only the last 64 KiB were looked at, and a
// longer tail was cut inside the garbage: the next line appended was glued
// to it and lost.
func TestCutTornLine(t *testing.T) {
	t.Parallel()
	good := "cmd_0000000001_a1.json ok 2026-12-07T10:46:16.167Z\n"
	for _, tc := range []struct {
		name, data, want string
	}{
		{"whole lines", good + good, good + good},
		{"short torn tail", good + "cmd_00000", good},
		{"torn tail longer than a window", good + strings.Repeat("\x00", 100_000), good},
		{"torn tail of exactly a window", good + strings.Repeat("G", 64<<10), good},
		{"lines beyond the first window", strings.Repeat(good, 3000) + strings.Repeat("x", 70_000), strings.Repeat(good, 3000)},
		{"no newline at all", strings.Repeat("G", 200_000), ""},
		{"empty", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "pruned.log")
			if err := os.WriteFile(p, []byte(tc.data), 0o600); err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(p, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := cutTornLine(f); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("after cutTornLine: %d bytes, want %d", len(got), len(tc.want))
			}
		})
	}
}

// log/pruned.log deleted or renamed (a log rotation job) while the runner
// runs: the runner writes it back from the file it holds open, so every
// pruned cmd_id stays in it, and says so. Replaced by a FIFO: nothing is
// removed, a warning says why, and once the FIFO is gone the runner writes
// its copy back and goes on. Before, the pruner went on appending to the
// deleted file and removing results: their cmd_ids were in no file, and
// after a restart they ran again.
func TestRetentionIndexGoneWhileRunning(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"deleted", "renamed", "fifo"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, keepLast(1))
			h.noCheck = how == "renamed" // The renamed copy is the test's file in log/.
			h.start()
			a := h.submit("puts a")
			h.result(a)
			b := h.submit("puts b")
			h.result(b)
			h.prunedAway(a)
			idx := filepath.Join(h.dir, protocol.FilePruned)
			switch how {
			case "deleted":
				if err := os.Remove(idx); err != nil {
					t.Fatal(err)
				}
			case "renamed":
				if err := os.Rename(idx, idx+".2026-12-07"); err != nil {
					t.Fatal(err)
				}
			case "fifo":
				if err := os.Remove(idx); err != nil {
					t.Fatal(err)
				}
				if err := syscall.Mkfifo(idx, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			c := h.submit("puts c")
			h.result(c)
			if how == "fifo" {
				h.waitFor("a warning that nothing is removed", func() bool {
					for _, e := range h.events() {
						if msg, _ := e.Detail["error"].(string); e.Event == protocol.EvWarning && strings.Contains(msg, "a FIFO") {
							return true
						}
					}
					return false
				})
				h.beats(3)
				for _, n := range []string{b, c} {
					if _, err := os.Lstat(filepath.Join(h.dir, protocol.DirResult, n)); err != nil {
						t.Fatalf("%s's result removed while log/pruned.log is a FIFO: %v", n, err)
					}
				}
				if err := os.Remove(idx); err != nil {
					t.Fatal(err)
				}
			}
			h.prunedAway(b)
			lines := prunedLines(t, h.dir)
			for _, n := range []string{a, b} {
				if _, ok := lines[n]; !ok {
					t.Errorf("%s is not in the index written back: %v", n, lines)
				}
			}
			// The pruner removes the files before the owner logs the batch.
			h.waitFor("a warning event that the index was written back", func() bool {
				for _, e := range h.events() {
					if msg, _ := e.Detail["retention"].(string); e.Event == protocol.EvWarning && strings.Contains(msg, "written back") {
						return true
					}
				}
				return false
			})
			h.stop(protocol.StopGraceful)
			_, idA, _ := protocol.ParseCommandName(a)
			h2 := h.again(h.cfg)
			if r := h2.result(h2.submit("puts again", func(c *protocol.Command) { c.CmdID = idA })); r.Error == nil || r.Error.Code != protocol.CodeDuplicateCmdID {
				t.Errorf("%s's cmd_id, pruned before the index was %s, ran again after a restart: %+v", a, how, r)
			}
			h2.stop(protocol.StopGraceful)
		})
	}
}

// log/pruned.log.1, the index's older generation, deleted while the runner
// runs: the runner writes it back from the copy it holds open (the file it
// rotated), so its cmd_ids stay refused, also after a restart. Before, only
// log/pruned.log was watched, and those cmd_ids were free again.
func TestRetentionOldIndexGoneWhileRunning(t *testing.T) {
	t.Parallel()
	h := newHarness(t, keepLast(1), func(c *Config) { c.KeepIDs = 2 })
	h.start()
	var cmds []string
	for i, p := range []string{"puts a", "puts b", "puts c", "puts d"} {
		n := h.submit(p)
		h.result(n)
		cmds = append(cmds, n)
		if i > 0 {
			h.prunedAway(cmds[i-1]) // One batch each: a and b fill a generation, c starts the next.
		}
	}
	a, b := cmds[0], cmds[1]
	old := filepath.Join(h.dir, protocol.FilePrunedOld)
	b0, err := os.ReadFile(old)
	if err != nil || !bytes.Contains(b0, []byte(a)) {
		cur, _ := os.ReadFile(filepath.Join(h.dir, protocol.FilePruned))
		t.Logf("log/: %v; %s: %q", names(t, h.dir, protocol.DirLog), protocol.FilePruned, cur)
		t.Fatalf("%s after a rotation: %q, %v; want %s in it", protocol.FilePrunedOld, b0, err, a)
	}
	if err := os.Remove(old); err != nil {
		t.Fatal(err)
	}
	e := h.submit("puts e")
	h.result(e)
	h.prunedAway(cmds[3])
	h.waitFor("a warning event that pruned.log.1 was written back", func() bool {
		for _, ev := range h.events() {
			if msg, _ := ev.Detail["retention"].(string); ev.Event == protocol.EvWarning && strings.Contains(msg, protocol.FilePrunedOld+" was gone") {
				return true
			}
		}
		return false
	})
	lines := prunedLines(t, h.dir)
	for _, n := range []string{a, b} {
		if _, ok := lines[n]; !ok {
			t.Errorf("%s is not in the index written back: %v", n, lines)
		}
	}
	h.stop(protocol.StopGraceful)
	_, idA, _ := protocol.ParseCommandName(a)
	// A larger --keep-ids now: with 2, pruning the refusal's neighbours
	// would rotate a and b out of the index (as documented) before the
	// session check reads it.
	cfg := h.cfg
	cfg.KeepIDs = 100
	h2 := h.again(cfg)
	if r := h2.result(h2.submit("puts again", func(c *protocol.Command) { c.CmdID = idA })); r.Error == nil || r.Error.Code != protocol.CodeDuplicateCmdID {
		t.Errorf("%s's cmd_id, pruned before %s was deleted, ran again after a restart: %+v", a, protocol.FilePrunedOld, r)
	}
	h2.stop(protocol.StopGraceful)
}

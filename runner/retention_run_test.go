package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/skillpilot/skillpilot/protocol"
)

// Retention against a real tclsh (PROTOCOL.md section 23).

func keepLast(n int) func(*Config) {
	return func(c *Config) { c.KeepLast, c.PruneGrace = n, -1 }
}

func names(t testing.TB, dir, sub string) []string {
	t.Helper()
	es, err := os.ReadDir(filepath.Join(dir, sub))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		if !strings.HasPrefix(e.Name(), ".") {
			out = append(out, e.Name())
		}
	}
	return out
}

func prunedLines(t testing.TB, dir string) map[string]protocol.PrunedEntry {
	t.Helper()
	out := map[string]protocol.PrunedEntry{}
	for _, f := range []string{protocol.FilePrunedOld, protocol.FilePruned} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
			if l == "" {
				continue
			}
			e, err := protocol.ParsePrunedLine([]byte(l))
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			out[e.Name] = e
		}
	}
	return out
}

// Every command has exactly one outcome, a kept result or a line of the
// pruned index (never both, never neither), and at most keep results stay
// (plus what the last batch had not reached yet).
func TestRetentionKeepLast(t *testing.T) {
	t.Parallel()
	h := newHarness(t, keepLast(3)).start()
	var all []string
	for i := 0; i < 40; i++ {
		all = append(all, h.submit(fmt.Sprintf("puts line-%d", i)))
	}
	last := h.result(all[len(all)-1])
	if last.Status != protocol.StatusOK {
		t.Fatalf("%+v", last)
	}
	// A command's result leaves first, then its output and command file.
	h.waitFor("pruning down to 3 commands", func() bool {
		return len(names(t, h.dir, protocol.DirResult)) == 3 && len(names(t, h.dir, protocol.DirOutput)) == 3 &&
			len(names(t, h.dir, protocol.DirArchive)) == 3
	})
	pruned := prunedLines(t, h.dir)
	kept := names(t, h.dir, protocol.DirResult)
	for _, n := range all {
		_, p := pruned[n]
		k := slices.Contains(kept, n)
		if p == k {
			t.Errorf("%s: pruned %v, kept %v: want exactly one", n, p, k)
		}
		if p && pruned[n].Status != protocol.StatusOK {
			t.Errorf("%s: index says %q", n, pruned[n].Status)
		}
	}
	for i, n := range all[len(all)-3:] {
		if !slices.Contains(kept, n) {
			t.Errorf("the newest results are not the ones kept: %v (want %v, #%d)", kept, all[len(all)-3:], i)
		}
	}
	if outs := names(t, h.dir, protocol.DirOutput); len(outs) != 3 {
		t.Errorf("output/ holds %v", outs)
	}
	if arch := names(t, h.dir, protocol.DirArchive); len(arch) != 3 {
		t.Errorf("archive/ holds %v", arch)
	}
	h.waitFor("state.json to say so", func() bool { st := h.state(); return st.Retention != nil && st.Retention.Pruned == 37 })
	st := h.state()
	if st.Retention.KeepLast != 3 || st.Retention.Kept != 3 {
		t.Errorf("state.json retention %+v", st.Retention)
	}
	if st.CommandsDone != 40 {
		t.Errorf("commands_done %d", st.CommandsDone)
	}
	n := 0
	for _, e := range h.events() {
		if e.Event == protocol.EvPruned {
			n += int(e.Detail["commands"].(float64))
		}
	}
	if n != 37 {
		t.Errorf("pruned events count %d commands", n)
	}
	h.stop(protocol.StopGraceful)
}

// A cmd_id whose result was pruned is still refused: under another seq
// with duplicate_cmd_id (context pruned: true), under its own name as a
// re-drop (cmd_skipped "result pruned", no second result); a cancel of it
// says already_finished. Across a restart too, from log/pruned.log alone.
func TestRetentionDuplicatesAcrossPrune(t *testing.T) {
	t.Parallel()
	h := newHarness(t, keepLast(1)).start()
	first := h.submit("puts first")
	h.result(first)
	second := h.submit("puts second")
	h.result(second)
	h.waitFor("first pruned", func() bool {
		_, ok := prunedLines(t, h.dir)[first]
		_, err := os.Stat(filepath.Join(h.dir, protocol.DirResult, first))
		return ok && os.IsNotExist(err) // Its line first, then its files.
	})
	check := func(h *harness, round, first string) {
		t.Helper()
		seq, id, _ := protocol.ParseCommandName(first)
		h.waitFor(round+": "+first+" pruned", func() bool { _, ok := prunedLines(t, h.dir)[first]; return ok })
		dup := h.submit("puts again", func(c *protocol.Command) { c.CmdID = id })
		r := h.result(dup)
		if r.Error == nil || r.Error.Code != protocol.CodeDuplicateCmdID || r.Error.Context["pruned"] != true ||
			r.Error.Context["other_result"] != "result/"+first {
			t.Fatalf("%s: duplicate across a prune: %+v", round, r.Error)
		}
		// The very file again, under its old name: a re-drop.
		h.writeFile(rel(protocol.DirQueue, first), fmt.Sprintf(`{"cmd_id":%q,"seq":%d,"kind":"tcl","payload":"puts third"}`, id, seq))
		h.waitFor(round+": re-drop skipped", func() bool {
			for _, e := range h.events() {
				if e.Event == protocol.EvSkipped && e.CmdID == id && e.Detail["reason"] == "result pruned" {
					return true
				}
			}
			return false
		})
		if _, err := os.Stat(filepath.Join(h.dir, protocol.DirResult, first)); !os.IsNotExist(err) {
			t.Fatalf("%s: a re-drop of a pruned name got a second result", round)
		}
		h.writeFile(rel(protocol.DirCtl, protocol.RequestName(int64(100+len(round)), "r"+round)),
			fmt.Sprintf(`{"op":"cancel","req_id":"r%s","seq":%d,"cmd_id":%q}`, round, 100+len(round), id))
		ack := filepath.Join(h.dir, protocol.DirAck, protocol.RequestName(int64(100+len(round)), "r"+round))
		h.waitFor(round+": cancel answered", func() bool { _, err := os.Stat(ack); return err == nil })
		var rep protocol.ControlReply
		b, _ := os.ReadFile(ack)
		if json.Unmarshal(b, &rep) != nil || rep.Outcome != protocol.OutcomeAlreadyFinished {
			t.Errorf("%s: cancel of a pruned command: %s", round, b)
		}
	}
	check(h, "first", first)
	h.stop(protocol.StopGraceful)
	h2 := &harness{t: t, dir: h.dir, cfg: h.cfg, errc: make(chan error, 1), sigs: make(chan os.Signal, 2), seq: h.seq, logw: h.logw}
	h2.start()
	check(h2, "second", second) // From log/pruned.log alone: the first runner pruned it.
	h2.stop(protocol.StopGraceful)
	h.submitted = append(h.submitted, h2.submitted...)
}

// The event log rotates (a hard cap), the spool is cut below the oldest
// kept command, and every kept command can still be replayed from
// meta.log.1, meta.log and session.out (the session check holds it to that).
func TestRetentionRotatesAndCuts(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) {
		c.KeepLast, c.PruneGrace, c.MaxMetaBytes = 4, -1, 2*minMetaSegment
	}).start()
	var last string
	for i := 0; i < 300; i++ { // 300 × 20 KB: past punchStep many times; ~1,000 events of ~300 bytes each.
		last = h.submit(fmt.Sprintf("puts [string repeat %c 20000]", 'a'+i%26))
	}
	h.resultAfterBacklog(last)
	var used, size int64
	h.waitFor("the spool cut down to what the kept commands need, the event log rotated", func() bool {
		st := h.state()
		_, err := os.Stat(filepath.Join(h.dir, protocol.FileMetaOld))
		fi, serr := os.Stat(filepath.Join(h.dir, protocol.FileSpool))
		if serr != nil {
			t.Fatal(serr)
		}
		used, size = fi.Sys().(*syscall.Stat_t).Blocks*512, fi.Size()
		return st.Retention != nil && st.Retention.SpoolCut > 0 && err == nil && len(names(t, h.dir, protocol.DirResult)) <= 4 &&
			used <= 2*(5*20_000+punchStep)
	})
	if size < 300*20_000 {
		t.Errorf("the spool's size is %d: its offsets moved", size)
	}
	// A rotation may be under way (the last prune batch can start one):
	// meta.log is renamed to meta.log.1 before the new file gets its
	// log_rotated event, so wait for the event rather than reading once.
	h.waitFor("a log_rotated event at the head of meta.log", func() bool {
		for _, e := range readEventsLoose(h.dir) {
			if e.Event == protocol.EvLogRotated {
				return true
			}
		}
		return false
	})
	for _, n := range names(t, h.dir, protocol.DirResult) {
		r := h.result(n)
		spool, _ := os.ReadFile(filepath.Join(h.dir, protocol.FileSpool))
		if !strings.Contains(string(spool[r.SpoolStart:r.SpoolEnd]), strings.Repeat(string(rune('a'+(r.Seq-1)%26)), 1000)) {
			t.Errorf("%s: its spool range does not hold its output", n)
		}
	}
	h.stop(protocol.StopGraceful)
}

// Files that belong to no result leave once old enough: seq/
// reservations far below the highest, withdrawn commands, replies, and
// rejected files no result names; and the output and command files a
// crash left of a pruned command are swept at the next start.
func TestRetentionSweeps(t *testing.T) {
	t.Parallel()
	h := newHarness(t, keepLast(1))
	if err := os.MkdirAll(filepath.Join(h.dir, protocol.DirSeq), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int64{1, 2, 3, seqKeep + 10} {
		h.writeFile(rel(protocol.DirSeq, protocol.SeqName(n)), "")
	}
	if err := os.MkdirAll(filepath.Join(h.dir, "withdrawn"), 0o700); err != nil {
		t.Fatal(err)
	}
	h.writeFile("withdrawn/cmd_0000000009_w.json", `{}`)
	h.writeFile(rel(protocol.DirRejected, "mycmd.json"), `{}`)
	// What a crash between the removals of a pruned command leaves.
	// Its index line, then (a refusal kept in log/rejected/) the same for
	// an invalid command; and a command whose line was written but none
	// of whose files was removed: pruned again, it gets no second line.
	h.writeFile(protocol.FilePruned, "cmd_0000000007_gone.json ok -\ncmd_0000000008_gone.json error -\ncmd_0000000006_half.json ok -\n")
	h.writeFile(rel(protocol.DirOutput, "cmd_0000000007_gone.out"), "x")
	h.writeFile(rel(protocol.DirArchive, "cmd_0000000007_gone.json"), "{}")
	h.writeFile(rel(protocol.DirRejected, "cmd_0000000008_gone.json"), "{}")
	h.writeFile(rel(protocol.DirResult, "cmd_0000000006_half.json"), `{"protocol_version":1,"cmd_id":"half","seq":6,"status":"ok","end_ts":"2026-12-01T00:00:00.000Z"}`)
	h.start()
	h.waitFor("orphans swept", func() bool {
		_, a := os.Stat(filepath.Join(h.dir, protocol.DirOutput, "cmd_0000000007_gone.out"))
		_, b := os.Stat(filepath.Join(h.dir, protocol.DirArchive, "cmd_0000000007_gone.json"))
		_, c := os.Stat(filepath.Join(h.dir, protocol.DirRejected, "cmd_0000000008_gone.json"))
		return os.IsNotExist(a) && os.IsNotExist(b) && os.IsNotExist(c)
	})
	h.result(h.submit("puts y"))
	h.prunedAway("cmd_0000000006_half.json")
	if b, err := os.ReadFile(filepath.Join(h.dir, protocol.FilePruned)); err != nil || strings.Count(string(b), "cmd_0000000006_half.json") != 1 {
		t.Errorf("log/pruned.log after the half-pruned command was pruned again (%v):\n%s", err, b)
	}
	h.waitFor("seq/, withdrawn/ and log/rejected/ swept", func() bool {
		seq := names(t, h.dir, protocol.DirSeq)
		return len(seq) == 1 && len(names(t, h.dir, "withdrawn")) == 0 && len(names(t, h.dir, protocol.DirRejected)) == 0
	})
	if seq := names(t, h.dir, protocol.DirSeq); seq[0] != protocol.SeqName(seqKeep+10) {
		t.Errorf("seq/ keeps %v, want the highest", seq)
	}
	// A duplicate of the orphan's cmd_id is still refused.
	r := h.result(h.submit("puts x", func(c *protocol.Command) { c.CmdID = "gone" }))
	if r.Error == nil || r.Error.Code != protocol.CodeDuplicateCmdID {
		t.Errorf("%+v", r)
	}
	h.stop(protocol.StopGraceful)
}

// A FIFO planted at log/pruned.log is never opened blocking nor written
// through: at start the runner refuses (it is the runner's own file, like
// meta.log); while it runs, the pruner says it cannot record and removes
// nothing, the runner serves on, and once the FIFO is gone pruning resumes
// and records every command it removes (PROTOCOL.md sections 21, 23).
func TestRetentionIndexPlanted(t *testing.T) {
	t.Parallel()
	h := newHarness(t, keepLast(1))
	fifo := filepath.Join(h.dir, protocol.FilePruned)
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(h.cfg); !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), protocol.FilePruned) {
		t.Fatalf("Open with a FIFO at %s: %v", protocol.FilePruned, err)
	}
	if err := os.Remove(fifo); err != nil {
		t.Fatal(err)
	}
	h.start()
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	var all []string
	for i := 0; i < 3; i++ {
		all = append(all, h.submit(fmt.Sprintf("puts %d", i)))
		h.result(all[i])
	}
	h.waitFor("the warning that pruning cannot be recorded", func() bool {
		for _, e := range h.events() {
			if e.Event == protocol.EvWarning && e.Detail["retention"] == "cannot record pruned commands" {
				return true
			}
		}
		return false
	})
	for _, n := range all {
		if _, err := os.Stat(filepath.Join(h.dir, protocol.DirResult, n)); err != nil {
			t.Errorf("%s left without its index line: %v", n, err)
		}
	}
	if err := os.Remove(fifo); err != nil {
		t.Fatal(err)
	}
	h.waitFor("pruning to resume", func() bool { return len(prunedLines(t, h.dir)) == 2 })
	h.stop(protocol.StopGraceful)
}

package runner

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/internal/testenv"
	"github.com/skillpilot/skillpilot/protocol"
)

// At most one result per name, never overwritten, on
// every path.
func TestResultNeverOverwritten(t *testing.T) {
	t.Parallel()
	testenv.Slow(t, "seconds of real tclsh and races")
	h := newHarness(t).start()
	name := h.submit("puts first; expr 1")
	before := h.result(name)
	resultBytes := func() []byte {
		b, _ := os.ReadFile(filepath.Join(h.dir, protocol.DirResult, name))
		return b
	}
	orig := resultBytes()
	q := filepath.Join(h.dir, protocol.DirQueue, name)
	waitGone := func(what string) {
		h.waitFor(what+" cleared from queue/", func() bool { _, err := os.Lstat(q); return os.IsNotExist(err) })
		if !bytes.Equal(resultBytes(), orig) {
			t.Fatalf("re-dropping the name as %s rewrote its result: %s", what, resultBytes())
		}
	}
	os.Symlink("/etc/hostname", q)
	waitGone("a symlink")
	os.Mkdir(q, 0o700)
	os.WriteFile(filepath.Join(q, "f"), nil, 0o600)
	waitGone("a directory")
	syscall.Mkfifo(q, 0o600)
	waitGone("a FIFO")
	f, _ := os.Create(q)
	f.Truncate(protocol.MaxCommandSize + 1)
	f.Close()
	waitGone("a 16 MiB file")

	// Re-dropped while busy, then cancelled by cmd_id: still one result.
	busy := h.submit("puts go; flush stdout; after 60000")
	h.waitFor("busy", func() bool { return strings.Contains(readFile(h, busy), "go") })
	h.writeFile(rel(protocol.DirQueue, name), fmt.Sprintf(`{"cmd_id":%q,"seq":%d,"kind":"tcl","payload":"expr 2"}`, before.CmdID, before.Seq))
	h.writeFile(protocol.FileCancel, fmt.Sprintf(`{"cmd_id":%q}`, before.CmdID))
	waitGone("a command cancelled while queued")
	// The same cmd_id under a new seq, cancelled: duplicate_cmd_id.
	dup := protocol.CommandName(99, before.CmdID)
	h.writeFile(rel(protocol.DirQueue, dup), fmt.Sprintf(`{"cmd_id":%q,"seq":99,"kind":"tcl","payload":"expr 3"}`, before.CmdID))
	h.writeFile(protocol.FileCancel, fmt.Sprintf(`{"cmd_id":%q}`, before.CmdID))
	if r := h.result(dup); r.Error == nil || r.Error.Code != protocol.CodeDuplicateCmdID {
		t.Fatalf("a duplicate cmd_id cancelled while queued: %+v", r)
	}
	h.writeFile(protocol.FileCancel, "")
	h.result(busy)
	h.waitFor("skipped_count", func() bool { return h.state().SkippedCount >= 5 })
}

// A deleted runner directory is recreated (with a
// warning), never a silent stall or a wrong reason; one that cannot be
// recreated puts the runner in phase error until it is fixed.
func TestDeletedDirectories(t *testing.T) {
	t.Parallel()
	for _, d := range []string{protocol.DirInflight, protocol.DirResult, protocol.DirOutput, protocol.DirArchive, protocol.DirLog} {
		t.Run(d, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t).start()
			first := h.submit("expr 1")
			h.result(first)
			// The command file moves from inflight/ to archive/ just
			// after the result shows: deleted before, it is lost.
			h.waitFor("the command file archived", func() bool {
				_, err := os.Lstat(filepath.Join(h.dir, protocol.DirArchive, first))
				return err == nil
			})
			// The runner may write into log/ while RemoveAll walks it
			// (the file it just made leaves the directory not empty):
			// removed again until it is gone once.
			var err error
			for range 50 {
				if err = os.RemoveAll(filepath.Join(h.dir, d)); !errors.Is(err, syscall.ENOTEMPTY) {
					break
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			// What was in the deleted directory is gone for good; the
			// invariants cannot hold for the earlier command.
			h.noCheck = d != protocol.DirInflight
			a := h.submit("puts after; expr 2")
			r := h.result(a)
			if r.Status != protocol.StatusOK || *r.Value != "2" || h.output(a) != "after\n" {
				t.Fatalf("%+v", r)
			}
			h.waitFor("a warning event", func() bool {
				b, _ := os.ReadFile(filepath.Join(h.dir, protocol.FileMeta))
				return bytes.Contains(b, []byte(`"recreated"`))
			})
		})
	}
	t.Run("output is a file", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t).start()
		h.result(h.submit("expr 1"))
		out := filepath.Join(h.dir, protocol.DirOutput)
		os.RemoveAll(out)
		h.noCheck = true
		os.WriteFile(out, []byte("in the way"), 0o600)
		h.waitFor("phase error naming output/", func() bool {
			st := h.state()
			return st.Phase == protocol.PhaseError && strings.Contains(st.Reason, "output")
		})
		a := h.submit("expr 7")
		if _, err := os.Stat(filepath.Join(h.dir, protocol.DirResult, a)); err == nil {
			t.Fatal("a command ran while output/ was unusable")
		}
		os.Remove(out)
		if r := h.result(a); r.Status != protocol.StatusOK || *r.Value != "7" {
			t.Fatalf("after the fix: %+v", r)
		}
	})
}

// A command file someone deletes from inflight/ while it runs is reported
// as gone, not as a "recreated" archive/ that was never deleted (the
// writer's move failed for the missing file, and it took the existing
// directory for a deleted one).
func TestCommandFileDeletedWhileRunning(t *testing.T) {
	t.Parallel()
	h := newHarness(t).start()
	name := h.submit("after 600000")
	inflight := filepath.Join(h.dir, protocol.DirInflight, name)
	h.waitFor("the command claimed", func() bool { _, err := os.Lstat(inflight); return err == nil })
	if err := os.Remove(inflight); err != nil {
		t.Fatal(err)
	}
	h.writeFile(protocol.FileCancel, "")
	if r := h.result(name); r.Status != protocol.StatusCancelled {
		t.Fatalf("%+v", r)
	}
	h.result(h.submit("expr 1")) // The writer has reported the first job by now.
	// Its copy at command_path is written from the claimed bytes (made
	// again in inflight/ at a heartbeat, or kept when the result was
	// written), and a warning names that file; no directory is said to be
	// made again.
	if _, err := os.Stat(filepath.Join(h.dir, protocol.DirArchive, name)); err != nil {
		t.Errorf("the result's command_path: %v", err)
	}
	var files []string
	for _, e := range h.events() {
		if what, ok := e.Detail["recreated"].(string); ok {
			if strings.HasSuffix(what, "/") || e.CmdID == "" {
				t.Errorf("a directory nobody deleted was reported recreated: %+v", e)
			}
			files = append(files, what)
		}
	}
	if len(files) == 0 {
		t.Errorf("no warning says the command file was made again: %v", h.events())
	}
}

// tmpfsHarness starts a runner whose session is on a tmpfs of size, to be
// filled, and runs one command. It needs root (CAP_SYS_ADMIN): skipped
// without, failed under CI.
func tmpfsHarness(t *testing.T, size string) (*harness, string) {
	mnt := t.TempDir()
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size="+size); err != nil {
		testenv.Unavailable(t, "cannot mount a tmpfs to fill (%v); needs root (CAP_SYS_ADMIN), as CI has", err)
	}
	t.Cleanup(func() { syscall.Unmount(mnt, syscall.MNT_DETACH) })
	h := newHarness(t, func(c *Config) { c.Session = filepath.Join(mnt, "s") })
	h.dir = h.cfg.Session
	makeLayout(h.dir)
	h.start()
	h.result(h.submit("expr 1"))
	return h, mnt
}

// fillDisk writes a new file in mnt until the filesystem is full; it
// returns its path (remove it to give the space back).
func fillDisk(mnt string) string {
	f, _ := os.CreateTemp(mnt, "filler")
	filler := f.Name()
	for {
		if _, err := f.Write(make([]byte, 64<<10)); err != nil {
			break
		}
	}
	f.Close()
	return filler
}

// A full disk. A command that ran while the disk was
// full gets its result (the runner gives back its reserve), saying its
// output is incomplete; the heartbeat keeps beating; once space returns
// commands run normally. Needs a small tmpfs (root, or a mount namespace).
func TestDiskFull(t *testing.T) {
	t.Parallel()
	h, mnt := tmpfsHarness(t, "8m")
	flag := filepath.Join(h.dir, "go")
	a := h.submit(fmt.Sprintf("while {![file exists %s]} {after 10}; puts [string repeat x 100000]; expr 42", flag))
	h.waitFor("a running", func() bool { return h.state().Phase == protocol.PhaseBusy })
	filler := fillDisk(mnt)
	c0 := h.heartbeatCounter()
	os.WriteFile(flag, nil, 0o600) // An empty file needs no data block.
	ra := h.result(a)
	if ra.Error == nil || ra.Error.Code != protocol.CodeIO || !strings.Contains(ra.Error.Message, "output incomplete") ||
		ra.ToolRC == nil || *ra.ToolRC != 0 || *ra.Value != "42" {
		t.Fatalf("result of a command run on a full disk: %+v %+v", ra, ra.Error)
	}
	h.waitFor("the heartbeat to move on a full disk", func() bool { return h.heartbeatCounter() > c0+1 })
	os.Remove(filler)
	if r := h.result(h.submit("puts ok; expr 3")); r.Status != protocol.StatusOK || *r.Value != "3" {
		t.Fatalf("after space returned: %+v", r)
	}
}

// A full disk while a command keeps printing: the runner suspends the
// spool and the output file rather than let the output eat the reserve it
// gave back, so the heartbeat and state.json keep moving (found by trying
// the runner as a new user: before, the runner looked dead within a second
// of a chatty command filling the disk). Once space returns, the reserve
// is taken again and output files are written again.
func TestDiskFullChattyCommand(t *testing.T) {
	t.Parallel()
	h, mnt := tmpfsHarness(t, "32m")
	ballast := filepath.Join(h.dir, protocol.DirTmp, "ballast")
	h.waitFor("the reserve", func() bool { _, err := os.Stat(ballast); return err == nil })
	flag := filepath.Join(h.dir, "stop-printing")
	a := h.submit(fmt.Sprintf("while {![file exists %s]} {puts [string repeat x 8000]; after 2}; expr 42", flag))
	h.waitFor("a running", func() bool { return h.state().Phase == protocol.PhaseBusy })
	filler := fillDisk(mnt)
	h.waitFor("state.json to say disk_full", func() bool { return h.state().DiskFull })
	// The command goes on printing (megabytes per second) while the
	// heartbeat moves on, several times over.
	for i := 0; i < 5; i++ {
		c0 := h.heartbeatCounter()
		h.waitFor("the heartbeat to move on a full disk while output goes on", func() bool { return h.heartbeatCounter() > c0 })
	}
	if !h.state().DiskFull {
		t.Fatal("disk_full went away while the disk was still full")
	}
	// Space returns while the command still prints: writing resumes and
	// stays resumed (an old write error must not suspend it again).
	os.Remove(filler)
	h.waitFor("disk_full to end", func() bool { return !h.state().DiskFull })
	for i := 0; i < 5; i++ {
		c0 := h.heartbeatCounter()
		h.waitFor("a heartbeat after space returned", func() bool { return h.heartbeatCounter() > c0 })
		if h.state().DiskFull {
			t.Fatal("disk_full came back with space free")
		}
	}
	if _, err := os.Stat(ballast); err != nil {
		t.Fatalf("the reserve was not taken again: %v", err)
	}
	os.WriteFile(flag, nil, 0o600)
	ra := h.result(a)
	if ra.Error == nil || ra.Error.Code != protocol.CodeIO || !strings.Contains(ra.Error.Message, "output incomplete") ||
		ra.ToolRC == nil || *ra.ToolRC != 0 || *ra.Value != "42" {
		t.Fatalf("result of a chatty command on a full disk: %+v %+v", ra, ra.Error)
	}
	// The file holds what was written before and after the suspension:
	// stats describe the file; the message says how much was printed.
	var held, printed int64
	if _, err := fmt.Sscanf(ra.Error.Message[strings.Index(ra.Error.Message, " holds "):], " holds %d of the %d bytes", &held, &printed); err != nil ||
		held == 0 || held >= printed || held != ra.Stats.Bytes {
		t.Fatalf("output after resuming: %q (stats %d bytes, %v)", ra.Error.Message, ra.Stats.Bytes, err)
	}
	if fi, err := os.Stat(filepath.Join(h.dir, ra.OutputPath)); err != nil || fi.Size() != held {
		t.Fatalf("output file: %v %v, want %d bytes", fi, err, held)
	}
	r := h.result(h.submit("puts ok; expr 3"))
	if r.Status != protocol.StatusOK || *r.Value != "3" || r.Stats.Bytes != 3 {
		t.Fatalf("after space returned: %+v %+v", r, r.Error)
	}
	var suspended, resumed int
	for _, e := range h.events() {
		if e.Event == protocol.EvWarning && e.Detail["disk_full"] == true && e.Detail["suspended"] != nil {
			suspended++
		}
		if n, _ := e.Detail["output_bytes_not_written"].(float64); e.Event == protocol.EvWarning && e.Detail["resumed"] == true && n > 0 {
			resumed++
		}
	}
	if suspended != 1 || resumed != 1 {
		t.Fatalf("events: %d suspended (want 1), %d resumed with output_bytes_not_written > 0 (want 1)", suspended, resumed)
	}
}

// A full disk where another process takes the space the reserve gave
// back: the heartbeat and state.json are then rewritten in place (their
// blocks are already there), so the runner never looks dead. The reserve
// outlives a stop: the next runner, started on a full disk, has it.
func TestDiskFullOtherWriter(t *testing.T) {
	t.Parallel()
	testenv.Slow(t, "seconds of real tclsh and races")
	h, mnt := tmpfsHarness(t, "32m")
	ballast := filepath.Join(h.dir, protocol.DirTmp, "ballast")
	exists := func() bool { _, err := os.Stat(ballast); return err == nil }
	h.waitFor("the reserve", exists)
	f1 := fillDisk(mnt)
	h.waitFor("the reserve given back", func() bool { return !exists() })
	f2 := fillDisk(mnt) // Another writer takes what the reserve gave back.
	beats := func(what string) {
		for i := 0; i < 5; i++ {
			c0 := h.heartbeatCounter()
			h.waitFor(what, func() bool { return h.heartbeatCounter() > c0 })
		}
	}
	beats("the heartbeat to move with no space left at all")
	if st := h.state(); !st.DiskFull {
		t.Fatalf("state.json: %+v", st)
	}
	os.Remove(f1)
	h.waitFor("the reserve taken again", func() bool { return exists() && !h.state().DiskFull })
	h.stop(protocol.StopGraceful)
	if !exists() {
		t.Fatal("the reserve was removed at stop")
	}
	f3 := fillDisk(mnt)
	h.start() // On a full disk, with the reserve the last runner left.
	beats("the heartbeat of a runner started on a full disk")
	os.Remove(f2)
	os.Remove(f3)
	if r := h.result(h.submit("expr 3")); r.Status != protocol.StatusOK {
		t.Fatalf("after space returned: %+v", r)
	}
}

// Mass rejection does not starve liveness. With 3,000
// invalid files the owner goroutine still beats while it rejects them (it
// handles a bounded number per turn; the results are written as groups by
// the result writer).
func TestMassRejectionKeepsBeating(t *testing.T) {
	t.Parallel()
	testenv.Slow(t, "seconds of real tclsh and races")
	h := newFakeHarness(t, nil)
	const n = 3000
	for i := 1; i <= n; i++ {
		h.writeFile(rel(protocol.DirQueue, protocol.CommandName(int64(i), fmt.Sprintf("bad%d", i))), `{"cmd_id":"other","seq":1,"kind":"tcl","payload":"x"}`)
	}
	h.start()
	count := func() int { names, _ := readNames(filepath.Join(h.dir, protocol.DirResult)); return len(names) }
	h.waitFor("the first rejection", func() bool { return count() > 0 })
	c0 := h.heartbeatCounter()
	h.clk.Advance(h.cfg.Heartbeat)
	h.waitFor("a heartbeat", func() bool { return h.heartbeatCounter() > c0 })
	if got := count(); got >= n {
		t.Fatalf("the heartbeat waited for all %d rejections", got)
	}
	h.waitFor("every rejection", func() bool { return count() == n })
	h.advanceUntil("rejected_count", 10*time.Millisecond, func() bool { return h.state().RejectedCount == n })
}

// With a backlog already queued, a command with a huge
// seq dropped right after the start does not run first: nothing starts
// before the first listing of queue/ is complete. The first listing is
// held back here until the runner has seen the late command (through
// inotify) with a ready tool: it must not start it.
func TestSeqOrderAtStart(t *testing.T) {
	t.Parallel()
	testenv.Slow(t, "seconds of real tclsh and races")
	release := make(chan struct{})
	first := true
	h := newFakeHarness(t, nil, func(c *Config) {
		c.listQueue = func(dir string) ([]string, error) {
			if first {
				first = false
				<-release
			}
			return readNames(dir)
		}
	})
	const n = 20000
	for i := 1; i <= n; i++ {
		writeCmdQuiet(t, h.dir, int64(i), fmt.Sprintf("b%d", i), "value 1")
	}
	h.start()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	// The runner watches queue/ once it logged runner_start.
	h.waitFor("runner_start", func() bool { return countEvents(h.events(), protocol.EvRunnerStart) > 0 })
	late := writeCmdQuiet(t, h.dir, 1_000_000_000_000, "late", "value 2")
	h.advanceUntil("the late command seen with the tool ready", 10*time.Millisecond, func() bool {
		st := h.state()
		return (st.QueueDepth >= 1 && st.Phase == protocol.PhaseIdle) || st.Phase == protocol.PhaseBusy ||
			countEvents(h.events(), protocol.EvCmdBegin) > 0
	})
	if n := countEvents(h.events(), protocol.EvCmdBegin); n != 0 {
		t.Fatalf("%d commands began before queue/ was listed", n)
	}
	close(release)
	h.waitFor("a command to begin", func() bool { return countEvents(h.events(), protocol.EvCmdBegin) > 0 })
	for _, e := range h.events() {
		if e.Event == protocol.EvCmdBegin {
			if e.Seq != 1 {
				t.Fatalf("the first command to run was seq %d (%s); want seq 1", e.Seq, e.CmdID)
			}
			break
		}
	}
	h.noCheck = true // 20,000 commands are left queued; the check would read them all.
	_ = late
}

// writeCmdQuiet writes a tcl command file without the json package's
// allocations (20,000 of them).
func writeCmdQuiet(t testing.TB, dir string, seq int64, id, payload string) string {
	name := protocol.CommandName(seq, id)
	b := fmt.Appendf(nil, `{"cmd_id":%q,"seq":%d,"kind":"tcl","payload":%q}`, id, seq, payload)
	tmp := filepath.Join(dir, protocol.DirQueue, "."+name)
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, protocol.DirQueue, name)); err != nil {
		t.Fatal(err)
	}
	return name
}

// The tool does not outlive its runner, whatever signals
// it ignores. The tool itself dies with the runner (parent-death signal);
// what it started, in its process group, is killed by the next runner
// before that one settles the interrupted command.
func TestToolDiesWithRunner(t *testing.T) {
	t.Parallel()
	t.Run("the tool", func(t *testing.T) {
		t.Parallel()
		dir := filepath.Join(t.TempDir(), "s")
		p := startRunnerProc(t, "--session", dir, "--heartbeat", "100ms", "--", "sh", "-c", `trap "" HUP INT TERM; exec tclsh`)
		writeCmd(t, dir, 1, "long", "puts go; flush stdout; after 200000")
		hh := &harness{t: t, dir: dir}
		hh.waitFor("busy", func() bool { return hh.state().Phase == protocol.PhaseBusy })
		pid := hh.state().ToolPID
		p.Kill()
		hh.waitFor("the tool to die with its runner", func() bool { return !pidAlive(pid) || zombie(pid) })
	})
	t.Run("its process group", func(t *testing.T) {
		t.Parallel()
		dir := filepath.Join(t.TempDir(), "s")
		side := filepath.Join(t.TempDir(), "side")
		// sh dies with the runner; the tclsh it runs (HUP ignored) would
		// go on writing.
		tool := []string{"--", "sh", "-c", `trap "" HUP; tclsh; exit 0`}
		p := startRunnerProc(t, append([]string{"--session", dir, "--heartbeat", "100ms"}, tool...)...)
		name := writeCmd(t, dir, 1, "tick", fmt.Sprintf("set f [open %q w]; fconfigure $f -buffering none; for {set i 0} {$i < 4000} {incr i} {puts $f $i; after 50}", side))
		hh := &harness{t: t, dir: dir}
		hh.waitFor("ticking", func() bool { fi, err := os.Stat(side); return err == nil && fi.Size() > 10 })
		old := hh.state().SessionID
		p.Kill()
		// The old tclsh survives its runner (the scenario)...
		fi0, _ := os.Stat(side)
		hh.waitFor("the orphan to keep writing", func() bool { fi, _ := os.Stat(side); return fi.Size() > fi0.Size() })
		// ...until the next runner starts: it kills the group before it
		// writes runner_restarted.
		p = startRunnerProc(t, append([]string{"--session", dir, "--heartbeat", "100ms"}, tool...)...)
		r := waitResultFile(t, dir, name)
		fi1, _ := os.Stat(side)
		if r.ExitReason != protocol.ReasonRunnerRestarted {
			t.Fatalf("%+v", r)
		}
		checkNoOrphansOf(t, dir, 1)
		if fi2, _ := os.Stat(side); fi2.Size() != fi1.Size() {
			t.Fatalf("the old tool wrote after runner_restarted was reported (%d -> %d bytes)", fi1.Size(), fi2.Size())
		}
		killed := false
		for _, e := range readEvents(t, dir) {
			killed = killed || e.Event == protocol.EvStaleToolKilled
		}
		if !killed {
			t.Error("no stale_tool_killed event")
		}
		// A stop written before the new runner recorded its start would be
		// judged stale (written before it started): wait until it serves.
		// The dead runner's state.json may say idle too: wait for the new one's.
		hh.waitFor("the new runner to serve", func() bool {
			st := hh.state()
			return st.Phase == protocol.PhaseIdle && st.SessionID != old
		})
		os.WriteFile(filepath.Join(dir, protocol.FileStop), nil, 0o600)
		p.ExitCode()
		invariants(t, dir, name)
	})
}

// zombie reports whether pid is a zombie (dead, not yet reaped).
func zombie(pid int) bool {
	st, err := readProcStat(pid)
	return err == nil && (st.state == 'Z' || st.state == 'X')
}

// checkNoOrphansOf waits until no process of the first n tool process
// groups of dir is alive.
func checkNoOrphansOf(t testing.TB, dir string, n int) {
	t.Helper()
	groups := map[int]bool{}
	for i, p := range toolPIDs(t, dir) {
		if i < n {
			groups[p] = true
		}
	}
	deadline := time.Now().Add(longWait)
	for len(livingInGroups(groups)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("processes of the old tool are alive: %v", livingInGroups(groups))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Exactness of output and values.
func TestExactness(t *testing.T) {
	t.Parallel()
	t.Run("trailing CR tcl", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t).start()
		a := h.submit(`puts -nonewline "abc\r"`)
		h.result(a)
		if got := h.output(a); got != "abc\r" {
			t.Fatalf("output %q", got)
		}
	})
	t.Run("trailing CR sh", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, func(c *Config) { c.Kind = protocol.KindSh }).start()
		a := h.submit(`printf 'abc\r'`)
		h.result(a)
		if got := h.output(a); got != "abc\r" {
			t.Fatalf("output %q", got)
		}
	})
	t.Run("no prompt after cancel", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, func(c *Config) { c.Kind = protocol.KindSh }).start()
		a := h.submit("echo started; sleep 100")
		h.waitFor("output", func() bool { return strings.Contains(readFile(h, a), "started") })
		h.writeFile(protocol.FileCancel, "")
		r := h.result(a)
		out := h.output(a)
		if r.Status != protocol.StatusCancelled || !strings.HasPrefix(out, "started\n") || strings.Contains(out, "bash") ||
			strings.HasSuffix(out, "# ") || strings.HasSuffix(out, "$ ") {
			t.Fatalf("%+v output %q", r, out)
		}
		b := h.submit("echo next")
		if rb := h.result(b); rb.Status != protocol.StatusOK || h.output(b) != "next\n" {
			t.Fatalf("%+v %q", rb, h.output(b))
		}
	})
	t.Run("value cut at a character", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t).start()
		r := h.result(h.submit("string cat a [string repeat é 40000]"))
		if !r.ValueTruncated || len(*r.Value) > maxValue || !utf8.ValidString(*r.Value) {
			t.Fatalf("value of %d bytes, truncated %v, valid UTF-8 %v", len(*r.Value), r.ValueTruncated, utf8.ValidString(*r.Value))
		}
	})
	t.Run("tail cut at a character", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t).start()
		h.result(h.submit("puts [string repeat a 4095]é; puts next"))
		h.stop(protocol.StopGraceful)
		b, _ := os.ReadFile(filepath.Join(h.dir, protocol.FileTail))
		if !utf8.Valid(b) || !bytes.Contains(b, []byte("next")) {
			t.Fatalf("last_n_lines.txt is not valid UTF-8 or lost lines: %q", b[max(0, len(b)-20):])
		}
	})
}

// What a payload may do to the interpreter does not
// keep the done marker from arriving, and the next command runs normally.
func TestPayloadCannotBreakTheMarker(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, payload, output string
	}{
		{"rename puts", "rename puts {}", ""},
		{"redefine puts", "proc puts args {}", ""},
		{"delete the helpers", "namespace delete ::__sp", ""},
		{"close stdout", "close stdout", ""},
		{"lower the recursion limit", "interp recursionlimit {} 20", ""},
		{"translation cr", "fconfigure stdout -translation cr; puts a; puts b", "a\rb\r"},
		{"encoding unicode", "fconfigure stdout -encoding unicode; puts -nonewline hi", "h\x00i\x00"},
		{"non-blocking stdout", "fconfigure stdout -blocking 0; puts -nonewline [string repeat x 300000]", strings.Repeat("x", 300000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t).start()
			a := h.submit(tc.payload, withTimeout(60))
			if r := h.result(a); r.Status != protocol.StatusOK {
				t.Fatalf("%+v %+v", r, r.Error)
			}
			if got := h.output(a); got != tc.output {
				t.Fatalf("output %q (%d bytes), want %d bytes", got[:min(len(got), 40)], len(got), len(tc.output))
			}
			b := h.submit("expr 6*7")
			if r := h.result(b); r.Status != protocol.StatusOK || *r.Value != "42" {
				t.Fatalf("the next command: %+v", r)
			}
			if tc.name != "close stdout" && tc.name != "rename puts" && tc.name != "redefine puts" {
				c := h.submit("puts next")
				h.result(c)
				if got := h.output(c); got != "next\n" {
					t.Fatalf("stdout settings not restored: %q", got)
				}
			}
		})
	}
}

// TestEmptyPayload: an empty payload is what an empty line at the prompt
// is, a command that does nothing and succeeds, for both kinds. It must not
// be mistaken for "the payload is in a file" (whose name would then be "").
func TestEmptyPayload(t *testing.T) {
	t.Parallel()
	for _, kind := range []protocol.Kind{protocol.KindTcl, protocol.KindSh} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, func(c *Config) { c.Kind = kind }).start()
			a := h.submit("")
			b := h.submit("   \n")
			for _, name := range []string{a, b} {
				r := h.result(name)
				if r.Status != protocol.StatusOK || h.output(name) != "" {
					t.Fatalf("%s: %+v output %q", name, r, h.output(name))
				}
			}
		})
	}
}

// TestStateFileDeletedWhileIdle: state/state.json deleted under an idle
// runner is written again at the next heartbeat, not only at the next
// transition (masters read the phase and session_id from it).
func TestStateFileDeletedWhileIdle(t *testing.T) {
	t.Parallel()
	h := newHarness(t).start()
	h.result(h.submit("expr 1"))
	h.waitFor("idle", func() bool { return h.state().Phase == protocol.PhaseIdle })
	want := h.state().SessionID
	if err := os.Remove(filepath.Join(h.dir, protocol.FileState)); err != nil {
		t.Fatal(err)
	}
	if st := h.state(); st.SessionID != want || st.Phase != protocol.PhaseIdle || st.CommandsDone != 1 {
		t.Fatalf("state.json written again: %+v", st)
	}
}

// TestSpoolReplacedByFIFO: log/session.out replaced by a FIFO under a live
// runner puts it in phase error once, with one layout event, for as long as
// the FIFO stays (it used to flap between "usable again" and the error on
// every heartbeat, two events each time); removed, the runner serves again.
func TestSpoolReplacedByFIFO(t *testing.T) {
	t.Parallel()
	h := newHarness(t).start()
	h.result(h.submit("expr 1"))
	spool := filepath.Join(h.dir, protocol.FileSpool)
	// Made beside it and renamed over it: removed first, the spool could
	// be made again by the runner (it reopens a deleted one at its next
	// heartbeat) before the FIFO took its name (CI: mkfifo "file exists").
	fifo := filepath.Join(filepath.Dir(h.dir), "spool.fifo") // The same filesystem, outside the session.
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(fifo, spool); err != nil {
		t.Fatal(err)
	}
	h.waitFor("phase error", func() bool { return h.state().Phase == protocol.PhaseError })
	hb := func() int64 {
		hb, _ := readHeartbeatPath(filepath.Join(h.dir, protocol.FileHeartbeat))
		return hb.Counter
	}
	from := hb()
	h.waitFor("ten more heartbeats", func() bool { return hb() >= from+10 })
	layoutEvents := func() (n int) {
		for _, e := range h.events() {
			if e.Event == protocol.EvWarning && e.Detail["layout"] != nil {
				n++
			}
		}
		return n
	}
	if n := layoutEvents(); n != 1 || h.state().Phase != protocol.PhaseError {
		t.Fatalf("%d layout events, phase %s: want 1 and error", n, h.state().Phase)
	}
	if err := os.Remove(spool); err != nil {
		t.Fatal(err)
	}
	if r := h.result(h.submit("puts again")); r.Status != protocol.StatusOK {
		t.Fatalf("%+v", r)
	}
	if n := layoutEvents(); n != 2 {
		t.Errorf("%d layout events, want 2 (the error, then usable again)", n)
	}
}

// TestStopWhileResultsWait: results that cannot be committed (a full disk,
// injected here at the rename) hold a graceful stop back, and meanwhile the
// runner keeps beating and stays stoppable; a second signal (force) gives
// them up and exits, leaving the command in inflight/ for the next runner,
// which answers it runner_restarted (PROTOCOL.md section 13). The runner
// used to leave its loop at once: no heartbeat, no control, and a second
// signal was never read, so it hung until the disk had room.
func TestStopWhileResultsWait(t *testing.T) {
	t.Parallel()
	var full atomic.Bool
	h := newHarness(t, func(c *Config) {
		c.writerOps.place = func(tmp, dst string) error {
			if full.Load() {
				return &os.LinkError{Op: "rename", Old: tmp, New: dst, Err: syscall.ENOSPC}
			}
			r, err := fsq.OpenRoot(filepath.Dir(filepath.Dir(dst))) // The session: tmp/ and result/ are in it.
			if err != nil {
				return err
			}
			defer r.Close()
			return r.RenameNoReplace(r.RelOf(tmp), r.RelOf(dst))
		}
	}).start()
	h.result(h.submit("expr 1"))
	full.Store(true)
	a := h.submit("expr 2")
	h.waitFor("results waiting", func() bool {
		st := h.state()
		return st.Phase == protocol.PhaseError && strings.Contains(st.Reason, "waiting to be written")
	})
	h.sigs <- syscall.SIGTERM
	h.waitFor("phase stopping", func() bool { return h.state().Phase == protocol.PhaseStopping })
	c0 := h.heartbeatCounter()
	h.waitFor("the heartbeat to move while the stop waits", func() bool { return h.heartbeatCounter() > c0+2 })
	select {
	case err := <-h.errc:
		t.Fatalf("the runner stopped with a result still waiting: %v", err)
	default:
	}
	h.sigs <- syscall.SIGTERM
	if err := h.waitExit(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(h.dir, protocol.DirInflight, a)); err != nil {
		t.Fatalf("the command whose result was given up must stay in inflight/: %v", err)
	}
	full.Store(false)
	h.start()
	if r := h.result(a); r.ExitReason != protocol.ReasonRunnerRestarted {
		t.Fatalf("%+v", r)
	}
}

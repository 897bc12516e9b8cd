package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/internal/sessioncheck"
	"github.com/skillpilot/skillpilot/internal/testenv"
	"github.com/skillpilot/skillpilot/protocol"
)

// Files of the session read without limits.

// heartbeatCounter reads state/heartbeat.json's counter (0 if unreadable).
func (h *harness) heartbeatCounter() int64 {
	b, err := os.ReadFile(filepath.Join(h.dir, protocol.FileHeartbeat))
	if err != nil {
		return 0
	}
	var hb protocol.Heartbeat
	_ = json.Unmarshal(b, &hb)
	return hb.Counter
}

// A lease.json that is a FIFO, a symlink to /dev/zero or a 300 MB file
// neither freezes the runner nor grows it: lease_error says why, the
// heartbeat keeps moving, and a stop request is honoured.
func TestHostileLeaseFile(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, want string
		plant      func(t *testing.T, p string)
	}{
		{"fifo", "FIFO", func(t *testing.T, p string) {
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"symlink to /dev/zero", "symlink", func(t *testing.T, p string) {
			if err := os.Symlink("/dev/zero", p); err != nil {
				t.Fatal(err)
			}
		}},
		{"300 MB", "larger than", func(t *testing.T, p string) {
			f, err := os.Create(p)
			if err != nil {
				t.Fatal(err)
			}
			f.Truncate(300 << 20) // Sparse: costs no disk.
			f.Close()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t).start()
			h.result(h.submit("expr 1"))
			tc.plant(t, filepath.Join(h.dir, protocol.FileLease))
			h.waitFor("lease_error", func() bool { return strings.Contains(h.state().LeaseError, tc.want) })
			c0 := h.heartbeatCounter()
			h.waitFor("the heartbeat to move", func() bool { return h.heartbeatCounter() > c0+1 })
			if r := h.result(h.submit("expr 2")); *r.Value != "2" {
				t.Fatalf("%+v", r)
			}
			h.stop(protocol.StopGraceful)
			found := false
			for _, e := range h.events() {
				if e.Event == protocol.EvLease && e.Detail["action"] == "error" {
					found = true
					if e.SpoolOffset == nil {
						t.Errorf("a lease event without spool_offset: %+v", e)
					}
				}
			}
			if !found {
				t.Error("no lease event reports the problem")
			}
		})
	}
}

// openGuarded runs Open with an anti-hang guard (a FIFO must never block
// it).
func openGuarded(t *testing.T, cfg Config) (*Runner, error) {
	t.Helper()
	type res struct {
		r   *Runner
		err error
	}
	ch := make(chan res, 1)
	go func() { r, err := Open(cfg); ch <- res{r, err} }()
	select {
	case x := <-ch:
		return x.r, x.err
	case <-time.After(longWait):
		t.Fatal("Open hangs")
		return nil, nil
	}
}

// Files planted at the runner's own paths before it starts are never
// followed or blocked on: a FIFO at heartbeat.json is replaced; a FIFO or
// symlink at runner.lock, session.out or meta.log is refused with a
// message that says what to remove (and a symlink's target is untouched).
func TestHostileFilesAtStart(t *testing.T) {
	t.Parallel()
	target := filepath.Join(t.TempDir(), "target")
	for _, tc := range []struct {
		name, rel string
		fifo      bool
		refused   bool
	}{
		{"fifo heartbeat", protocol.FileHeartbeat, true, false},
		{"fifo lock", protocol.FileLock, true, true},
		{"fifo spool", protocol.FileSpool, true, true},
		{"fifo meta", protocol.FileMeta, true, true},
		{"symlink spool", protocol.FileSpool, false, true},
		{"symlink meta", protocol.FileMeta, false, true},
		{"symlink lock", protocol.FileLock, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.WriteFile(target, []byte("precious\n"), 0o600)
			h := newHarness(t)
			p := filepath.Join(h.dir, tc.rel)
			if tc.fifo {
				if err := syscall.Mkfifo(p, 0o600); err != nil {
					t.Fatal(err)
				}
			} else if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
			r, err := openGuarded(t, h.cfg)
			if tc.refused {
				if !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), tc.rel) || !strings.Contains(err.Error(), "remove it") {
					t.Fatalf("Open: %v", err)
				}
				if b, _ := os.ReadFile(target); string(b) != "precious\n" {
					t.Fatalf("the symlink's target was written: %q", b)
				}
				h.noCheck = true
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			h.r = r
			go func() { h.errc <- r.Run(t.Context(), h.sigs) }()
			if res := h.result(h.submit("expr 3")); *res.Value != "3" {
				t.Fatalf("%+v", res)
			}
			if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() {
				t.Fatalf("heartbeat.json not replaced: %v %v", fi, err)
			}
		})
	}
}

// Numbers out of range are clamped or rejected, with a
// warning, and never read as "expired" or "none".
func TestNumbersOutOfRange(t *testing.T) {
	t.Parallel()
	t.Run("ttl_ms max int64", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t).start()
		h.writeFile(protocol.FileLease, `{"lease_id":"L","ttl_ms":9223372036854775807}`)
		h.waitFor("the clamp event", func() bool {
			for _, e := range h.events() {
				if e.Event == protocol.EvLease && e.Detail["action"] == "ttl_clamped" {
					return true
				}
			}
			return false
		})
		c0 := h.heartbeatCounter()
		h.waitFor("two more heartbeats", func() bool { return h.heartbeatCounter() > c0+1 })
		if st := h.state(); st.Phase == protocol.PhaseStopped || st.Phase == protocol.PhaseStopping {
			t.Fatalf("a huge ttl_ms stopped the runner: %+v", st)
		}
		if r := h.result(h.submit("expr 1")); r.Status != protocol.StatusOK {
			t.Fatalf("%+v", r)
		}
	})
	for _, tc := range []struct{ name, lease, want string }{
		{"ttl_ms 1e13", `{"lease_id":"L","ttl_ms":1e13}`, "ttl_ms"},
		{"expires_at 1e20", `{"lease_id":"L","expires_at":1e20}`, "out of range"},
		{"expires_at negative", `{"lease_id":"L","expires_at":-5}`, "out of range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t).start()
			h.writeFile(protocol.FileLease, tc.lease)
			h.waitFor("lease_error", func() bool { return strings.Contains(h.state().LeaseError, tc.want) })
			c0 := h.heartbeatCounter()
			h.waitFor("two more heartbeats", func() bool { return h.heartbeatCounter() > c0+1 })
			if r := h.result(h.submit("expr 1")); r.Status != protocol.StatusOK {
				t.Fatalf("%+v", r)
			}
		})
	}
	t.Run("timeout_s 1e-12", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, func(c *Config) { c.DefaultTimeout = time.Hour }).start()
		r := h.result(h.submit("after 60000", withTimeout(1e-12)))
		if r.Status != protocol.StatusTimeout {
			t.Fatalf("a tiny timeout_s meant no timeout: %+v", r)
		}
		if countEvents(h.events(), protocol.EvWarning) == 0 {
			t.Error("no warning that timeout_s was clamped")
		}
	})
	t.Run("timeout_s 1e300", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t).start()
		if r := h.result(h.submit("expr 5", withTimeout(1e300))); r.Status != protocol.StatusOK {
			t.Fatalf("a huge timeout_s: %+v", r)
		}
	})
}

// Ctl/cancel.json created as a directory is moved out of
// ctl/ (nothing done, an event says so) and cancels keep working.
func TestCancelFileAsDirectory(t *testing.T) {
	t.Parallel()
	h := newHarness(t).start()
	a := h.submit("puts go; flush stdout; after 60000")
	h.waitFor("output", func() bool { return strings.Contains(readFile(h, a), "go") })
	d := filepath.Join(h.dir, protocol.FileCancel)
	os.Mkdir(d, 0o700)
	os.WriteFile(filepath.Join(d, "inside"), []byte("x"), 0o600)
	h.waitFor("ctl/ cleared", func() bool {
		_, err := os.Lstat(d)
		return errors.Is(err, os.ErrNotExist)
	})
	h.waitFor("a rejected event", func() bool {
		for _, e := range h.events() {
			if e.Event == protocol.EvCancel && e.Detail["outcome"] == "rejected" {
				return true
			}
		}
		return false
	})
	// state.json's busy/idle flips are coalesced (and lag under load):
	// the command still running is what matters, and no result says so.
	if _, err := os.Lstat(filepath.Join(h.dir, protocol.DirResult, a)); err == nil {
		t.Fatalf("a directory cancelled the command: %+v", h.result(a))
	}
	h.waitFor("phase busy", func() bool { return h.state().Phase == protocol.PhaseBusy })
	h.writeFile(protocol.FileCancel, "")
	if r := h.result(a); r.Status != protocol.StatusCancelled {
		t.Fatalf("a later cancel was not honoured: %+v", r)
	}
}

// The trust model. Loose permissions are refused with a
// message that says how to fix them; a setgid (group-shared) session works
// with the documented modes; a world-readable one only warns.
func TestTrustModel(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		mode os.FileMode
		want string
	}{
		{"world writable", 0o777, "chmod o-w"},
		{"group writable without setgid", 0o770, "chmod g+s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "s")
			os.Mkdir(dir, 0o700)
			os.Chmod(dir, tc.mode)
			_, err := openGuarded(t, Config{Session: dir, Logger: quietLogger()})
			if !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open: %v", err)
			}
		})
	}
	t.Run("symlinked subdirectory", func(t *testing.T) {
		t.Parallel()
		dir := filepath.Join(t.TempDir(), "s")
		os.Mkdir(dir, 0o700)
		other := t.TempDir()
		os.Symlink(other, filepath.Join(dir, protocol.DirQueue))
		_, err := openGuarded(t, Config{Session: dir, Logger: quietLogger()})
		if !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), "queue") {
			t.Fatalf("Open: %v", err)
		}
	})
	t.Run("group shared", func(t *testing.T) {
		t.Parallel()
		dir := filepath.Join(t.TempDir(), "s")
		os.Mkdir(dir, 0o700)
		os.Chmod(dir, 0o770|os.ModeSetgid)
		h := newHarness(t, func(c *Config) { c.Session = dir })
		h.dir = dir
		h.start()
		h.result(h.submit("puts shared"))
		h.stop(protocol.StopGraceful)
		if err := sessioncheck.Check(dir, sessioncheck.Options{Submitted: h.submitted}); err != nil {
			t.Fatalf("shared session modes:\n%v", err)
		}
	})
	t.Run("world readable warns", func(t *testing.T) {
		t.Parallel()
		dir := filepath.Join(t.TempDir(), "s")
		os.Mkdir(dir, 0o755)
		os.Chmod(dir, 0o755)
		h := newHarness(t, func(c *Config) { c.Session = dir })
		h.dir, h.noCheck = dir, true
		h.start()
		h.result(h.submit("expr 1"))
		h.stop(protocol.StopGraceful)
		found := false
		for _, e := range h.events() {
			if e.Event == protocol.EvWarning && strings.Contains(stringOf(e.Detail["trust"]), "chmod o-rwx") {
				found = true
			}
		}
		if !found {
			t.Fatal("no warning about a world-readable session")
		}
	})
	t.Run("another user's directory", func(t *testing.T) {
		t.Parallel()
		if os.Geteuid() != 0 {
			t.Skip("needs root to give the directory to another user")
		}
		dir := filepath.Join(t.TempDir(), "s")
		os.Mkdir(dir, 0o700)
		os.Chown(dir, 65534, 65534)
		_, err := openGuarded(t, Config{Session: dir, Logger: quietLogger()})
		if !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), "owned by uid 65534") {
			t.Fatalf("root served another user's directory: %v", err)
		}
	})
	t.Run("queue replaced by another user", func(t *testing.T) {
		t.Parallel()
		if os.Geteuid() != 0 {
			t.Skip("needs root to create a directory owned by another user")
		}
		h := newHarness(t).start()
		h.result(h.submit("expr 1"))
		q := filepath.Join(h.dir, protocol.DirQueue)
		os.Rename(q, q+".old")
		os.Mkdir(q, 0o700)
		os.Chown(q, 65534, 65534)
		side := filepath.Join(t.TempDir(), "side")
		name := h.submit("set f [open " + side + " w]; close $f")
		h.waitFor("phase error naming queue/", func() bool {
			st := h.state()
			return st.Phase == protocol.PhaseError && strings.Contains(st.Reason, "queue")
		})
		if _, err := os.Stat(side); err == nil {
			t.Fatal("a command from a queue/ owned by another user ran")
		}
		os.Chown(q, 0, 0)
		if r := h.result(name); r.Status != protocol.StatusOK {
			t.Fatalf("after the fix: %+v", r)
		}
		os.RemoveAll(q + ".old")
	})
	t.Run("payload file symlink", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t).start()
		target := filepath.Join(t.TempDir(), "target")
		os.WriteFile(target, []byte("precious\n"), 0o600)
		name := protocol.CommandName(1, "p1")
		os.Symlink(target, filepath.Join(h.dir, protocol.DirInflight, name+payloadExt))
		big := "set x {" + strings.Repeat("y", 4000) + "}; expr 1"
		h.seq = 0
		if r := h.result(h.submit(big, func(c *protocol.Command) { c.CmdID = "p1"; c.Seq = 1 })); r.Status != protocol.StatusOK {
			t.Fatalf("%+v", r)
		}
		if b, _ := os.ReadFile(target); string(b) != "precious\n" {
			t.Fatalf("the payload was written through a planted symlink: %q", b)
		}
	})
}

func stringOf(v any) string { s, _ := v.(string); return s }

// Misnamed queue files): nothing stays
// stuck. Every file meant as a command is answered; leftovers of an
// interrupted runner are swept at start.
func TestNothingStuck(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	// Leftovers of a runner killed mid-write.
	plant := map[string]bool{
		"result/.cmd_0000000001_x.json.k2j3.tmp": false, "state/.state.json.123.tmp": false,
		"state/.heartbeat.json.9.tmp": false, "output/.spare-abc": false, "log/.last_n_lines.txt.7.tmp": false,
	}
	for p := range plant {
		os.WriteFile(filepath.Join(h.dir, p), []byte("x"), 0o600)
	}
	taken := filepath.Join(h.dir, protocol.DirCtl, "cancel.json.taken.4242")
	os.Mkdir(taken, 0o700)
	os.WriteFile(filepath.Join(taken, "f"), nil, 0o600)
	q := func(name, content string) { h.writeFile(rel(protocol.DirQueue, name), content) }
	q("cmd_9223372036854775807_big.json", `{"cmd_id":"big","seq":1,"kind":"tcl","payload":"expr 1"}`)
	q("cmd_w6.json", `{}`)
	q("mycmd.json", `{}`)
	q("cmd_14_w2.JSON", `{}`)
	q("notes.txt", "left alone")
	h.start()
	for name, want := range map[string]string{
		"cmd_9223372036854775807_big.json": "19 digits", "cmd_w6.json": "no seq", "cmd_14_w2.JSON": "lower case"} {
		r := h.result(name)
		if r.ExitReason != protocol.ReasonInvalidRequest || !strings.Contains(r.Error.Message, want) {
			t.Errorf("%s: %+v %+v", name, r, r.Error)
		}
	}
	h.waitFor("mycmd.json moved to log/rejected/", func() bool {
		_, err := os.Stat(filepath.Join(h.dir, protocol.DirRejected, "mycmd.json"))
		return err == nil
	})
	h.waitFor("rejected_count", func() bool { return h.state().RejectedCount == 4 })
	if r := h.result("cmd_14_w2.JSON"); r.CmdID != "w2" || r.Seq != 14 {
		t.Errorf("cmd_14_w2.JSON answered as %q seq %d", r.CmdID, r.Seq)
	}
	found := false
	for _, e := range h.events() {
		if e.Event == protocol.EvRejected && e.Detail["file"] == "queue/mycmd.json" && strings.Contains(stringOf(e.Detail["error"]), "cmd_<seq>_<cmd_id>.json") {
			found = true
		}
	}
	if !found {
		t.Error("no cmd_rejected event names queue/mycmd.json and the rule")
	}
	for p := range plant {
		if _, err := os.Lstat(filepath.Join(h.dir, p)); err == nil {
			t.Errorf("leftover %s not swept", p)
		}
	}
	if _, err := os.Lstat(taken); err == nil {
		t.Error("a taken control directory stays in ctl/")
	}
	if _, err := os.Stat(filepath.Join(h.dir, protocol.DirQueue, "notes.txt")); err != nil {
		t.Errorf("notes.txt was touched: %v", err)
	}
}

// A queue file the runner cannot read is answered with
// the reason, not retried forever.
func TestUnreadableQueueFile(t *testing.T) {
	t.Parallel()
	name := protocol.CommandName(1, "locked")
	if os.Geteuid() != 0 {
		h := newHarness(t).start()
		h.writeFile(rel(protocol.DirQueue, name), `{"cmd_id":"locked","seq":1,"kind":"tcl","payload":"expr 1"}`)
		os.Chmod(filepath.Join(h.dir, protocol.DirQueue, name), 0)
		if r := h.result(name); !strings.Contains(r.Error.Message, "cannot read") {
			t.Fatalf("%+v", r.Error)
		}
		return
	}
	// As root every file is readable: run the runner as nobody, with a
	// command file only root can read.
	base, err := os.MkdirTemp("", "unreadable")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	dir := filepath.Join(base, "s")
	os.Mkdir(dir, 0o700)
	os.Chown(dir, 65534, 65534)
	p := exec.Command(runnerBin, "--session", dir, "--heartbeat", "100ms")
	p.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var stderr testenv.LockedBuffer
	p.Stderr = &stderr
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { p.Process.Signal(syscall.SIGTERM); p.Wait() }()
	(&harness{t: t, dir: dir}).waitFor("the layout", func() bool {
		_, err := os.Stat(filepath.Join(dir, protocol.DirQueue))
		return err == nil
	})
	writeCmd(t, dir, 1, "locked", "expr 1")
	if r := waitResultFile(t, dir, name); r.Error == nil || !strings.Contains(r.Error.Message, "cannot read") {
		t.Fatalf("%+v\n%s", r, stderr.String())
	}
}

// A cmd_<19 digits>_<id>.json (a poisoned seq/hint) is answered under its
// own name, so a master waiting for it learns why.
func TestNineteenDigitSeq(t *testing.T) {
	t.Parallel()
	h := newHarness(t).start()
	name := "cmd_" + strconv.FormatUint(1<<63, 10) + "_x.json"
	h.writeFile(rel(protocol.DirQueue, name), `{"cmd_id":"x","seq":1,"kind":"tcl","payload":"expr 1"}`)
	if r := h.result(name); r.CmdID != "x" || !strings.Contains(r.Error.Message, "at most 18") {
		t.Fatalf("%+v %+v", r, r.Error)
	}
}

// A heartbeat.json left by a seed-protocol runner (no counter,
// no hostname) is no evidence of a live runner: no lock_takeover, and the
// runner starts without watching it.
func TestSeedHeartbeatIgnored(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.writeFile(protocol.FileHeartbeat, `{"timestamp":"1700000000000","runner_pid":4242,"phase":"idle"}`)
	h.start()
	h.result(h.submit("expr 1"))
	h.stop(protocol.StopGraceful)
	if n := countEvents(h.events(), protocol.EvLockTakeover); n != 0 {
		t.Fatalf("a seed-format heartbeat led to %d lock_takeover events", n)
	}
}

// SPEC E: while a command runs, state.json shows its last partial line and
// how long it has been quiet (an interactive prompt waiting for input), and
// how many bytes it has printed, as of the same write.
func TestStateShowsLastLine(t *testing.T) {
	t.Parallel()
	h := newHarness(t).start()
	a := h.submit(`puts "line one"; puts -nonewline "Continue? \[y/n\] "; flush stdout; after 60000`)
	h.waitFor("current_last_line", func() bool {
		st := h.state()
		return st.CurrentLastLine != nil && *st.CurrentLastLine == "Continue? [y/n] " && st.CurrentQuietMS != nil &&
			st.CurrentOutBytes != nil && *st.CurrentOutBytes >= int64(len("line one\nContinue? [y/n] "))
	})
	h.writeFile(protocol.FileCancel, "")
	h.result(a)
	// state.json follows the result within stateDelay: judge the first
	// state that no longer names the command.
	var st protocol.State
	h.waitFor("state.json without the command", func() bool { st = h.state(); return st.CurrentCmdID == nil })
	if st.CurrentLastLine != nil || st.CurrentOutBytes != nil {
		t.Fatalf("current_last_line or current_output_bytes stays after the command: %v %v", st.CurrentLastLine, st.CurrentOutBytes)
	}
}

// What stands at a result's name before the result is written and is not a
// result (a FIFO, a symlink, a directory holding a file) is moved aside:
// the command still gets its one result, a regular file, and an event says
// what was displaced. The symlink's target is never touched.
func TestNonResultDisplaced(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	outside := filepath.Join(t.TempDir(), "target.json")
	if err := os.WriteFile(outside, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	plant := map[string]func(string) error{
		"a FIFO":      func(p string) error { return syscall.Mkfifo(p, 0o600) },
		"a symlink":   func(p string) error { return os.Symlink(outside, p) },
		"a directory": func(p string) error { os.Mkdir(p, 0o700); return os.WriteFile(filepath.Join(p, "x"), nil, 0o600) },
	}
	names := map[string]string{}
	for i, kind := range []string{"a FIFO", "a symlink", "a directory"} {
		name := protocol.CommandName(int64(i+1), fmt.Sprintf("c%d", i+1))
		if err := plant[kind](filepath.Join(h.dir, protocol.DirResult, name)); err != nil {
			t.Fatal(err)
		}
		names[name] = kind
	}
	h.start()
	for range names {
		h.submit("expr 5")
	}
	for name, kind := range names {
		h.waitFor("a regular result over "+kind, func() bool {
			fi, err := os.Lstat(filepath.Join(h.dir, protocol.DirResult, name))
			return err == nil && fi.Mode().IsRegular()
		})
		if r := h.result(name); r.Status != protocol.StatusOK || *r.Value != "5" {
			t.Fatalf("%s over %s: %+v", name, kind, r)
		}
		if fi, err := os.Lstat(filepath.Join(h.dir, protocol.DirResult, name)); err != nil || !fi.Mode().IsRegular() {
			t.Fatalf("result %s is not a regular file: %v", name, err)
		}
	}
	h.waitFor("three displaced events", func() bool {
		seen := map[string]bool{}
		for _, e := range h.events() {
			if d, _ := e.Detail["displaced"].(string); d != "" {
				seen[filepath.Base(d)+" "+e.Detail["was"].(string)] = true
			}
		}
		for name, kind := range names {
			if !seen[name+" "+kind] {
				return false
			}
		}
		return true
	})
	if b, _ := os.ReadFile(outside); string(b) != "keep me" {
		t.Fatalf("the symlink's target was written: %q", b)
	}
}

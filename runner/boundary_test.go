package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/internal/testenv"
	"github.com/skillpilot/skillpilot/protocol"
	"golang.org/x/sys/unix"
)

// readHeartbeatPath reads a heartbeat by path, as a test looking at the
// session from outside does.
func readHeartbeatPath(path string) (protocol.Heartbeat, error) {
	var hb protocol.Heartbeat
	r, err := fsq.OpenRoot(filepath.Dir(path))
	if err != nil {
		return hb, err
	}
	defer r.Close()
	b, _, err := r.ReadFile(filepath.Base(path), maxStateFile)
	if err != nil {
		return hb, err
	}
	return hb, json.Unmarshal(b, &hb)
}

// runnerDirs are the session directories the runner writes into.
var runnerDirs = []string{protocol.DirInflight, protocol.DirResult, protocol.DirOutput, protocol.DirArchive,
	protocol.DirState, protocol.DirLog, protocol.DirAck, protocol.DirRejected, protocol.DirTmp}

// TestSessionRootRefuses checks the root type itself: no symlink is
// followed in any component, nothing outside the session is reached, and
// names that are absolute or climb out are refused. Not parallel: it
// turns fsq.ForceWalk, a switch of the whole process, on and off, which
// would change how every other test's runner opens its files meanwhile.
func TestSessionRootRefuses(t *testing.T) {
	base := t.TempDir()
	dir, out := filepath.Join(base, "s"), filepath.Join(base, "out")
	for _, d := range []string{dir, out, filepath.Join(dir, "a", "b"), filepath.Join(dir, "real")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	must(t, os.WriteFile(filepath.Join(out, "secret"), []byte("x"), 0o600))
	must(t, os.WriteFile(filepath.Join(dir, "a", "b", "f"), []byte("in"), 0o600))
	must(t, os.Symlink(out, filepath.Join(dir, "outlink")))                   // leaves the session
	must(t, os.Symlink(filepath.Join(dir, "real"), filepath.Join(dir, "in"))) // stays inside
	must(t, os.Symlink("b", filepath.Join(dir, "a", "rel")))                  // relative, inside
	must(t, os.Symlink(filepath.Join(out, "secret"), filepath.Join(dir, "a", "b", "last")))
	root, err := fsq.OpenRoot(dir)
	must(t, err)
	defer root.Close()

	for _, force := range []bool{false, true} { // openat2, then the per-component walk
		fsq.ForceWalk(force)
		for _, name := range []string{"outlink/x", "in/x", "a/rel/f", "outlink/secret"} {
			if _, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE, 0o600); !errors.Is(err, fsq.ErrLayout) {
				t.Errorf("openat2=%v: create %s: err %v, want fsq.ErrLayout", !force, name, err)
			}
			if _, _, err := root.ReadFile(name, 10); !errors.Is(err, fsq.ErrLayout) {
				t.Errorf("read %s: err %v, want fsq.ErrLayout", name, err)
			}
			if err := root.WriteAtomicVia("a", name, []byte("y"), 0o600); err == nil {
				t.Errorf("write %s through a symlinked directory succeeded", name)
			}
			if err := root.Rename("a/b/f", name); !errors.Is(err, fsq.ErrLayout) {
				t.Errorf("rename onto %s: err %v, want fsq.ErrLayout", name, err)
			}
			if err := root.Mkdir(name, 0o700); !errors.Is(err, fsq.ErrLayout) {
				t.Errorf("mkdir %s: err %v, want fsq.ErrLayout", name, err)
			}
			if _, err := root.ReadNames(name); err == nil {
				t.Errorf("list %s through a symlink succeeded", name)
			}
		}
		// A symlink as the last component: refused for reading and
		// writing, never followed; rename and remove act on the link.
		if _, _, err := root.ReadFile("a/b/last", 10); !errors.Is(err, fsq.ErrSymlink) {
			t.Errorf("read a/b/last: err %v, want ErrSymlink", err)
		}
		if _, err := root.OpenFile("a/b/last", os.O_WRONLY|os.O_TRUNC, 0); !errors.Is(err, fsq.ErrSymlink) {
			t.Errorf("open a/b/last: err %v, want ErrSymlink", err)
		}
		if err := root.Chmod("a/b/last", 0o777); err == nil {
			t.Error("chmod through a final symlink succeeded")
		}
		if _, err := root.ReadNames("outlink"); !errors.Is(err, fsq.ErrLayout) {
			t.Errorf("list outlink: err %v, want fsq.ErrLayout", err)
		}
		for _, name := range []string{"/etc/passwd", "../out/secret", "a/../../out/secret", "a/./b/f", "", ".", "a//b/f", "a/b/f/"} {
			if _, err := root.OpenFile(name, os.O_RDONLY, 0); !errors.Is(err, fsq.ErrBadName) {
				t.Errorf("open %q: err %v, want fsq.ErrBadName", name, err)
			}
			if err := root.Rename("a/b/f", name); !errors.Is(err, fsq.ErrBadName) {
				t.Errorf("rename to %q: err %v, want fsq.ErrBadName", name, err)
			}
		}
		// Plain names work.
		must(t, root.WriteAtomicVia("a", "a/b/g", []byte("ok"), 0o600))
		if b, _, err := root.ReadFile("a/b/g", 10); err != nil || string(b) != "ok" {
			t.Errorf("read a/b/g: %q %v", b, err)
		}
		must(t, root.WriteAtomic("a/b/h", []byte("d"), 0o600, fsq.Durable))
		must(t, root.RenameNoReplace("a/b/h", "real/h"))
		if err := root.RenameNoReplace("a/b/g", "real/h"); !errors.Is(err, os.ErrExist) {
			t.Errorf("rename no-replace onto an existing file: %v", err)
		}
		must(t, root.RemoveAll("real"))
		must(t, root.Mkdir("real", 0o700))
		if fi, err := root.Lstat("outlink"); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("lstat outlink: %v %v", fi, err)
		}
	}
	fsq.ForceWalk(false)
	// Removing a tree with a symlink inside removes the link, not its target.
	must(t, os.Symlink(out, filepath.Join(dir, "a", "b", "tolink")))
	must(t, root.RemoveAll("a"))
	if b, err := os.ReadFile(filepath.Join(out, "secret")); err != nil || string(b) != "x" {
		t.Fatalf("the target of a removed symlink was touched: %q %v", b, err)
	}
	assertEmptyBut(t, out, "secret")
	if err := root.Moved(); err != nil {
		t.Fatal(err)
	}
	must(t, os.Rename(dir, dir+".old"))
	must(t, os.Mkdir(dir, 0o700))
	if err := root.Moved(); err == nil {
		t.Fatal("a replaced session directory was not noticed")
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// assertEmptyBut fails if dir holds anything but the names given.
func assertEmptyBut(t testing.TB, dir string, keep ...string) {
	t.Helper()
	var found []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if p == dir {
			return nil
		}
		r, _ := filepath.Rel(dir, p)
		for _, k := range keep {
			if r == k {
				return nil
			}
		}
		found = append(found, r)
		return nil
	})
	if len(found) > 0 {
		t.Errorf("the runner wrote outside the session, in %s: %v", dir, found)
	}
}

// swapper exchanges a session directory with a symlink to out, atomically
// (renameat2 RENAME_EXCHANGE): the directory is never missing, so the
// runner never recreates it, and an exchange back restores it exactly.
type swapper struct {
	path, link string
}

func newSwapper(t testing.TB, dir, d, out string) *swapper {
	s := &swapper{path: filepath.Join(dir, d), link: filepath.Join(dir, ".swap-"+strings.ReplaceAll(d, "/", "-"))}
	must(t, os.Symlink(out, s.link))
	t.Cleanup(func() { os.Remove(s.link) }) // Before the harness's invariant check.
	return s
}

func (s *swapper) exchange() error {
	return unix.Renameat2(unix.AT_FDCWD, s.link, unix.AT_FDCWD, s.path, unix.RENAME_EXCHANGE)
}

// swapped reports whether the session path is the symlink now.
func (s *swapper) swapped() bool {
	fi, err := os.Lstat(s.path)
	return err == nil && fi.Mode()&os.ModeSymlink != 0
}

// cancelReq writes a cancel request for a cmd_id nobody has (it is
// answered at once) and returns its name.
func cancelReq(t testing.TB, h *harness, n int) string {
	name := fmt.Sprintf("req_%d_r%d.json", n, n)
	h.writeFile(rel(protocol.DirCtl, name), fmt.Sprintf(`{"req_id":"r%d","seq":%d,"op":"cancel","cmd_id":"nosuch%d"}`, n, n, n))
	return name
}

// TestSwappedDirNotWrittenThrough is issue #22 item 1: each directory the
// runner writes, swapped for a symlink to a directory outside the session
// while the runner serves it (a command running, more queued, a control
// request and a rejected file arriving), is never written through; the
// results and replies come once the directory is back, exactly once, and
// the runner reports the layout error with an event.
func TestSwappedDirNotWrittenThrough(t *testing.T) {
	t.Parallel()
	testenv.Slow(t, "seconds of real tclsh and races")
	for _, d := range runnerDirs {
		t.Run(strings.ReplaceAll(d, "/", "_"), func(t *testing.T) {
			t.Parallel()
			out := t.TempDir()
			h := newHarness(t).start()
			h.result(h.submit("expr 1"))
			sw := newSwapper(t, h.dir, d, out)
			slow := h.submit("after 700; expr 41")
			h.waitFor("the slow command running", func() bool { return h.state().CurrentCmdID != nil })
			must(t, sw.exchange())
			names := []string{slow, h.submit("expr 2*2"), h.submit("puts hello")}
			req := cancelReq(t, h, 1)
			h.writeFile(rel(protocol.DirQueue, "bad.json"), "{") // rejected into log/rejected/
			h.waitFor("the layout error", func() bool {
				if d == protocol.DirLog { // meta.log is at sw.link meanwhile
					st := h.state()
					return st.Phase == protocol.PhaseError && strings.Contains(st.Reason, d+"/")
				}
				b, _ := os.ReadFile(filepath.Join(h.dir, protocol.FileMeta))
				return strings.Contains(string(b), `"layout":"`) && strings.Contains(string(b), d+"/")
			})
			time.Sleep(time.Second) // The slow command ends; several heartbeats and polls.
			assertEmptyBut(t, out)
			must(t, sw.exchange())
			for _, n := range names {
				h.result(n)
			}
			h.waitFor("the reply", func() bool {
				_, err := os.Lstat(filepath.Join(h.dir, protocol.DirAck, req))
				return err == nil
			})
			h.waitFor("usable again", func() bool { return h.state().Phase == protocol.PhaseIdle })
			h.result(h.submit("expr 7"))
			assertEmptyBut(t, out)
			if r := h.result(slow); r.Status != protocol.StatusOK || r.Value == nil || *r.Value != "41" {
				t.Errorf("the command running during the swap: %+v", r)
			}
			assertOneResultEach(t, h, true)
		})
	}
}

// assertOneResultEach checks that every command has one result and (with
// events) one cmd_end or rejection event.
func assertOneResultEach(t testing.TB, h *harness, events bool) {
	t.Helper()
	ends := map[string]int{}
	count := func() {
		clear(ends)
		for _, e := range h.events() {
			if e.Event == protocol.EvCmdEnd || e.Event == protocol.EvRejected {
				ends[e.CmdID]++
			}
		}
	}
	if events {
		// A command's end event follows its result by a moment (the
		// owner logs it once the writer reports the result written).
		h.waitFor("an end event for every command", func() bool {
			count()
			for _, n := range h.submitted {
				if _, id, _ := protocol.ParseCommandName(n); ends[id] == 0 {
					return false
				}
			}
			return true
		})
	}
	count()
	for _, n := range h.submitted {
		_, id, _ := protocol.ParseCommandName(n)
		if _, err := os.Stat(filepath.Join(h.dir, protocol.DirResult, n)); err != nil {
			t.Errorf("%s: no result: %v", n, err)
		}
		if events && ends[id] != 1 {
			t.Errorf("%s: %d end events, want 1", n, ends[id])
		}
	}
}

// TestSwapRace swaps every runner-written directory for a symlink to an
// outside directory and back, continuously, while commands and requests
// run: nothing lands outside, and every command gets exactly one result.
func TestSwapRace(t *testing.T) {
	t.Parallel()
	testenv.Slow(t, "seconds of real tclsh and races")
	out := t.TempDir()
	h := newHarness(t).start()
	h.result(h.submit("expr 1"))
	var sws []*swapper
	for _, d := range runnerDirs {
		sws = append(sws, newSwapper(t, h.dir, d, out))
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var swaps atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			sw := sws[i%len(sws)]
			if err := sw.exchange(); err != nil {
				t.Errorf("swap %s: %v", sw.path, err)
				return
			}
			swaps.Add(1)
			time.Sleep(time.Duration(i%7) * time.Millisecond)
			if err := sw.exchange(); err != nil {
				t.Errorf("swap back %s: %v", sw.path, err)
				return
			}
			time.Sleep(time.Duration(i%5) * time.Millisecond)
		}
	}()
	var reqs []string
	deadline := time.Now().Add(4 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		h.submit(fmt.Sprintf("puts line%d; expr %d", i, i))
		if i%4 == 0 {
			reqs = append(reqs, cancelReq(t, h, 100+i))
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()
	for _, sw := range sws {
		if sw.swapped() {
			t.Fatalf("%s left swapped", sw.path)
		}
	}
	t.Logf("%d commands, %d requests, %d swaps", len(h.submitted), len(reqs), swaps.Load())
	for _, n := range h.submitted {
		h.result(n)
	}
	for _, q := range reqs {
		h.waitFor("reply "+q, func() bool {
			_, err := os.Lstat(filepath.Join(h.dir, protocol.DirAck, q))
			return err == nil
		})
	}
	assertEmptyBut(t, out)
	assertOneResultEach(t, h, true)
	var ok int
	for _, n := range h.submitted {
		if h.result(n).Status == protocol.StatusOK {
			ok++
		}
	}
	t.Logf("%d of %d results ok", ok, len(h.submitted))
}

// TestSessionReplacedNoticed: the session path renamed away and a new
// directory made at it stops the runner with session_lost: it
// records why in the directory it opened (now at the old path's new name),
// writes nothing at the new path (its root is the directory it opened), and
// Run returns ErrSessionLost.
func TestSessionReplacedNoticed(t *testing.T) {
	t.Parallel()
	h := newHarness(t).start()
	h.noCheck = true // The session moves under the harness.
	h.result(h.submit("expr 1"))
	old := h.dir + ".old"
	must(t, os.Rename(h.dir, old))
	must(t, os.Mkdir(h.dir, 0o700))
	if err := h.waitExit(); !errors.Is(err, ErrSessionLost) {
		t.Fatalf("Run returned %v, want ErrSessionLost", err)
	}
	b, _ := os.ReadFile(filepath.Join(old, protocol.FileMeta))
	if !strings.Contains(string(b), "was replaced by another directory") || !strings.Contains(string(b), `"session_lost"`) {
		t.Errorf("meta.log of the held directory does not say why:\n%s", b)
	}
	var st protocol.State
	sb, _ := os.ReadFile(filepath.Join(old, protocol.FileState))
	if err := json.Unmarshal(sb, &st); err != nil || st.Phase != protocol.PhaseStopped || st.Error == nil || st.Error.Code != protocol.CodeSessionLost {
		t.Errorf("state.json of the held directory: %s", sb)
	}
	assertEmptyBut(t, h.dir)
}

// BenchmarkRootWrite compares an observed-state write (tmp/ + rename into
// state/) by path with the same through the session root.
func BenchmarkRootWrite(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "s")
	must(b, makeLayout(dir))
	root, err := fsq.OpenRoot(dir)
	must(b, err)
	defer root.Close()
	data := []byte(`{"counter":1}`)
	b.Run("path", func(b *testing.B) {
		for b.Loop() {
			f, err := os.CreateTemp(filepath.Join(dir, protocol.DirTmp), ".hb.*")
			must(b, err)
			_, err = f.Write(data)
			must(b, err)
			must(b, f.Chmod(0o600))
			must(b, f.Close())
			must(b, os.Rename(f.Name(), filepath.Join(dir, protocol.FileHeartbeat)))
		}
	})
	b.Run("root", func(b *testing.B) {
		for b.Loop() {
			must(b, root.WriteAtomicVia(protocol.DirTmp, protocol.FileHeartbeat, data, 0o600))
		}
	})
	b.Run("claim-path", func(b *testing.B) {
		q, i := filepath.Join(dir, protocol.DirQueue, "x"), filepath.Join(dir, protocol.DirInflight, "x")
		must(b, os.WriteFile(q, data, 0o600))
		for b.Loop() {
			must(b, os.Rename(q, i))
			must(b, os.Rename(i, q))
		}
	})
	b.Run("claim-root", func(b *testing.B) {
		q, i := rel(protocol.DirQueue, "x"), rel(protocol.DirInflight, "x")
		for b.Loop() {
			must(b, root.Rename(q, i))
			must(b, root.Rename(i, q))
		}
	})
}

package runner

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/internal/testenv"
	"github.com/skillpilot/skillpilot/protocol"
)

// A runner must not outlive its session. Its lock file
// deleted or replaced means the session was taken away (an rm -rf under
// way, someone cleaning "stale" locks): the runner stops with its tool,
// exit 5 (ErrSessionLost), and creates nothing, neither the lock nor
// state/. Before, it locked a new file at the path and recreated every
// directory it lost, so rm -rf of a busy session failed ("Directory not
// empty") and the runner served the gutted session.
func TestGoneLockStopsRunner(t *testing.T) {
	t.Parallel()
	for _, what := range []string{"delete " + protocol.FileLock, "delete " + protocol.DirState, "replace " + protocol.FileLock} {
		t.Run(what, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t).start()
			h.noCheck = true
			h.result(h.submit("expr 1"))
			tool := h.state().ToolPID
			for i := 0; i < 20; i++ { // A backlog: the runner is busy.
				h.submit("after 50")
			}
			lock := filepath.Join(h.dir, protocol.FileLock)
			switch what {
			case "delete " + protocol.FileLock:
				must(t, os.Remove(lock))
			case "delete " + protocol.DirState:
				// The runner may write its heartbeat into state/ while it
				// is being emptied, as under rm -rf: try again.
				var err error
				for i := 0; i < 20; i++ {
					if err = os.RemoveAll(filepath.Join(h.dir, protocol.DirState)); err == nil {
						break
					}
				}
				must(t, err)
			default:
				must(t, os.WriteFile(lock+".new", nil, 0o600))
				must(t, os.Rename(lock+".new", lock))
			}
			err := h.waitExit()
			if !errors.Is(err, ErrSessionLost) {
				t.Fatalf("Run: %v, want ErrSessionLost", err)
			}
			switch what {
			case "delete " + protocol.FileLock:
				if _, err := os.Lstat(lock); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("the runner created %s again: %v", protocol.FileLock, err)
				}
			case "delete " + protocol.DirState:
				if _, err := os.Lstat(filepath.Join(h.dir, protocol.DirState)); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("the runner created %s/ again: %v", protocol.DirState, err)
				}
			}
			for _, e := range h.events() {
				if e.Event == protocol.EvWarning && e.Detail["recreated"] != nil {
					t.Errorf("the runner recreated something: %v", e.Detail)
				}
			}
			waitDead(t, tool)
		})
	}
}

// Two session directories gone at once is no accident the runner repairs:
// it recreates neither (phase error, the reason names them) and goes on
// once someone makes one of them again. On the fake tool and clock: the
// runner looks at its directories on each heartbeat (and when it takes a
// command), so with the clock still no look falls between the two
// deletions (one look between them, on a busy machine, found one missing
// and rightly made it again).
func TestGoneTwoDirsNotRecreated(t *testing.T) {
	t.Parallel()
	h := newFakeHarness(t, nil).start()
	h.noCheck = true // Command 1's output and archived file go with the directories.
	first := h.submit("value 1")
	h.result(first)
	h.waitFor("the command file archived", func() bool { // It moves just after the result shows.
		_, err := os.Lstat(filepath.Join(h.dir, protocol.DirArchive, first))
		return err == nil
	})
	for _, d := range []string{protocol.DirOutput, protocol.DirArchive} {
		must(t, os.RemoveAll(filepath.Join(h.dir, d)))
	}
	h.advanceUntil("phase error naming the missing directories", 100*time.Millisecond, func() bool {
		st := h.state()
		return st.Phase == protocol.PhaseError && strings.Contains(st.Reason, "output/") && strings.Contains(st.Reason, "archive/")
	})
	for range 5 { // Heartbeats pass; nothing is made again.
		c0 := h.heartbeatCounter()
		h.advanceUntil("a heartbeat", 100*time.Millisecond, func() bool { return h.heartbeatCounter() > c0 })
	}
	for _, d := range []string{protocol.DirOutput, protocol.DirArchive} {
		if _, err := os.Lstat(filepath.Join(h.dir, d)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s/ was recreated with another directory missing: %v", d, err)
		}
	}
	must(t, os.Mkdir(filepath.Join(h.dir, protocol.DirOutput), 0o700))
	a := h.submit("value 2")
	h.advanceUntil("the next result", 100*time.Millisecond, func() bool {
		_, err := os.Lstat(filepath.Join(h.dir, protocol.DirResult, a))
		return err == nil
	})
	if r := h.result(a); r.Status != protocol.StatusOK {
		t.Fatalf("after one directory came back: %+v", r)
	}
	if _, err := os.Lstat(filepath.Join(h.dir, protocol.DirArchive)); err != nil {
		t.Errorf("the one missing directory was not recreated: %v", err)
	}
}

// rm -rf of a session whose runner has a backlog: the session ends gone
// and the runner exited (5), and nothing reappears afterwards.
func TestGoneRmRfBusySession(t *testing.T) {
	t.Parallel()
	testenv.Slow(t, "seconds of real tclsh and races")
	dir := filepath.Join(t.TempDir(), "s")
	p := startRunnerProc(t, "--session", dir, "--heartbeat", "100ms")
	first := writeCmd(t, dir, 1, "g1", "expr 1")
	waitResultFile(t, dir, first)
	for i := int64(2); i < 3000; i++ {
		writeCmdQuiet(t, dir, i, fmt.Sprintf("g%d", i), "expr 1")
	}
	gone := false
	for attempt := 0; attempt < 20 && !gone; attempt++ {
		out, err := exec.Command("rm", "-rf", dir).CombinedOutput()
		if err != nil {
			t.Logf("rm -rf attempt %d: %v %s", attempt, err, out)
			time.Sleep(300 * time.Millisecond)
		}
		_, serr := os.Lstat(dir)
		gone = errors.Is(serr, os.ErrNotExist)
	}
	if code := p.ExitCode(); code != ExitLost {
		t.Fatalf("runner exit %d, want %d\n%s", code, ExitLost, p.Log())
	}
	if !gone {
		out, err := exec.Command("rm", "-rf", dir).CombinedOutput()
		if err != nil {
			t.Fatalf("rm -rf after the runner exited: %v %s", err, out)
		}
	}
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the session is still there: %v", err)
	}
}

// waitDead waits (bounded) for pid to be gone.
func waitDead(t testing.TB, pid int) {
	t.Helper()
	deadline := time.Now().Add(longWait)
	for pid > 0 && pidAlive(pid) && !isZombie(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("the tool %d outlived its runner", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func isZombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == ')' {
			return i+2 < len(s) && (s[i+2] == 'Z' || s[i+2] == 'X')
		}
	}
	return false
}

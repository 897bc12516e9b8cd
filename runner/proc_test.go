package runner

import (
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/internal/testenv"
)

// startGroup starts argv as the leader of a process group of its own and
// returns its pid; the group is killed at the end of the (sub)test. The
// processes that keep a CPU busy run at nice 19 (it does not change their
// state), so that tests running beside them are not starved.
func startGroup(t *testing.T, argv ...string) int {
	t.Helper()
	cmd := exec.Command("nice", append([]string{"-n", "19"}, argv...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	return cmd.Process.Pid
}

// waitActivity looks at group pgrp every stuckRecheck until ok holds of
// the previous look and this one (a process starts running before it
// settles). It gives up after longWait: the processes run at nice 19, and
// beside the other packages' tests they may wait long for a CPU.
func waitActivity(t *testing.T, pgrp int, what string, ok func(prev *fgActivity, a fgActivity) bool) {
	t.Helper()
	var prev *fgActivity
	for deadline := time.Now().Add(longWait); ; time.Sleep(stuckRecheck) {
		a, err := readActivity(pgrp)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if ok(prev, a) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: never as expected; last look %+v", what, a)
		}
		prev = &a
	}
}

// readActivity on real process groups (PROTOCOL.md 11.1 rule 6): one that
// computes works; one whose processes wait is proven waiting, also beside
// a busy helper thread; one whose main thread exited is judged by its
// other threads; one whose leader is a zombie is found by the walk of
// /proc.
func TestReadActivity(t *testing.T) {
	t.Parallel()
	// The interpreter itself: a version manager's shim (pyenv's runs a
	// dozen programs) would be the group's first processes, at nice 19.
	python := testenv.NeedTool(t, "python3", "python3")
	t.Run("a busy loop works", func(t *testing.T) {
		busy := startGroup(t, "sh", "-c", "while :; do :; done")
		// Until its exec is done and it loops: then it runs or waits to
		// run at every look, and its CPU time grows.
		waitActivity(t, busy, "a busy loop", func(prev *fgActivity, a fgActivity) bool {
			if prev != nil && provenWaiting(prev, a) {
				t.Fatalf("a busy loop: %+v then %+v, proven waiting", *prev, a)
			}
			return prev != nil && prev.working && a.working && a.procs == 1 && a.cpu > prev.cpu
		})
	})
	t.Run("a shell waiting for its sleep waits", func(t *testing.T) {
		asleep := startGroup(t, "sh", "-c", "sleep 60 & wait")
		waitActivity(t, asleep, "sh and its sleep", func(prev *fgActivity, a fgActivity) bool {
			return a.procs == 2 && provenWaiting(prev, a)
		})
	})
	t.Run("a busy helper thread beside a waiting main thread: waits", func(t *testing.T) {
		// A REPL's worker, a licence client: Python's main thread sleeps,
		// the other thread computes.
		helper := startGroup(t, python, "-c", "import threading, time\n"+
			"threading.Thread(target=lambda: [None for _ in iter(int, 1)], daemon=True).start()\ntime.sleep(60)")
		waitActivity(t, helper, "a busy thread beside a sleeping main thread", func(prev *fgActivity, a fgActivity) bool {
			return provenWaiting(prev, a)
		})
	})
	t.Run("a main thread that exited, another thread computing: works", func(t *testing.T) {
		// pthread_exit: the process shows as a zombie while its thread runs.
		exited := startGroup(t, python, "-c", "import ctypes, threading\n"+
			"threading.Thread(target=lambda: [None for _ in iter(int, 1)]).start()\nctypes.CDLL(None).pthread_exit(None)")
		waitActivity(t, exited, "a busy thread after its main thread exited", func(prev *fgActivity, a fgActivity) bool {
			st, err := readProcStat(exited)
			return err == nil && st.state == 'Z' && a.working && a.procs == 1
		})
	})
	t.Run("a zombie leader's group is found", func(t *testing.T) {
		orphaned := startGroup(t, "sh", "-c", "sleep 60 & exit 0")
		for deadline := time.Now().Add(longWait); ; time.Sleep(20 * time.Millisecond) {
			st, _ := readProcStat(orphaned)
			a, err := readActivity(orphaned)
			if st.state == 'Z' && err == nil && a.procs == 1 {
				break // sleep, found although its leader is gone.
			}
			if time.Now().After(deadline) {
				t.Fatalf("the group of an exited leader: %+v, %v; want its sleep", a, err)
			}
		}
	})
	if _, err := readActivity(1 << 30); err == nil {
		t.Error("a group with no process: no error")
	}
}

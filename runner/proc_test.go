package runner

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// startGroup starts argv as the leader of a process group of its own and
// returns its pid; the group is killed at the end of the test.
func startGroup(t *testing.T, argv ...string) int {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
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

// readActivity on real process groups: one that computes is working and
// uses CPU time; one asleep is not, and uses none between two looks.
func TestReadActivity(t *testing.T) {
	t.Parallel()
	busy := startGroup(t, "sh", "-c", "while :; do :; done")
	// Until its exec is done and it loops: then it runs or waits to run
	// at every look, and its CPU time grows.
	first, err := readActivity(busy)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		a, err := readActivity(busy)
		if err != nil {
			t.Fatal(err)
		}
		if a.working && a.procs == 1 && a.cpu > first.cpu {
			if provenWaiting(&first, a) {
				t.Errorf("a busy loop: %+v then %+v, proven waiting", first, a)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a busy loop never seen working: %+v", a)
		}
	}
	asleep := startGroup(t, "sh", "-c", "sleep 60 & wait")
	// Until both the shell and its sleep are asleep (each starts running).
	var prev fgActivity
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if prev, err = readActivity(asleep); err != nil {
			t.Fatal(err)
		}
		if !prev.working && prev.procs == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sh and sleep never both asleep: %+v", prev)
		}
	}
	time.Sleep(stuckRecheck)
	now, err := readActivity(asleep)
	if err != nil {
		t.Fatal(err)
	}
	if !provenWaiting(&prev, now) {
		t.Errorf("sh waiting for its sleep: %+v then %+v, want proven waiting", prev, now)
	}
	// A group whose leader exited (a zombie until reaped) lives on in its
	// other processes: found by the walk of /proc.
	orphaned := startGroup(t, "sh", "-c", "sleep 60 & exit 0")
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		st, _ := readProcStat(orphaned)
		a, err := readActivity(orphaned)
		if st.state == 'Z' && err == nil && a.procs == 1 {
			break // sleep, found although its leader is gone.
		}
		if time.Now().After(deadline) {
			t.Fatalf("the group of an exited leader: %+v, %v; want its sleep", a, err)
		}
	}
	// A busy helper thread beside a main thread that waits (a REPL's
	// worker, a licence client): the process waits. Python's main thread
	// sleeps; the other computes.
	helper := startGroup(t, "python3", "-c", "import threading, time\n"+
		"threading.Thread(target=lambda: [None for _ in iter(int, 1)], daemon=True).start()\ntime.sleep(60)")
	waitActivity(t, helper, "a busy thread beside a sleeping main thread", func(prev *fgActivity, a fgActivity) bool {
		return provenWaiting(prev, a)
	})
	// A main thread that exited (pthread_exit: the process shows as a
	// zombie) while another thread computes: the process works.
	exited := startGroup(t, "python3", "-c", "import ctypes, threading\n"+
		"threading.Thread(target=lambda: [None for _ in iter(int, 1)]).start()\nctypes.CDLL(None).pthread_exit(None)")
	waitActivity(t, exited, "a busy thread after its main thread exited", func(prev *fgActivity, a fgActivity) bool {
		st, err := readProcStat(exited)
		return err == nil && st.state == 'Z' && a.working && a.procs == 1
	})
	if _, err := readActivity(1 << 30); err == nil {
		t.Error("a group with no process: no error")
	}
}

// waitActivity looks at group pgrp every stuckRecheck until ok holds of
// the previous look and this one (20 s at most: a process starts running
// before it settles).
func waitActivity(t *testing.T, pgrp int, what string, ok func(prev *fgActivity, a fgActivity) bool) {
	t.Helper()
	var prev *fgActivity
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(stuckRecheck) {
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

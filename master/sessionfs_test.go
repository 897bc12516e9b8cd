package master

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/protocol"
)

// swapForSymlink moves the session directory sub to a directory outside
// the session and leaves a symlink to it in its place (PROTOCOL.md section
// 21), returning the outside directory.
func swapForSymlink(t *testing.T, dir, sub string) string {
	t.Helper()
	outside := filepath.Join(t.TempDir(), "outside-"+strings.ReplaceAll(sub, "/", "-"))
	real := filepath.Join(dir, sub)
	if err := os.Rename(real, outside); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, real); err != nil {
		t.Fatal(err)
	}
	return outside
}

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	return names
}

// wantIOError checks that err is an io_error naming the symlink.
func wantIOError(t *testing.T, what string, err error) {
	t.Helper()
	if code, exit := Classify(err); code != CodeIO || exit != ExitIO {
		t.Fatalf("%s: %v classified %s (%d), want io_error", what, err, code, exit)
	}
	if !errors.Is(err, fsq.ErrLayout) || !strings.Contains(err.Error(), "symlink") {
		t.Fatalf("%s: %v, want an error wrapping fsq.ErrLayout that names the symlink", what, err)
	}
}

// aliveFake makes the fake session's runner look alive: a fresh
// heartbeat and its lock held (by this process, on another open file).
func aliveFake(t *testing.T, dir string) {
	t.Helper()
	hb := `{"protocol_version":1,"timestamp":"2026-11-26T12:00:01Z","counter":5,"hostname":"h","runner_pid":1,"session_id":"s1","phase":"idle","interval_ms":1000}`
	if err := os.WriteFile(filepath.Join(dir, protocol.FileHeartbeat), []byte(hb), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, protocol.FileLock), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
}

const idleState = `{"protocol_version":1,"phase":"idle","session_id":"s1","runner_pid":1,"hostname":"h","current_cmd_id":null,"queue_depth":0,"kind":"tcl","updated_at":"2026-11-26T12:00:00Z","commands_done":0,"tool_starts":1}`

// A session directory swapped for a symlink to a directory outside the
// session: the master neither writes nor reads through it and reports
// io_error (as the Python master's SymlinkedDirTest).
func TestSymlinkedQueueIsNeverWrittenThrough(t *testing.T) {
	s, dir := fakeSession(t, idleState)
	outside := swapForSymlink(t, dir, protocol.DirQueue)
	_, err := s.Submit(context.Background(), "puts hi", SubmitOptions{})
	wantIOError(t, "submit", err)
	_, err = s.Submit(context.Background(), "puts hi", SubmitOptions{Extra: map[string]any{"k": 1}})
	wantIOError(t, "submit extra", err)
	if got := listDir(t, outside); len(got) != 0 {
		t.Fatalf("written through the symlinked queue/: %v", got)
	}
	n, err := s.QueueDepth()
	if n != 0 {
		t.Fatalf("queue depth %d counted through the symlink", n)
	}
	wantIOError(t, "queue depth", err) // Said, not a silent 0.
}

func TestSymlinkedResultIsNeverReadThrough(t *testing.T) {
	s, dir := fakeSession(t, idleState)
	c, err := s.Submit(context.Background(), "x", SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	outside := swapForSymlink(t, dir, protocol.DirResult)
	writeJSON(t, filepath.Join(outside, c.Name), map[string]any{"protocol_version": 1, "cmd_id": c.ID, "seq": c.Seq, "status": "ok"}) // A planted result.
	_, err = c.Result()
	wantIOError(t, "result", err)
	s.WaitForRunner = time.Hour
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = c.Wait(ctx, WaitOptions{})
	wantIOError(t, "wait", err)
	if got, err := s.Command(c.ID); err != nil || got.Name != c.Name {
		t.Fatalf("the command is still found in queue/: %v %v", got, err)
	}
}

func TestSymlinkedCtlAndStateAreNeverWrittenThrough(t *testing.T) {
	s, dir := fakeSession(t, idleState)
	aliveFake(t, dir)
	outCtl := swapForSymlink(t, dir, protocol.DirCtl)
	before := listDir(t, outCtl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := s.Cancel(ctx, "abc")
	wantIOError(t, "cancel", err)
	if got := listDir(t, outCtl); !slices.Equal(got, before) {
		t.Fatalf("written through the symlinked ctl/: %v, was %v", got, before)
	}

	_, dir2 := fakeSession(t, idleState)
	s2, err := Open(dir2)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	outState := swapForSymlink(t, dir2, protocol.DirState)
	before = listDir(t, outState)
	_, err = s2.WriteLease("l1", 30*time.Second)
	wantIOError(t, "write lease", err)
	if got := listDir(t, outState); !slices.Equal(got, before) {
		t.Fatalf("written through the symlinked state/: %v, was %v", got, before)
	}
	if _, err := s2.ReadState(); !errors.Is(err, fsq.ErrLayout) {
		t.Fatalf("read state through the symlinked state/: %v", err)
	}
}

// A Session follows its path: a session directory replaced by another
// (removed and made again) is reached anew, not through the old one.
func TestSessionFollowsAReplacedDirectory(t *testing.T) {
	s, dir := fakeSession(t, idleState)
	if _, err := s.Submit(context.Background(), "x", SubmitOptions{}); err != nil {
		t.Fatal(err)
	}
	old := dir + ".old"
	if err := os.Rename(dir, old); err != nil {
		t.Fatal(err)
	}
	for _, d := range protocol.Dirs {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	c, err := s.Submit(context.Background(), "y", SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, protocol.DirQueue, c.Name)); err != nil {
		t.Fatalf("not written in the new directory: %v", err)
	}
	if got := listDir(t, filepath.Join(old, protocol.DirQueue)); len(got) != 1 {
		t.Fatalf("old queue/ holds %v, want only the first command", got)
	}
}

// A FIFO planted at the runner's lock never blocks the lock probe (it is
// an error the probe reports as held, like any but a missing file: the
// heartbeat decides).
func TestLockProbeNeverBlocksOnAFIFO(t *testing.T) {
	s, dir := fakeSession(t, idleState)
	if err := syscall.Mkfifo(filepath.Join(dir, protocol.FileLock), 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan bool, 1)
	go func() { done <- s.io.LockHeld() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("lockHeld blocked on a FIFO")
	}
}

// Every file the Go master writes is 0660 whatever the umask
// (PROTOCOL.md §19.1), seq/ reservations included, as the Python and Tcl
// masters' are: under umask 022 the exclusive create alone gave 0640.
func TestMasterFilesAre0660UnderUmask(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	s, dir := fakeSession(t, idleState)
	c, err := s.Submit(context.Background(), "puts hi", SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n, err := s.Core().AllocSeq()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.WriteLease("L", time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{
		filepath.Join(protocol.DirSeq, protocol.SeqName(c.Seq)),
		filepath.Join(protocol.DirSeq, protocol.SeqName(n)),
		protocol.FileSeqHint,
		filepath.Join(protocol.DirQueue, c.Name),
		protocol.FileLease,
	} {
		fi, err := os.Stat(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != 0o660 {
			t.Errorf("%s: mode %v, want 0660 whatever the umask", rel, got)
		}
	}
}

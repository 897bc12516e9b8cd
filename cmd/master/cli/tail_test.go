package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/internal/sessionio"
	"github.com/skillpilot/skillpilot/internal/testenv"
	"github.com/skillpilot/skillpilot/internal/testrunner"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
)

// followTail runs "master tail -f" with args on dir until its output holds
// want, or 10 s pass; it returns the output.
func followTail(t *testing.T, dir, want string, args ...string) string {
	t.Helper()
	var out testenv.LockedBuffer
	c := &cli{stdout: &trackWriter{w: &out}, stderr: &bytes.Buffer{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.run(ctx, "tail", append([]string{"-f", "--session", dir}, args...)) }()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), want) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(150 * time.Millisecond) // More than one poll: nothing else comes.
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// tail -f starts with the last 10 lines, as tail(1) does;
// --from-start and --from start where they say.
func TestTailFollowStartsAtTheLastLines(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{protocol.DirQueue, "log"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	var spool strings.Builder
	for i := 1; i <= 25; i++ {
		fmt.Fprintf(&spool, "line %d\r\r\n", i)
	}
	spool.WriteString("% ")
	if err := os.WriteFile(filepath.Join(dir, protocol.FileSpool), []byte(spool.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	got := followTail(t, dir, "% ")
	var want strings.Builder
	for i := 17; i <= 25; i++ {
		fmt.Fprintf(&want, "line %d\r\r\n", i)
	}
	want.WriteString("% ")
	if got != want.String() {
		t.Errorf("tail -f printed %q, want the last 10 lines %q", got, want.String())
	}
	if got := followTail(t, dir, "% ", "--from-start"); got != spool.String() {
		t.Errorf("tail -f --from-start printed %q, want all of it", got)
	}
	if got := followTail(t, dir, "% ", "--from", "0"); got != spool.String() {
		t.Errorf("tail -f --from 0 printed %q, want all of it", got)
	}
	// A spool of fewer lines is printed whole.
	if err := os.WriteFile(filepath.Join(dir, protocol.FileSpool), []byte("a\nb\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := followTail(t, dir, "b\n"); got != "a\nb\n" {
		t.Errorf("tail -f of two lines printed %q", got)
	}
}

// The clean view ends a command that has no done marker where its cmd_end
// says: the restarted tool's prompts are not its output.
func TestCleanViewCutAtCmdEnd(t *testing.T) {
	dir := t.TempDir()
	spool := "% \r\r\n__SP_BEGIN__ a\r\r\nearly\r\r\n" + "% % \r\r\n__SP_DONE__ sync-x-3 rc=0\r\r\n% \r\r\n" +
		"__SP_BEGIN__ b\r\r\nx\r\r\n\r\r\n__SP_DONE__ b rc=0 v= vt=0\r\r\n% "
	end := int64(strings.Index(spool, "% % "))
	meta := fmt.Sprintf(`{"event":"cmd_end","cmd_id":"a","spool_start":3,"spool_end":%d}`+"\n", end)
	if err := os.WriteFile(filepath.Join(dir, "meta.log"), []byte(meta), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, step := range []int{1, 2, 5, len(spool)} {
		var out bytes.Buffer
		cw := &cleanWriter{w: &out, ends: &cmdEnds{path: filepath.Join(dir, "meta.log")}}
		for i := 0; i < len(spool); i += step {
			cw.Write([]byte(spool[i:min(i+step, len(spool))]))
		}
		if out.String() != "early\nx\n\r\r" { // The \r before the runner's newline are x's, as in its output file.
			t.Errorf("chunks of %d: %q, want %q", step, out.String(), "early\nx\n\r\r")
		}
	}
}

// An interrupted wait says what becomes of the command: still queued or
// running, with how to cancel it; --cancel-on-interrupt cancels it.
func TestWaitInterrupted(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s")
	testrunner.Start(t, dir)
	if _, err := master.WaitReady(context.Background(), dir, master.WaitOptions{}); err != nil {
		t.Fatal(err)
	}
	interruptedWait := func(args ...string) (string, error) {
		var stderr testenv.LockedBuffer
		c := &cli{stdin: strings.NewReader(""), stdout: &trackWriter{w: &bytes.Buffer{}}, stderr: &stderr}
		ctx, cancel := context.WithCancelCause(context.Background())
		done := make(chan error, 1)
		go func() { done <- c.run(ctx, args[0], append(args[1:], "--session", dir)) }()
		time.Sleep(300 * time.Millisecond)
		cancel(&sessionio.InterruptedError{Signal: syscall.SIGINT})
		err := <-done
		return stderr.String(), err
	}
	run := func(args ...string) {
		t.Helper()
		c := &cli{stdin: strings.NewReader(""), stdout: &trackWriter{w: &bytes.Buffer{}}, stderr: &bytes.Buffer{}}
		if err := c.run(context.Background(), args[0], append(args[1:], "--session", dir)); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
	}
	run("submit", "--id", "r1", "after 60000")
	run("submit", "--id", "q1", "after 60000")
	s, err := master.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if st, _ := s.Status(context.Background()); st.CurrentCmdID == "r1" {
			break // r1 runs, q1 waits behind it.
		}
		if time.Now().After(deadline) {
			t.Fatal("r1 did not start")
		}
	}
	for _, tc := range []struct{ id, want string }{
		{"r1", "master: r1 is still running; master cancel r1 --session " + dir + "\n"},
		{"q1", "master: q1 is still queued; master cancel q1 --session " + dir + "\n"},
	} {
		stderr, err := interruptedWait("wait", tc.id)
		if _, exit := master.Classify(err); exit != 130 {
			t.Errorf("wait %s: %v (exit %d), want exit 130", tc.id, err, exit)
		}
		if stderr != tc.want {
			t.Errorf("wait %s said %q, want %q", tc.id, stderr, tc.want)
		}
	}
	stderr, _ := interruptedWait("wait", "--cancel-on-interrupt", "q1")
	if !strings.Contains(stderr, "cancelled on interrupt: cancelled_queued") {
		t.Errorf("wait --cancel-on-interrupt on a queued command said %q", stderr)
	}
	stderr, err = interruptedWait("wait", "--cancel-on-interrupt", "r1")
	if _, exit := master.Classify(err); exit != 130 || !strings.Contains(stderr, "cancelled on interrupt: cancelled_running") {
		t.Errorf("wait --cancel-on-interrupt: %v, said %q", err, stderr)
	}
}

// Interrupted, submit --wait ends the partial last line of the output it
// streamed with a newline, as a finished wait does before its value.
func TestWaitInterruptedEndsPartialLine(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s")
	testrunner.Start(t, dir)
	if _, err := master.WaitReady(context.Background(), dir, master.WaitOptions{}); err != nil {
		t.Fatal(err)
	}
	var out testenv.LockedBuffer
	c := &cli{stdin: strings.NewReader(""), stdout: &trackWriter{w: &out}, stderr: &bytes.Buffer{}}
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- c.run(ctx, "submit", []string{"--session", dir, "--id", "p1", "--wait", "puts -nonewline partial-line; flush stdout; after 60000"})
	}()
	for deadline := time.Now().Add(time.Minute); !strings.Contains(out.String(), "partial-line"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the partial line was never streamed")
		}
	}
	cancel(&sessionio.InterruptedError{Signal: syscall.SIGINT})
	if err := <-done; err == nil {
		t.Fatal("no error after the interrupt")
	}
	if got := out.String(); got != "partial-line\n" {
		t.Errorf("stdout %q, want %q", got, "partial-line\n")
	}
	s, _ := master.Open(dir)
	_, _ = s.Cancel(context.Background(), "p1")
}

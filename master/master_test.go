package master

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/cmd/runner/runnercli"
	"github.com/skillpilot/skillpilot/internal/sessioncheck"
	"github.com/skillpilot/skillpilot/internal/testrunner"
	"github.com/skillpilot/skillpilot/protocol"
	"github.com/skillpilot/skillpilot/runner"
)

const longWait = 90 * time.Second

func TestMain(m *testing.M) {
	if os.Getenv("MASTER_SUBMIT_HELPER") != "" {
		os.Exit(submitHelper())
	}
	if os.Getenv("MASTER_RUNNER_HELPER") != "" {
		os.Exit(runnercli.Main(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// submitHelper submits $N commands to $SESSION and prints their seqs.
func submitHelper() int {
	s, err := Open(os.Getenv("SESSION"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var n int
	fmt.Sscan(os.Getenv("N"), &n)
	for i := 0; i < n; i++ {
		c, err := s.Submit(context.Background(), fmt.Sprintf("expr %d", i), SubmitOptions{})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println(c.Seq, c.Name)
	}
	return 0
}

// startRunner runs a runner in-process on a new session until the test ends.
func startRunner(t testing.TB, mods ...func(*runner.Config)) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "sess")
	testrunner.StartChecked(t, dir, sessioncheck.Options{AllowQueued: true}, mods...)
	return dir
}

// stopWait stops the runner and waits until it has stopped.
func stopWait(ctx context.Context, s *Session, mode protocol.StopMode) (*protocol.ControlReply, error) {
	p, err := s.Stop(ctx, mode)
	if err != nil {
		return nil, err
	}
	return p.Wait(ctx)
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), longWait)
	t.Cleanup(cancel)
	return c
}

func TestSubmitWaitRun(t *testing.T) {
	dir := startRunner(t)
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Submit(ctx(t), "puts hello; set x 5", SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Wait(ctx(t), WaitOptions{})
	if err != nil || res.Status != protocol.StatusOK || *res.Value != "5" {
		t.Fatalf("%+v %v", res, err)
	}
	out, _ := c.Output(0, 0)
	if string(out) != "hello\n" {
		t.Errorf("output %q", out)
	}
	if part, _ := c.Output(1, 3); string(part) != "ell" {
		t.Errorf("byte range %q", part)
	}
	_, err = s.Run(ctx(t), "error bad", SubmitOptions{})
	var re *ResultError
	if !errors.Is(err, ErrCommandFailed) || !errors.As(err, &re) || re.Result.Error.Message != "bad" {
		t.Fatalf("%v", err)
	}
	_, err = s.Run(ctx(t), "after 10000", SubmitOptions{Timeout: 200 * time.Millisecond})
	if !errors.Is(err, ErrCommandTimeout) {
		t.Fatalf("%v", err)
	}
	c, _ = s.Submit(ctx(t), "after 10000", SubmitOptions{})
	short, cancel := context.WithTimeout(ctx(t), 100*time.Millisecond)
	defer cancel()
	if _, err := c.Wait(short, WaitOptions{}); !errors.Is(err, ErrWaitTimeout) {
		t.Fatalf("%v", err)
	}
	if _, err := s.Cancel(ctx(t), c.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Wait(ctx(t), WaitOptions{}); !errors.Is(err, ErrCancelled) {
		t.Fatalf("%v", err)
	}
	if c2, err := s.Command(c.ID); err != nil || c2.Name != c.Name {
		t.Fatalf("lookup by id: %v %v", c2, err)
	}
	if _, err := Open(filepath.Join(t.TempDir(), "nope")); !errors.Is(err, ErrSessionMissing) {
		t.Fatalf("%v", err)
	}
}

// 100 commands from 4 processes at once: every seq unique, every command
// has a result.
func TestConcurrentSubmitters(t *testing.T) {
	dir := startRunner(t)
	const procs, each = 4, 25
	var outs []*bytes.Buffer
	var cmds []*exec.Cmd
	for i := 0; i < procs; i++ {
		c := exec.Command(os.Args[0], "-test.run=^$")
		c.Env = append(os.Environ(), "MASTER_SUBMIT_HELPER=1", "SESSION="+dir, fmt.Sprintf("N=%d", each))
		b := &bytes.Buffer{}
		c.Stdout, c.Stderr = b, os.Stderr
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		outs, cmds = append(outs, b), append(cmds, c)
	}
	seqs := map[string]bool{}
	var names []string
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(outs[i].String()), "\n") {
			f := strings.Fields(line)
			if seqs[f[0]] {
				t.Fatalf("seq %s allocated twice", f[0])
			}
			seqs[f[0]] = true
			names = append(names, f[1])
		}
	}
	if len(names) != procs*each {
		t.Fatalf("%d commands", len(names))
	}
	s, _ := Open(dir)
	for _, n := range names {
		seq, id, _ := protocol.ParseCommandName(n)
		c := &Command{s: s, ID: id, Seq: seq, Name: n}
		if r, err := c.Wait(ctx(t), WaitOptions{}); err != nil || r.Status != protocol.StatusOK {
			t.Fatalf("%s: %v", n, err)
		}
	}
}

// WaitFor on a spool the test writes itself, in pieces.
func TestWaitForCursorRules(t *testing.T) {
	dir := t.TempDir()
	for _, d := range protocol.Dirs {
		os.MkdirAll(filepath.Join(dir, d), 0o700)
	}
	spool := filepath.Join(dir, protocol.FileSpool)
	os.WriteFile(spool, []byte("alpha DONE-1 beta DONE-2 "), 0o600)
	s, _ := Open(dir)
	s.PollInterval = 20 * time.Millisecond
	re := regexp.MustCompile(`DONE-\d`)
	m, err := s.WaitFor(ctx(t), re, 0)
	if err != nil || m.Text != "DONE-1" || m.Start != 6 || m.ResumeCursor != 12 {
		t.Fatalf("first: %+v %v", m, err)
	}
	// Resuming from the cursor finds the next match, never skipping one.
	m, err = s.WaitFor(ctx(t), re, m.ResumeCursor)
	if err != nil || m.Text != "DONE-2" || m.ResumeCursor != 24 {
		t.Fatalf("second: %+v %v", m, err)
	}
	// A match split across two writes.
	go func() {
		f, _ := os.OpenFile(spool, os.O_APPEND|os.O_WRONLY, 0)
		defer f.Close()
		time.Sleep(50 * time.Millisecond)
		f.WriteString("gamma DO")
		time.Sleep(80 * time.Millisecond)
		f.WriteString("NE-3 tail")
	}()
	m, err = s.WaitFor(ctx(t), re, m.ResumeCursor)
	if err != nil || m.Text != "DONE-3" || m.Start != 31 {
		t.Fatalf("split: %+v %v", m, err)
	}
	// Timeout: the cursor becomes the spool size.
	short, cancel := context.WithTimeout(ctx(t), 100*time.Millisecond)
	defer cancel()
	m2, err := s.WaitFor(short, re, m.ResumeCursor)
	fi, _ := os.Stat(spool)
	if !errors.Is(err, ErrWaitTimeout) || m2.ResumeCursor != fi.Size() {
		t.Fatalf("timeout: %+v %v (size %d)", m2, err, fi.Size())
	}
}

func TestTailAndWaitForLive(t *testing.T) {
	dir := startRunner(t)
	s, _ := Open(dir)
	from, _ := s.SpoolSize()
	if _, err := s.Run(ctx(t), "puts needle-42", SubmitOptions{}); err != nil {
		t.Fatal(err)
	}
	m, err := s.WaitFor(ctx(t), regexp.MustCompile(`needle-\d+`), from)
	if err != nil || m.Text != "needle-42" {
		t.Fatalf("%+v %v", m, err)
	}
	var buf bytes.Buffer
	cur, err := s.Tail(ctx(t), &buf, from, false)
	if err != nil || !strings.Contains(buf.String(), "needle-42") || cur <= from {
		t.Fatalf("tail %q %d %v", buf.String(), cur, err)
	}
}

func TestStatusAndStop(t *testing.T) {
	dir := startRunner(t)
	s, _ := Open(dir)
	if _, err := s.Run(ctx(t), "expr 1", SubmitOptions{}); err != nil {
		t.Fatal(err)
	}
	// state.json follows busy/idle flips within 20 ms.
	waitUntil(t, func() bool {
		st, err := s.Status(ctx(t))
		return err == nil && st.Alive && st.Phase == protocol.PhaseIdle && st.CommandsDone == 1
	})
	c, _ := s.Submit(ctx(t), "puts working; flush stdout; after 600; expr 2", SubmitOptions{})
	waitUntil(t, func() bool { st, _ := s.Status(ctx(t)); return st.CurrentCmdID == c.ID })
	if _, err := stopWait(ctx(t), s, protocol.StopGraceful); err != nil {
		t.Fatal(err)
	}
	if r, err := c.Wait(ctx(t), WaitOptions{}); err != nil || *r.Value != "2" {
		t.Fatalf("graceful stop must finish the command: %v", err)
	}
	st, _ := s.Status(ctx(t))
	if st.Alive || st.Phase != protocol.PhaseStopped {
		t.Fatalf("%+v", st)
	}
	if alive, why := s.Alive(ctx(t)); alive || why == "" {
		t.Fatalf("alive %v (%s)", alive, why)
	}
}

func waitUntil(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(longWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition never held")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// KeepLease keeps the runner alive well past the first expiry; when it
// stops, the lease expires and the runner stops.
func TestKeepLease(t *testing.T) {
	dir := startRunner(t)
	s, _ := Open(dir)
	lctx, stop := context.WithCancel(ctx(t))
	errs := s.KeepLease(lctx, time.Second) // Renewed every 333 ms: a stall of under 600 ms is no expiry.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for err := range errs {
			t.Errorf("lease: %v", err)
		}
	}()
	if r, err := s.Run(ctx(t), "after 3000; expr 3", SubmitOptions{}); err != nil || *r.Value != "3" {
		t.Fatalf("%v", err)
	}
	stop()
	wg.Wait()
	waitUntil(t, func() bool { st, _ := s.Status(ctx(t)); return st.Phase == protocol.PhaseStopped })
}

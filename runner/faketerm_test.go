package runner

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// fakeBehavior says how a fake tool acts.
type fakeBehavior struct {
	startErr error // starting it fails (a broken tool path)
	bootExit *int  // it exits with this code when the helpers are typed
	mute     bool  // it never answers anything
	// onInt: "prompt" (an EDA shell: the running payload fails with
	// "interrupted" and the prompt returns), "die" (plain tclsh: SIGINT
	// kills it), "deaf" (nothing happens).
	onInt string
	// onTerm: "" (SIGTERM kills it) or "ignore".
	onTerm string
	echo   bool // its terminal echoes input (Echo reports true)
	stuck  bool // it never reads its input: Input blocks until aborted
}

// fakeTool plays a Tcl tool's part over channels: it answers the runner's
// helper calls (::__sp::sync, ::__sp::ev, ::__sp::src) the way the real
// helpers do, and runs payloads written in a tiny language, one statement
// per line:
//
//	print TEXT    prints TEXT and a newline     printn TEXT  without newline
//	value V       the payload's result is V     error MSG    Tcl error MSG
//	exit N        the tool exits with N         hang         wait for a signal
//	gets          reads an input line L and prints "got L"
//
// After the done marker it drops input lines up to the runner's fence
// line, as the real helpers do (it notes "dropped L" for each).
type fakeTool struct {
	b       fakeBehavior
	pid     int
	out     chan chunk
	exited  chan toolExit
	lines   chan string
	intr    chan struct{}
	sigs    chan syscall.Signal
	closed  chan struct{}
	dead    chan struct{}
	events  chan string // what it did, for the test: "hang", "sig SIGTERM", ...
	clk     *fakeClock
	notes   []fakeNote // the same, with the fake time
	mu      sync.Mutex
	partial string
	once    sync.Once
	endOnce sync.Once
	fencing string   // the fence line it drops input up to ("" when none)
	inputs  []string // what reached it through Input, in order
}

var fakePids = struct {
	sync.Mutex
	n int
}{n: 100000}

func newFakeTool(b fakeBehavior, clk *fakeClock) *fakeTool {
	fakePids.Lock()
	fakePids.n++
	pid := fakePids.n
	fakePids.Unlock()
	t := &fakeTool{b: b, pid: pid, out: make(chan chunk, 64), exited: make(chan toolExit, 1),
		lines: make(chan string, 256), intr: make(chan struct{}, 1), sigs: make(chan syscall.Signal, 8),
		closed: make(chan struct{}), dead: make(chan struct{}), events: make(chan string, 256), clk: clk}
	go t.run()
	return t
}

func (t *fakeTool) Output() <-chan chunk    { return t.out }
func (t *fakeTool) Exited() <-chan toolExit { return t.exited }
func (t *fakeTool) Pid() int                { return t.pid }
func (t *fakeTool) StartTime() uint64       { return 1 }
func (t *fakeTool) Resize(int, int) error   { return nil }

func (t *fakeTool) Echo() (bool, error)           { return t.b.echo, nil }
func (t *fakeTool) RestoreModes() (string, error) { return "", nil }

func (t *fakeTool) SignalForeground(sig syscall.Signal) error {
	t.note("fg " + sigName(sig))
	return nil
}

func (t *fakeTool) Input(p []byte, abort <-chan struct{}) (int, error) {
	if t.b.stuck {
		t.note("input stuck")
		<-abort
		return 0, os.ErrDeadlineExceeded
	}
	t.mu.Lock()
	t.inputs = append(t.inputs, string(p))
	t.mu.Unlock()
	if t.b.echo {
		t.emit(string(p)) // The terminal's echo, before the tool reads.
	}
	_, err := t.Write(p)
	return len(p), err
}

// inputsSoFar returns what reached the tool through Input.
func (t *fakeTool) inputsSoFar() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.inputs...)
}

func (t *fakeTool) Write(p []byte) (int, error) {
	select {
	case <-t.dead:
		return 0, syscall.EIO
	default:
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.partial += string(p)
	for {
		i := strings.IndexByte(t.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		select {
		case t.lines <- t.partial[:i]:
		default:
			return 0, errors.New("fake tool: input buffer full")
		}
		t.partial = t.partial[i+1:]
	}
}

// PendingInput: the fake reads every line as it is written.
func (t *fakeTool) PendingInput() (int, error) { return 0, nil }

// Activity: the fake works only when a line arrives, so between lines it
// is asleep, and uses no CPU time.
func (t *fakeTool) Activity() (fgActivity, error) { return fgActivity{procs: 1}, nil }

// FlushInput notes the flush.
func (t *fakeTool) FlushInput() error {
	t.note("flush input")
	return nil
}

// Interrupt and Signal note the call at once (on the runner's goroutine),
// so the fake time of a note is when the runner acted.
func (t *fakeTool) Interrupt() error {
	t.note("sent SIGINT")
	select {
	case t.intr <- struct{}{}:
	default:
	}
	return nil
}

func (t *fakeTool) Signal(sig syscall.Signal) error {
	t.note("sent " + sigName(sig))
	select {
	case t.sigs <- sig:
	default:
	}
	return nil
}

func (t *fakeTool) Close() error {
	t.once.Do(func() { close(t.closed) })
	return nil
}

// fakeNote is something a fake tool did, at a time of the fake clock.
type fakeNote struct {
	what string
	at   time.Time
}

// noted returns when the tool first did what (ok false if it did not).
func (t *fakeTool) noted(what string) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, n := range t.notes {
		if n.what == what {
			return n.at, true
		}
	}
	return time.Time{}, false
}

func (t *fakeTool) note(s string) {
	if t.clk != nil {
		t.mu.Lock()
		t.notes = append(t.notes, fakeNote{s, t.clk.Now()})
		t.mu.Unlock()
	}
	select {
	case t.events <- s:
	default:
	}
}

func (t *fakeTool) emit(s string) {
	select {
	case t.out <- newChunk([]byte(s)):
	case <-t.closed:
	}
}

// end finishes the tool: its output ends, then it is reaped.
func (t *fakeTool) end(code *int, sig string) {
	t.endOnce.Do(func() {
		close(t.dead)
		close(t.out)
		t.exited <- toolExit{code: code, signal: sig}
		t.note("exit")
	})
}

func exitCode(n int) *int { return &n }

func (t *fakeTool) run() {
	for {
		select {
		case <-t.closed:
			t.end(nil, "SIGHUP")
			return
		case sig := <-t.sigs:
			if t.signalled(sig) {
				return
			}
		case <-t.intr:
			t.note("intr idle")
			if t.b.onInt == "die" {
				t.end(nil, "SIGINT")
				return
			}
		case line := <-t.lines:
			if t.b.mute {
				continue
			}
			if t.fencing != "" {
				if strings.HasSuffix(line, t.fencing) {
					t.fencing = ""
				} else {
					t.note("dropped " + line)
				}
				continue
			}
			if !t.typed(line) {
				return
			}
		}
	}
}

// signalled handles a signal and reports whether the tool ended.
func (t *fakeTool) signalled(sig syscall.Signal) bool {
	t.note("sig " + sigName(sig))
	if sig == syscall.SIGKILL || (sig == syscall.SIGTERM && t.b.onTerm != "ignore") {
		t.end(nil, sigName(sig))
		return true
	}
	return false
}

func sigName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGUSR1:
		return "SIGUSR1"
	case syscall.SIGQUIT:
		return "SIGQUIT"
	}
	return fmt.Sprint(int(sig))
}

// typed handles one line typed into the tool; false when it ended.
func (t *fakeTool) typed(line string) bool {
	f := strings.Fields(line)
	if len(f) == 0 || !strings.HasPrefix(f[0], "::__sp::") {
		// The helpers' definitions (the bootstrap).
		if t.b.bootExit != nil {
			t.end(t.b.bootExit, "")
			return false
		}
		return true
	}
	switch {
	case f[0] == "::__sp::sync" && len(f) == 3:
		t.emit(fmt.Sprintf("\n%s %s rc=0\n", f[1], f[2]))
		return true
	case f[0] == "::__sp::ev" && (len(f) == 4 || len(f) == 5):
		b, err := base64.StdEncoding.DecodeString(f[1])
		if err != nil {
			panic(err)
		}
		return t.runPayload(string(b), f[2], f[3], nonceField(f))
	case f[0] == "::__sp::src" && (len(f) == 4 || len(f) == 5):
		b, err := os.ReadFile(strings.Trim(f[1], `"`))
		if err != nil {
			t.emit(fmt.Sprintf("\n__SP_BEGIN__ %s\n\n%s %s rc=1 v=%s vt=0%s\n", f[3], f[2], f[3],
				base64.StdEncoding.EncodeToString([]byte(err.Error())), nonceField(f)))
			t.fencing = "#__SP_FENCE__ " + f[3]
			return true
		}
		return t.runPayload(string(b), f[2], f[3], nonceField(f))
	}
	t.note("unknown line " + line)
	return true
}

// nonceField is the done line's n= field for a helper call f that passes
// the command's secret (its fifth word), as the real helpers print it.
func nonceField(f []string) string {
	if len(f) == 5 {
		return " n=" + f[4]
	}
	return ""
}

// runPayload runs a payload in the fake language and prints the markers;
// nf is the done line's n= field ("" for none).
func (t *fakeTool) runPayload(payload, prefix, tok, nf string) bool {
	t.emit("\n__SP_BEGIN__ " + tok + "\n")
	rc, value := 0, ""
	for _, st := range strings.Split(payload, "\n") {
		verb, arg, _ := strings.Cut(strings.TrimSpace(st), " ")
		switch verb {
		case "":
		case "print":
			t.emit(arg + "\n")
		case "printn":
			t.emit(arg)
		case "value":
			value = arg
		case "error":
			rc, value = 1, arg
		case "exit":
			n, _ := strconv.Atoi(arg)
			t.end(exitCode(n), "")
			return false
		case "hang":
			t.note("hang")
			ended, interrupted := t.hang()
			if ended {
				return false
			}
			if interrupted {
				rc, value = 1, "interrupted"
			}
		case "gets":
			t.note("gets")
			line, ended, interrupted := t.gets()
			switch {
			case ended:
				return false
			case interrupted:
				rc, value = 1, "interrupted"
			default:
				t.emit("got " + line + "\n")
			}
		default:
			panic("fake tool: unknown statement " + st)
		}
		if rc != 0 {
			break
		}
	}
	t.emit(fmt.Sprintf("\n%s %s rc=%d v=%s vt=0%s\n", prefix, tok, rc, base64.StdEncoding.EncodeToString([]byte(value)), nf))
	t.fencing = "#__SP_FENCE__ " + tok
	return true
}

// gets waits for an input line, as hang waits for a signal.
func (t *fakeTool) gets() (line string, ended, interrupted bool) {
	for {
		select {
		case <-t.closed:
			t.end(nil, "SIGHUP")
			return "", true, false
		case sig := <-t.sigs:
			if t.signalled(sig) {
				return "", true, false
			}
		case <-t.intr:
			t.note("intr")
			switch t.b.onInt {
			case "die":
				t.end(nil, "SIGINT")
				return "", true, false
			case "prompt":
				return "", false, true
			}
		case l := <-t.lines:
			return l, false, false
		}
	}
}

// hang waits until something ends the payload: ended says the tool ended,
// interrupted that a Ctrl-C aborted the payload.
func (t *fakeTool) hang() (ended, interrupted bool) {
	for {
		select {
		case <-t.closed:
			t.end(nil, "SIGHUP")
			return true, false
		case sig := <-t.sigs:
			if t.signalled(sig) {
				return true, false
			}
		case <-t.intr:
			t.note("intr")
			switch t.b.onInt {
			case "die":
				t.end(nil, "SIGINT")
				return true, false
			case "prompt":
				return false, true
			}
		}
	}
}

// fakeStarter starts fake tools; behave says how start n (from 1) acts.
type fakeStarter struct {
	mu     sync.Mutex
	clk    *fakeClock
	behave func(n int) fakeBehavior
	tools  []*fakeTool
	at     []time.Time // fake time of each start attempt
	specs  []termSpec  // what each start attempt was asked for
}

func (f *fakeStarter) start(spec termSpec) (toolTerm, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := len(f.at) + 1
	f.at = append(f.at, f.clk.Now())
	f.specs = append(f.specs, spec)
	b := fakeBehavior{onInt: "prompt"}
	if f.behave != nil {
		b = f.behave(n)
	}
	if b.startErr != nil {
		return nil, b.startErr
	}
	t := newFakeTool(b, f.clk)
	f.tools = append(f.tools, t)
	return t, nil
}

// starts returns how many start attempts were made.
func (f *fakeStarter) starts() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.at)
}

func (f *fakeStarter) tool(i int) *fakeTool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tools[i]
}

// waitEvent waits until tool t reports ev (its earlier events are dropped).
func waitEvent(tb testing.TB, t *fakeTool, ev string) {
	tb.Helper()
	deadline := time.After(longWait)
	for {
		select {
		case e := <-t.events:
			if e == ev {
				return
			}
		case <-deadline:
			tb.Fatalf("the fake tool never reported %q", ev)
		}
	}
}

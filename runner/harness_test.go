package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/internal/sessioncheck"
	"github.com/skillpilot/skillpilot/internal/testenv"
	"github.com/skillpilot/skillpilot/protocol"
)

// longWait bounds every wait in these tests. It is an anti-hang guard, not
// a timing assertion: a healthy run is far below it even on a slow machine.
const longWait = 90 * time.Second

var runnerBin string // built once in TestMain for tests that need a process

// parallelTests is how many of this package's parallel tests run at once
// unless -test.parallel says otherwise. They wait on tools on PTYs, not on
// the CPU: go test's default (GOMAXPROCS, 2 on a small machine) would
// leave the machine idle most of the run.
func parallelTests() int { return max(8, 4*runtime.GOMAXPROCS(0)) }

func TestMain(m *testing.M) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		_ = flag.Set("test.parallel", strconv.Itoa(parallelTests()))
	}
	if _, err := exec.LookPath("tclsh"); err != nil {
		fmt.Fprintln(os.Stderr, "tclsh is required (apt-get install tcl)")
		os.Exit(1)
	}
	// testenv keeps it in a directory every user can read: tests run it as
	// another user too.
	var err error
	if runnerBin, err = testenv.Build(testenv.Runner); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// quietLogger discards log lines.
func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// testWriter sends log lines to t.Log, so they show only on failure.
type testWriter struct {
	mu sync.Mutex
	t  testing.TB
	on bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.on {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// harness runs a Runner in-process on a temporary session.
type harness struct {
	t    testing.TB
	dir  string
	cfg  Config
	r    *Runner
	errc chan error
	sigs chan os.Signal
	seq  int64
	logw *testWriter
	// submitted lists the command files written through submit; the
	// invariant check at cleanup requires a result (or a queue entry) for
	// each. noCheck skips that check (tests of deliberately broken trees).
	submitted []string
	noCheck   bool
	// clk and fake are set by newFakeHarness: the tool is a fakeTool and
	// time is a fakeClock that waits for exit advance.
	clk  *fakeClock
	fake *fakeStarter
}

func fakeEDA(t testing.TB) []string {
	// These tests are the core use case (an EDA shell that returns to its
	// prompt on Ctrl-C): under CI a missing tool is a failure.
	testenv.NeedTool(t, "expect", "expect")
	p, err := filepath.Abs("../testdata/fake_eda.exp")
	if err != nil {
		t.Fatal(err)
	}
	return []string{p}
}

func newHarness(t testing.TB, mods ...func(*Config)) *harness {
	t.Helper()
	h := &harness{t: t, dir: filepath.Join(t.TempDir(), "sess"), errc: make(chan error, 1), sigs: make(chan os.Signal, 2)}
	h.logw = &testWriter{t: t, on: true}
	h.cfg = Config{
		Session: h.dir, Heartbeat: 100 * time.Millisecond, Poll: 200 * time.Millisecond,
		KillGrace: time.Second, ParseGrace: 500 * time.Millisecond, ResyncWait: 3 * time.Second,
		Logger: slog.New(slog.NewTextHandler(h.logw, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	for _, m := range mods {
		m(&h.cfg)
	}
	if err := makeLayout(h.dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		h.shutdown()
		if !t.Failed() && !h.noCheck {
			invariants(t, h.dir, h.submitted...)
		}
		h.logw.mu.Lock()
		h.logw.on = false
		h.logw.mu.Unlock()
	})
	return h
}

// start opens the runner and runs it in a goroutine.
func (h *harness) start() *harness {
	h.t.Helper()
	r, err := Open(h.cfg)
	if err != nil {
		h.t.Fatalf("Open: %v", err)
	}
	h.r = r
	go func() { h.errc <- r.Run(context.Background(), h.sigs) }()
	return h
}

func (h *harness) shutdown() {
	if h.r == nil {
		return
	}
	_ = testenv.WriteAtomic(filepath.Join(h.dir, protocol.FileStop), []byte(`{"mode":"force"}`)) // Whole: an empty stop.json is a graceful stop.
	h.waitExit()
	h.checkNoOrphans()
}

// waitExit waits for Run to return. With a fake clock it advances time
// meanwhile (kill grace periods pass).
func (h *harness) waitExit() error {
	h.t.Helper()
	if h.r == nil {
		return nil
	}
	deadline := time.After(longWait)
	for {
		select {
		case err := <-h.errc:
			h.r = nil
			return err
		case <-deadline:
			h.t.Fatal("runner did not exit")
			return nil
		case <-time.After(5 * time.Millisecond):
			if h.clk != nil {
				h.clk.Advance(100 * time.Millisecond)
			}
		}
	}
}

// newFakeHarness is a harness whose tool is a fakeTool (behave says how
// start n acts; nil: an EDA-like tool) and whose clock is a fakeClock.
func newFakeHarness(t testing.TB, behave func(n int) fakeBehavior, mods ...func(*Config)) *harness {
	clk := newFakeClock()
	fs := &fakeStarter{clk: clk, behave: behave}
	h := newHarness(t, append([]func(*Config){func(c *Config) {
		c.clock, c.startTerm = clk, fs.start
		c.Heartbeat, c.KillGrace, c.ResyncWait, c.StartTimeout = time.Second, 3*time.Second, 5*time.Second, time.Minute
	}}, mods...)...)
	h.clk, h.fake = clk, fs
	return h
}

// advanceUntil advances the fake clock by step until cond holds.
func (h *harness) advanceUntil(what string, step time.Duration, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(longWait)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s", what)
		}
		h.clk.Advance(step)
		time.Sleep(time.Millisecond)
	}
}

// stop asks for a stop through ctl/stop.json and waits for the exit.
func (h *harness) stop(mode protocol.StopMode) {
	h.t.Helper()
	h.writeFile(protocol.FileStop, fmt.Sprintf(`{"mode":%q}`, mode))
	if err := h.waitExit(); err != nil {
		h.t.Fatalf("Run: %v", err)
	}
	h.checkNoOrphans()
}

func (h *harness) writeFile(rel, content string) {
	h.t.Helper()
	if err := writeAtomic(filepath.Join(h.dir, rel), []byte(content)); err != nil {
		h.t.Fatal(err)
	}
}

// writeAtomic replaces the file at path as a master writes one (a
// temporary file renamed over it, mode 0600), through a fsq.Root of its
// directory.
func writeAtomic(path string, data []byte) error {
	r, err := fsq.OpenRoot(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer r.Close()
	return r.WriteAtomic(filepath.Base(path), data, 0o600, fsq.Volatile)
}

// readNames lists the directory dir through a fsq.Root of it.
func readNames(dir string) ([]string, error) {
	r, err := fsq.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.ReadNames(".")
}

// submit writes a command atomically and returns its file name.
func (h *harness) submit(payload string, mods ...func(*protocol.Command)) string {
	h.t.Helper()
	h.seq++
	c := protocol.Command{CmdID: fmt.Sprintf("c%d", h.seq), Seq: h.seq, Kind: protocol.KindTcl, Payload: payload}
	if h.cfg.Kind == protocol.KindSh {
		c.Kind = protocol.KindSh
	}
	for _, m := range mods {
		m(&c)
	}
	b, err := json.Marshal(c)
	if err != nil {
		h.t.Fatal(err)
	}
	name := protocol.CommandName(c.Seq, c.CmdID)
	h.writeFile(rel(protocol.DirQueue, name), string(b))
	h.submitted = append(h.submitted, name)
	return name
}

// writeDone writes an ok result for name, as an earlier runner would have
// (with its archived command file).
func (h *harness) writeDone(name string) {
	h.t.Helper()
	seq, id, err := protocol.ParseCommandName(name)
	if err != nil {
		h.t.Fatal(err)
	}
	h.writeFile(rel(protocol.DirArchive, name), fmt.Sprintf(`{"cmd_id":%q,"seq":%d,"kind":"tcl","payload":""}`, id, seq))
	h.writeFile(rel(protocol.DirResult, name), fmt.Sprintf(`{"protocol_version":1,"cmd_id":%q,"seq":%d,"status":"ok",`+
		`"exit_reason":"marker_seen","tool_rc":0,"command_path":"archive/%s"}`, id, seq, name))
}

// result waits for result/<name> and decodes it.
func (h *harness) result(name string) protocol.Result {
	h.t.Helper()
	p := filepath.Join(h.dir, protocol.DirResult, name)
	deadline := time.Now().Add(longWait)
	for {
		b, err := os.ReadFile(p)
		if err == nil {
			var res protocol.Result
			if err := json.Unmarshal(b, &res); err != nil {
				h.t.Fatalf("result %s: %v\n%s", name, err, b)
			}
			validateFile(h.t, "result.json", b)
			return res
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("no result for %s", name)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// resultAfterBacklog is result for the last of many commands queued at
// once: it fails only when the runner finished no command for longWait
// (state.json's commands_done stood still), not when the whole backlog
// takes longer than that, as it may under -race beside other packages'
// tests (TestRetentionRotatesAndCuts took 75-93 s of a 90 s wait there,
// on the code before and after 2026-12-07's changes alike).
func (h *harness) resultAfterBacklog(name string) protocol.Result {
	h.t.Helper()
	p := filepath.Join(h.dir, protocol.DirResult, name)
	done, deadline := int64(-1), time.Now().Add(longWait)
	for {
		if _, err := os.Lstat(p); err == nil {
			return h.result(name)
		}
		if n := h.state().CommandsDone; n > done {
			done, deadline = n, time.Now().Add(longWait)
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("no result for %s: no command finished for %s (%d done)", name, longWait, done)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (h *harness) output(name string) string {
	h.t.Helper()
	b, err := os.ReadFile(filepath.Join(h.dir, protocol.DirOutput, protocol.OutputName(name)))
	if err != nil {
		h.t.Fatal(err)
	}
	return string(b)
}

func (h *harness) state() protocol.State {
	h.t.Helper()
	var st protocol.State
	deadline := time.Now().Add(longWait)
	for {
		b, err := os.ReadFile(filepath.Join(h.dir, protocol.FileState))
		if err == nil {
			if err := json.Unmarshal(b, &st); err != nil {
				h.t.Fatalf("state.json: %v", err)
			}
			return st
		}
		if time.Now().After(deadline) {
			h.t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitFor polls cond until it holds (bounded by longWait).
func (h *harness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(longWait)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (h *harness) events() []protocol.Event {
	h.t.Helper()
	return readEvents(h.t, h.dir)
}

func readEvents(t testing.TB, dir string) []protocol.Event {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, protocol.FileMeta))
	if err != nil {
		t.Fatal(err)
	}
	// The runner may be appending: a last line without its newline is not
	// written whole yet (it was read cut short, "unexpected EOF", under load).
	b = b[:bytes.LastIndexByte(b, '\n')+1]
	var evs []protocol.Event
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		validateFile(t, "event.json", []byte(line))
		var e protocol.Event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("meta.log line %q: %v", line, err)
		}
		evs = append(evs, e)
	}
	return evs
}

func countEvents(evs []protocol.Event, name string) int {
	n := 0
	for _, e := range evs {
		if e.Event == name {
			n++
		}
	}
	return n
}

// toolPIDs lists every tool process the session started.
func toolPIDs(t testing.TB, dir string) []int {
	var pids []int
	for _, e := range readEvents(t, dir) {
		if e.Event == protocol.EvToolStart {
			if f, ok := e.Detail["tool_pid"].(float64); ok {
				pids = append(pids, int(f))
			}
		}
	}
	return pids
}

// checkNoOrphans fails if any process of any tool's process group is still
// alive (zombies of init are not ours to reap and are ignored).
func (h *harness) checkNoOrphans() {
	h.t.Helper()
	if h.fake == nil {
		checkNoOrphans(h.t, h.dir)
	}
}

// stopChecked asks the runner p serving dir to stop (ctl/stop.json),
// fails unless it exits 0, then checks the session's invariants and that
// no process of it is left.
func stopChecked(t testing.TB, dir string, p *runnerProc) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, protocol.FileStop), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if code := p.ExitCode(); code != 0 {
		t.Fatalf("exit %d\n%s", code, p.Log())
	}
	invariants(t, dir)
	checkNoOrphans(t, dir)
}

func checkNoOrphans(t testing.TB, dir string) {
	t.Helper()
	groups := map[int]bool{}
	for _, p := range toolPIDs(t, dir) {
		groups[p] = true
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		alive := livingInGroups(groups)
		if len(alive) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("orphaned tool processes still alive: %v", alive)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func livingInGroups(groups map[int]bool) []string {
	ents, _ := os.ReadDir("/proc")
	var alive []string
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		pgid, _ := strconv.Atoi(f[2])
		if groups[pgid] {
			alive = append(alive, fmt.Sprintf("%d(pgid %d, %s)", pid, pgid, f[0]))
		}
	}
	return alive
}

// invariants runs the session invariant checker on a stopped session;
// names are the command files the test submitted (besides those the
// harness submitted itself).
func invariants(t testing.TB, dir string, names ...string) {
	t.Helper()
	testenv.VerifySession(t, dir, sessioncheck.Options{Submitted: names, AllowQueued: true})
}

// withKind and friends modify commands in submit.
func withTimeout(s float64) func(*protocol.Command) {
	return func(c *protocol.Command) { c.TimeoutS = s }
}
func withPolicy(p protocol.CancelPolicy) func(*protocol.Command) {
	return func(c *protocol.Command) { c.CancelPolicy = p }
}

// runnerProc is the runner binary as a process: testenv's one wrapper.
type runnerProc = testenv.RunnerProcess

// startRunnerProc starts runnerBin with args ("--session", DIR, then the
// rest), without waiting for it to serve. The test's end kills a runner
// still running (SIGKILL) and checks no session: the tests check theirs
// themselves (stopChecked, invariants).
func startRunnerProc(t testing.TB, args ...string) *runnerProc {
	t.Helper()
	return startBinary(t, runnerBin, nil, args...)
}

// startBinary is startRunnerProc for another runner binary (bin) with
// more environment (env).
func startBinary(t testing.TB, bin string, env []string, args ...string) *runnerProc {
	t.Helper()
	if len(args) < 2 || args[0] != "--session" {
		t.Fatalf("startRunnerProc: want --session DIR first, got %q", args)
	}
	return testenv.StartRunner(t, testenv.RunnerOptions{Dir: args[1], Binary: bin, Flags: []string{}, Args: append([]string{}, args[2:]...),
		Env: env, NoWait: true, AtEnd: testenv.EndKill, NoCheck: "the runner's tests check their sessions themselves"})
}

func pidAlive(pid int) bool { return syscall.Kill(pid, 0) == nil }

func jsonUnmarshal(b []byte, v any) {
	if err := json.Unmarshal(b, v); err != nil {
		panic(err)
	}
}

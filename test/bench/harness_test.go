package bench

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/skillpilot/skillpilot/internal/sessioncheck"
	"github.com/skillpilot/skillpilot/internal/testenv"
	"github.com/skillpilot/skillpilot/protocol"
)

var runnerBin, minloopBin, masterBin, leanMasterBin, helloBin, minsubBin string

func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		os.Exit(m.Run()) // Only benchmarks here: go test ./... builds nothing.
	}
	// Static, no cgo, as `make build` does; testenv builds each once and
	// shares it with the other test packages.
	var err error
	if runnerBin, err = testenv.Build(testenv.Runner); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if masterBin, err = testenv.Build(testenv.Master); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if minloopBin, err = testenv.Build(testenv.Module + "/test/bench/minloop"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// The master as make build ships it, and a Go hello-world to hold its
	// start to (BenchmarkCLIStart).
	if leanMasterBin, err = testenv.Build(testenv.Master, testenv.WithTags("lean")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if helloBin, err = testenv.Build(testenv.Module + "/test/bench/hello"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if minsubBin, err = testenv.Build(testenv.Module + "/test/bench/minsub"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if b := os.Getenv("SP_BENCH_RUNNER_BIN"); b != "" {
		runnerBin = b // Compare another build of the runner.
	}
	os.Exit(m.Run())
}

// smoke is set by make bench-smoke (CI): every benchmark runs, small.
var smoke = os.Getenv("SP_BENCH_SMOKE") != ""

func pick(smallN, fullN int) int {
	if smoke {
		return smallN
	}
	return fullN
}

// benchDir is a fresh directory on the same disk as the work tree (not a
// tmpfs), so fsync costs what it costs for users.
func benchDir(b testing.TB) string {
	b.Helper()
	base := os.Getenv("SP_BENCH_DIR")
	if base == "" {
		base = filepath.Join("..", "..", ".bench")
	}
	os.MkdirAll(base, 0o700)
	d, err := os.MkdirTemp(base, "run")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(d) })
	abs, _ := filepath.Abs(d)
	return abs
}

// runnerProc is the real runner binary serving a session: testenv's one
// wrapper of a runner process.
type runnerProc = testenv.RunnerProcess

// startRunner starts runnerBin on dir with args after the flags
// (--log-level warn and $SP_BENCH_RUNNER_FLAGS), its stderr on ours (or
// in $SP_BENCH_RUNNER_STDERR), and waits until it serves. The test's end
// (or p.End) force-stops it, then checks the session's invariants; the
// force stop may leave commands queued.
func startRunner(b testing.TB, dir string, args ...string) *runnerProc {
	b.Helper()
	var stderr io.Writer = os.Stderr
	if f := os.Getenv("SP_BENCH_RUNNER_STDERR"); f != "" {
		if w, err := os.Create(f); err == nil {
			stderr = w
		}
	}
	return testenv.StartRunner(b, testenv.RunnerOptions{Dir: dir, Binary: runnerBin,
		Flags: append([]string{"--log-level", "warn"}, strings.Fields(os.Getenv("SP_BENCH_RUNNER_FLAGS"))...),
		Args:  append([]string{}, args...), Stderr: stderr,
		Check: sessioncheck.Options{AllowQueued: true}, AtEnd: testenv.EndForceStop})
}

// client writes commands atomically and sees results through inotify.
type client struct {
	dir  string
	w    *fsnotify.Watcher
	seq  int64
	seen map[string]bool
	kind protocol.Kind // "": tcl
}

func newClient(b testing.TB, dir string) *client {
	b.Helper()
	os.MkdirAll(filepath.Join(dir, "result"), 0o700)
	os.MkdirAll(filepath.Join(dir, "queue"), 0o700)
	w, err := fsnotify.NewBufferedWatcher(1 << 16)
	if err != nil {
		b.Fatal(err)
	}
	if err := w.Add(filepath.Join(dir, "result")); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { w.Close() })
	return &client{dir: dir, w: w, seen: map[string]bool{}, seq: time.Now().UnixNano() % 1e6 * 1000}
}

func (c *client) submit(b testing.TB, payload string) string {
	c.seq++
	id := "b" + strconv.FormatInt(c.seq, 10)
	name := protocol.CommandName(c.seq, id)
	kind := c.kind
	if kind == "" {
		kind = protocol.KindTcl
	}
	data, _ := json.Marshal(protocol.Command{CmdID: id, Seq: c.seq, Kind: kind, Payload: payload})
	tmp := filepath.Join(c.dir, "queue", "."+name)
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		b.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(c.dir, "queue", name)); err != nil {
		b.Fatal(err)
	}
	return name
}

// wait blocks until result/<name> has appeared for every name.
func (c *client) wait(b testing.TB, names ...string) {
	deadline := time.After(5 * time.Minute)
	for _, n := range names {
		for !c.seen[n] {
			select {
			case ev := <-c.w.Events:
				if ev.Op&(fsnotify.Create|fsnotify.Rename) != 0 {
					c.seen[filepath.Base(ev.Name)] = true
				}
			case err := <-c.w.Errors:
				b.Fatalf("watch: %v", err)
			case <-deadline:
				b.Fatalf("no result for %s", n)
			}
		}
		delete(c.seen, n)
	}
}

func (c *client) roundTrip(b testing.TB, payload string) time.Duration {
	t0 := time.Now()
	c.wait(b, c.submit(b, payload))
	return time.Since(t0)
}

// stats of a sample.
type sample []time.Duration

func (s sample) pct(p float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	c := append(sample(nil), s...)
	sort.Slice(c, func(i, j int) bool { return c[i] < c[j] })
	return c[min(int(p*float64(len(c))), len(c)-1)]
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func medianF(xs []float64) float64 {
	c := append([]float64(nil), xs...)
	sort.Float64s(c)
	return c[len(c)/2]
}

// spread returns the 10th and 90th percentiles.
func spread(xs []float64) (float64, float64) {
	c := append([]float64(nil), xs...)
	sort.Float64s(c)
	return c[len(c)/10], c[min(len(c)*9/10, len(c)-1)]
}

func report(format string, args ...any) { fmt.Printf("    "+format+"\n", args...) }

func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}

func procStatus(pid int, key string) int64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, key+":"); ok {
			n, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return n
		}
	}
	return -1
}

func countFDs(pid int) int {
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(ents)
}

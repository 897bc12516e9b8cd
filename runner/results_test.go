package runner

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
)

// writerSession makes a bare session layout for the result writer.
func writerSession(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "s")
	if err := makeLayout(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

func newTestWriter(t *testing.T, dir string, ops writerOps) *resultWriter {
	t.Helper()
	return newTestWriterWith(t, dir, ops, nil)
}

// newTestWriterWith is newTestWriter with its config changed by edit.
func newTestWriterWith(t *testing.T, dir string, ops writerOps, edit func(*writerConfig)) *resultWriter {
	t.Helper()
	cfg := writerConfig{dir: dir, host: "h", durable: true, filePerm: 0o600,
		log: slog.New(slog.NewTextHandler(io.Discard, nil)), ops: ops, retryMin: time.Millisecond, retryMax: 5 * time.Millisecond}
	if edit != nil {
		edit(&cfg)
	}
	w := newResultWriter(cfg)
	t.Cleanup(func() { w.abort(); w.close(func(resultDone) {}) })
	return w
}

// ranJob is the job of command id (seq 1) that ran and printed out, its
// output file written and still open, as the owner hands it over.
func ranJob(t *testing.T, dir, id, out string) resultJob {
	t.Helper()
	name := protocol.CommandName(1, id)
	j := claimed(t, dir, name)
	j.kind, j.res.Status, j.res.Error, j.res.ExitReason = jobRun, protocol.StatusOK, nil, protocol.ReasonMarkerSeen
	j.res.OutputPath = rel(protocol.DirOutput, protocol.OutputName(name))
	f, err := os.OpenFile(filepath.Join(dir, j.res.OutputPath), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	f.WriteString(out)
	j.out, j.res.Stats.Bytes, j.res.OutputSHA256 = f, int64(len(out)), sha256Hex(out)
	return j
}

// claimed puts a command file into inflight/ as the owner would.
func claimed(t *testing.T, dir, name string) resultJob {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, protocol.DirInflight, name), []byte(`{}`), 0o600); err != nil {
		t.Fatal(err)
	}
	seq, id, _ := protocol.ParseCommandName(name)
	return resultJob{kind: jobCancelled, name: name, cmdFile: rel(protocol.DirInflight, name), keepAt: rel(protocol.DirArchive, name),
		res: &protocol.Result{CmdID: id, Seq: seq, Status: protocol.StatusCancelled, ExitReason: protocol.ReasonCancelledQueued,
			Error: &protocol.Error{Code: protocol.CodeCancelled, Message: "x"}, CommandPath: rel(protocol.DirArchive, name)}}
}

func readResult(t *testing.T, dir, name string) protocol.Result {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, protocol.DirResult, name))
	if err != nil {
		t.Fatal(err)
	}
	var r protocol.Result
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func waitDone(t *testing.T, w *resultWriter) resultDone {
	t.Helper()
	select {
	case d := <-w.done:
		return d
	case <-time.After(longWait):
		t.Fatal("the writer reported nothing")
		return resultDone{}
	}
}

// A result is never overwritten: a second job for a name that has one
// writes nothing, reports existed, and leaves the first result intact.
func TestWriterAtMostOnce(t *testing.T) {
	t.Parallel()
	dir := writerSession(t)
	w := newTestWriter(t, dir, writerOps{})
	name := protocol.CommandName(1, "a")
	j := claimed(t, dir, name)
	j.res.Status, j.res.Error, j.res.ExitReason = protocol.StatusOK, nil, protocol.ReasonMarkerSeen
	w.submit(j, nil)
	if d := waitDone(t, w); d.existed || d.err != nil {
		t.Fatalf("first: %+v", d)
	}
	w.submit(claimed(t, dir, name), nil)
	if d := waitDone(t, w); !d.existed {
		t.Fatalf("second job for the same name: %+v", d)
	}
	if r := readResult(t, dir, name); r.Status != protocol.StatusOK {
		t.Fatalf("the ok result was overwritten: %+v", r)
	}
	if _, err := os.Lstat(filepath.Join(dir, protocol.DirInflight, name)); !os.IsNotExist(err) {
		t.Fatalf("the re-dropped command file stays in inflight/: %v", err)
	}
	if names, _ := os.ReadDir(filepath.Join(dir, protocol.DirTmp)); len(names) != 0 {
		t.Fatalf("temporary files left in tmp/: %v", names)
	}
}

// A full disk is retried until space returns; meanwhile the writer says
// why results wait, and it says so again once they are written. Results
// keep their order.
func TestWriterRetriesFullDisk(t *testing.T) {
	t.Parallel()
	dir := writerSession(t)
	var mu sync.Mutex
	full := true
	w := newTestWriter(t, dir, writerOps{write: func(f *os.File, b []byte) error {
		mu.Lock()
		defer mu.Unlock()
		if full {
			return &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
		}
		_, err := f.Write(b)
		return err
	}})
	a, b := protocol.CommandName(1, "a"), protocol.CommandName(2, "b")
	w.submit(claimed(t, dir, a), nil)
	w.submit(claimed(t, dir, b), nil)
	select {
	case st := <-w.status:
		if st.err == nil || st.pending < 1 {
			t.Fatalf("status %+v", st)
		}
	case <-time.After(longWait):
		t.Fatal("no status while the disk is full")
	}
	if _, err := os.Lstat(filepath.Join(dir, protocol.DirResult, a)); !os.IsNotExist(err) {
		t.Fatal("a result appeared while the disk was full")
	}
	mu.Lock()
	full = false
	mu.Unlock()
	if d := waitDone(t, w); d.job.name != a || d.err != nil {
		t.Fatalf("first done %s %v", d.job.name, d.err)
	}
	if d := waitDone(t, w); d.job.name != b || d.err != nil {
		t.Fatalf("second done %s %v", d.job.name, d.err)
	}
	readResult(t, dir, a)
	readResult(t, dir, b)
	deadline := time.After(longWait)
	for {
		select {
		case st := <-w.status:
			if st.err == nil {
				return
			}
		case <-deadline:
			t.Fatal("the writer never said the results were written")
		}
	}
}

// A deleted result/ or archive/ is recreated, not a reason to lose a
// result: one lost directory at a time (two lost together are a session
// being removed, which the writer does not rebuild: mayRecreate).
func TestWriterRecreatesDirectories(t *testing.T) {
	t.Parallel()
	dir := writerSession(t)
	w := newTestWriter(t, dir, writerOps{})
	for i, d := range []string{protocol.DirResult, protocol.DirArchive} {
		os.RemoveAll(filepath.Join(dir, d))
		name := protocol.CommandName(int64(3+i), fmt.Sprintf("c%d", i))
		w.submit(claimed(t, dir, name), nil)
		if d := waitDone(t, w); d.err != nil || d.existed {
			t.Fatalf("%+v", d)
		}
		readResult(t, dir, name)
		if _, err := os.Stat(filepath.Join(dir, protocol.DirArchive, name)); err != nil {
			t.Fatalf("command file not archived: %v", err)
		}
	}
}

// After abort, a job that cannot be committed is reported with an error and
// its command stays in inflight/ for the next runner.
func TestWriterAbortLeavesInflight(t *testing.T) {
	t.Parallel()
	dir := writerSession(t)
	w := newTestWriter(t, dir, writerOps{sync: func(*os.File) error { return syscall.EIO }})
	name := protocol.CommandName(4, "d")
	w.submit(claimed(t, dir, name), nil)
	<-w.status
	w.abort()
	if d := waitDone(t, w); d.err == nil {
		t.Fatalf("%+v", d)
	}
	if _, err := os.Stat(filepath.Join(dir, protocol.DirInflight, name)); err != nil {
		t.Fatalf("the command left inflight/: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, protocol.DirResult, name)); !os.IsNotExist(err) {
		t.Fatal("a result without a durable content appeared")
	}
}

// A lone result carries its small output (output_inline) and is visible
// before the output file is fsynced; a marker in inflight/ says so until
// the fsync, which follows. Results committed as a group (a backlog) carry
// theirs too, and their outputs are flushed after them, by one syncfs for
// the round, not by an fsync each.
func TestWriterInlineOutput(t *testing.T) {
	t.Parallel()
	dir := writerSession(t)
	var mu sync.Mutex
	var synced []string // in order
	syncfs := 0
	gate := make(chan struct{})
	var gated sync.Once
	ops := writerOps{sync: func(f *os.File) error {
		if strings.HasSuffix(f.Name(), "_g1.out") {
			gated.Do(func() { <-gate }) // Hold the writer so that g2 and g3 queue up.
		}
		mu.Lock()
		synced = append(synced, filepath.Base(f.Name()))
		mu.Unlock()
		return f.Sync()
	}, syncFS: func() error {
		mu.Lock()
		syncfs++
		mu.Unlock()
		return nil
	}}
	w := newTestWriter(t, dir, ops)
	job := func(id, out string) resultJob { return ranJob(t, dir, id, out) }
	isSynced := func(name string) bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(synced, name)
	}

	a := job("a", "abc\n")
	w.submit(a, nil)
	waitDone(t, w)
	r := readResult(t, dir, a.name)
	if string(r.OutputInline) != "abc\n" {
		t.Fatalf("a lone result carries %q, want the output", r.OutputInline)
	}
	for deadline := time.Now().Add(longWait); !isSynced(protocol.OutputName(a.name)); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the output file was never fsynced after its result")
		}
	}
	for deadline := time.Now().Add(longWait); ; time.Sleep(time.Millisecond) {
		if _, err := os.Lstat(filepath.Join(dir, lagMarker(a.name))); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the marker outlived the output's fsync")
		}
	}

	big := job("big", strings.Repeat("x", protocol.MaxInlineOutput+1))
	w.submit(big, nil)
	waitDone(t, w)
	if r := readResult(t, dir, big.name); r.OutputInline != nil || !isSynced(protocol.OutputName(big.name)) {
		t.Fatalf("an output over %d bytes: inline %d bytes, fsynced before the result %v", protocol.MaxInlineOutput, len(r.OutputInline), isSynced(protocol.OutputName(big.name)))
	}

	g1 := job("g1", "one\n") // Too large by its stats: its output fsync, held, keeps the writer busy while g2 and g3 queue.
	g1.res.Stats.Bytes = protocol.MaxInlineOutput + 1
	w.submit(g1, nil)
	for deadline := time.Now().Add(longWait); len(w.jobs) > 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the writer did not take g1")
		}
	}
	g2, g3 := job("g2", "two\n"), job("g3", "three\n")
	w.submit(g2, nil)
	w.submit(g3, nil)
	close(gate)
	for range 3 {
		waitDone(t, w)
	}
	for _, j := range []resultJob{g2, g3} {
		if r := readResult(t, dir, j.name); string(r.OutputInline) != map[string]string{"g2": "two\n", "g3": "three\n"}[j.res.CmdID] {
			t.Errorf("%s, committed in a group, carries %q", j.name, r.OutputInline)
		}
	}
	for _, j := range []resultJob{g2, g3} {
		for deadline := time.Now().Add(longWait); ; time.Sleep(time.Millisecond) {
			if _, err := os.Lstat(filepath.Join(dir, lagMarker(j.name))); os.IsNotExist(err) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the marker outlived the lag round", j.name)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if syncfs != 1 || slices.Contains(synced, protocol.OutputName(g2.name)) || slices.Contains(synced, protocol.OutputName(g3.name)) {
		t.Errorf("the group's outputs: %d syncfs, fsynced one by one: %v; want one syncfs and no fsync", syncfs, synced)
	}
}

// A lag round whose syncfs fails keeps every marker of the round: the
// next runner checks those outputs against their results.
func TestWriterLagSyncFSFails(t *testing.T) {
	t.Parallel()
	dir := writerSession(t)
	gate := make(chan struct{})
	var gated sync.Once
	called := make(chan struct{})
	var once sync.Once
	ops := writerOps{
		sync: func(f *os.File) error {
			if strings.HasSuffix(f.Name(), "_h.out") {
				gated.Do(func() { <-gate }) // Hold the writer so that two queue up.
			}
			return f.Sync()
		},
		syncFS: func() error {
			once.Do(func() { close(called) })
			return syscall.EIO
		},
	}
	w := newTestWriter(t, dir, ops)
	x, y := queueBehindH(t, dir, w)
	close(gate)
	for range 3 {
		waitDone(t, w)
	}
	select {
	case <-called:
	case <-time.After(longWait):
		t.Fatal("no lag round ran syncfs")
	}
	w.close(func(resultDone) {}) // Waits for the round's end.
	for _, j := range []resultJob{x, y} {
		if r := readResult(t, dir, j.name); r.OutputInline == nil {
			t.Fatalf("%s: committed in a group without its output's copy", j.name)
		}
		if _, err := os.Lstat(filepath.Join(dir, lagMarker(j.name))); err != nil {
			t.Errorf("%s: the syncfs failed, yet its marker is gone: %v", j.name, err)
		}
	}
}

// On a network filesystem an output never lags behind its result: another
// client sees the file's bytes only once this client has sent them to the
// server (NFS close-to-open), so a master on another host that saw the
// result read a short output (TestNFSInteractive, in CI). A lone small
// output there is fsynced before its result appears, without a copy or a
// marker.
func TestWriterNetworkNeverLagsOutput(t *testing.T) {
	t.Parallel()
	dir := writerSession(t)
	var mu sync.Mutex
	var synced []string
	ops := writerOps{sync: func(f *os.File) error {
		mu.Lock()
		synced = append(synced, filepath.Base(f.Name()))
		mu.Unlock()
		return f.Sync()
	}}
	w := newTestWriterWith(t, dir, ops, func(c *writerConfig) { c.network = true })
	j := ranJob(t, dir, "n", "abc\n")
	name := j.name
	w.submit(j, nil)
	waitDone(t, w)
	mu.Lock()
	outSynced := slices.Contains(synced, protocol.OutputName(name))
	mu.Unlock()
	if r := readResult(t, dir, name); r.OutputInline != nil || !outSynced {
		t.Fatalf("network: inline %q, output fsynced before the result %v; want no copy and the fsync first", r.OutputInline, outSynced)
	}
	if _, err := os.Lstat(filepath.Join(dir, lagMarker(name))); !os.IsNotExist(err) {
		t.Errorf("network: a lag marker was made: %v", err)
	}
}

// A command file gone from inflight/ when its result is written (inflight/
// swapped after the last heartbeat) is kept at its command_path from the
// bytes the runner claimed, and a warning says so: the result never names
// a file that is not there.
func TestWriterKeepsAGoneCommandFile(t *testing.T) {
	t.Parallel()
	dir := writerSession(t)
	w := newTestWriter(t, dir, writerOps{})
	name := protocol.CommandName(1, "gone")
	j := claimed(t, dir, name)
	j.raw = []byte(`{"cmd_id":"gone","seq":1,"kind":"tcl","payload":"set x 1"}`)
	if err := os.Remove(filepath.Join(dir, j.cmdFile)); err != nil {
		t.Fatal(err)
	}
	w.submit(j, nil)
	d := waitDone(t, w)
	if d.err != nil || d.existed {
		t.Fatalf("%+v", d)
	}
	b, err := os.ReadFile(filepath.Join(dir, readResult(t, dir, name).CommandPath))
	if err != nil || string(b) != string(j.raw) {
		t.Errorf("kept file %q (%v), want the claimed bytes", b, err)
	}
	if len(d.displaced) != 1 || d.displaced[0]["recreated"] != j.keepAt {
		t.Errorf("warnings %v, want one naming %s", d.displaced, j.keepAt)
	}
}

// While a lag round hangs (a slow syncfs), no more than maxLag outputs
// wait for their flush, counting the round's own and a batch being
// staged: the rest of a backlog is committed the old way (output fsynced
// first, no copy, no marker), and nothing waits for the round.
func TestWriterLagBound(t *testing.T) {
	t.Parallel()
	dir := writerSession(t)
	release := make(chan struct{})
	lagFlush := func() { <-release }
	ops := writerOps{
		sync: func(f *os.File) error {
			name := strings.TrimSuffix(filepath.Base(f.Name()), ".out")
			if strings.HasSuffix(f.Name(), ".out") {
				if _, err := os.Lstat(filepath.Join(dir, protocol.DirResult, name+".json")); err == nil {
					lagFlush() // A lag round's fsync: its result is out already.
				}
			}
			return f.Sync()
		},
		syncFS: func() error { lagFlush(); return nil },
	}
	w := newTestWriter(t, dir, ops)
	const n = 700
	jobs := make([]resultJob, n)
	got := 0
	for i := range jobs {
		jobs[i] = ranJob(t, dir, fmt.Sprintf("b%03d", i), "out\n")
		w.submit(jobs[i], func(resultDone) { got++ })
	}
	for ; got < n; got++ {
		waitDone(t, w)
	}
	inline, markers := 0, 0
	for _, j := range jobs {
		if readResult(t, dir, j.name).OutputInline != nil {
			inline++
		}
		if _, err := os.Lstat(filepath.Join(dir, lagMarker(j.name))); err == nil {
			markers++
		}
	}
	close(release)
	if inline == 0 || inline > maxLag || markers > maxLag {
		t.Fatalf("%d results carry their output and %d markers wait while the lag round hangs; want 1 to %d", inline, markers, maxLag)
	}
}

// The last lag round, at the writer's close (the runner's stop), fsyncs
// its outputs one by one: a stop does not wait for other programs' data,
// which a syncfs would write too.
func TestWriterLastLagRoundFsyncs(t *testing.T) {
	t.Parallel()
	dir := writerSession(t)
	gate := make(chan struct{})
	var gated sync.Once
	var mu sync.Mutex
	var synced []string
	syncfs := 0
	ops := writerOps{
		sync: func(f *os.File) error {
			if strings.HasSuffix(f.Name(), "_h.out") {
				gated.Do(func() { <-gate })
			}
			mu.Lock()
			synced = append(synced, filepath.Base(f.Name()))
			mu.Unlock()
			return f.Sync()
		},
		syncFS: func() error { mu.Lock(); syncfs++; mu.Unlock(); return nil },
	}
	w := newTestWriter(t, dir, ops)
	x, y := queueBehindH(t, dir, w)
	w.once.Do(func() { close(w.jobs) }) // close's first step, before h is committed: x and y are the last batch.
	close(gate)
	w.close(func(resultDone) {})
	mu.Lock()
	defer mu.Unlock()
	for _, j := range []resultJob{x, y} {
		if readResult(t, dir, j.name).OutputInline == nil {
			t.Fatalf("%s: committed without its copy", j.name)
		}
		if !slices.Contains(synced, protocol.OutputName(j.name)) {
			t.Errorf("%s: its output was not fsynced at the stop (fsynced: %v)", j.name, synced)
		}
	}
	if syncfs != 0 {
		t.Errorf("the last round ran syncfs %d times", syncfs)
	}
}

// queueBehindH submits job h, whose output (too large for a copy by its
// stats) is fsynced before its result, waits until the writer holds it
// (the test's sync op blocks on h's output until the test lets it go),
// and queues x and y behind it: they are committed together, after h.
func queueBehindH(t *testing.T, dir string, w *resultWriter) (x, y resultJob) {
	t.Helper()
	h := ranJob(t, dir, "h", "held\n")
	h.res.Stats.Bytes = protocol.MaxInlineOutput + 1
	w.submit(h, nil)
	for deadline := time.Now().Add(longWait); len(w.jobs) > 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the writer did not take h")
		}
	}
	x, y = ranJob(t, dir, "x", "ex\n"), ranJob(t, dir, "y", "why\n")
	w.submit(x, nil)
	w.submit(y, nil)
	return x, y
}

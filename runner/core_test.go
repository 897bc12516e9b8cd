package runner

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/internal/testenv"
	"github.com/skillpilot/skillpilot/protocol"
)

func TestHappyPath(t *testing.T) {
	t.Parallel()
	h := newHarness(t).start()
	a := h.submit("puts hello\nset x 42")
	b := h.submit("puts \"x is $x\"; expr {$x * 2}")
	c := h.submit("proc greet {n} {return \"hi $n\"}\ngreet bob")
	ra, rb, rc := h.result(a), h.result(b), h.result(c)
	for _, r := range []protocol.Result{ra, rb, rc} {
		if r.Status != protocol.StatusOK || r.ExitReason != protocol.ReasonMarkerSeen || r.ToolRC == nil || *r.ToolRC != 0 {
			t.Fatalf("result %+v", r)
		}
		if r.OutputPath == "" || filepath.IsAbs(r.OutputPath) {
			t.Errorf("output_path %q must be relative", r.OutputPath)
		}
	}
	if got := h.output(a); got != "hello\n" {
		t.Errorf("output a = %q", got)
	}
	if got := h.output(b); got != "x is 42\n" {
		t.Errorf("output b = %q", got)
	}
	if *rb.Value != "84" || *rc.Value != "hi bob" {
		t.Errorf("values %q %q", *rb.Value, *rc.Value)
	}
	if ra.Stats.Bytes != 6 || ra.Stats.Lines != 1 {
		t.Errorf("stats %+v", ra.Stats)
	}
	// state.json follows busy/idle flips within stateDelay.
	h.waitFor("state to show 3 commands done", func() bool {
		st := h.state()
		return st.Phase == protocol.PhaseIdle && st.CommandsDone == 3 && st.ToolPID != 0
	})
	b1, _ := os.ReadFile(filepath.Join(h.dir, protocol.FileState))
	validateFile(t, "state.json", b1)
	b2, _ := os.ReadFile(filepath.Join(h.dir, protocol.FileHeartbeat))
	validateFile(t, "heartbeat.json", b2)
	h.stop(protocol.StopGraceful)
	evs := h.events()
	if countEvents(evs, protocol.EvCmdBegin) != 3 || countEvents(evs, protocol.EvCmdEnd) != 3 {
		t.Errorf("want one begin and one end per command: %v", evs)
	}
	for _, e := range evs {
		if e.Event == protocol.EvCmdEnd && (e.SpoolStart == nil || e.SpoolEnd == nil || *e.SpoolEnd <= *e.SpoolStart) {
			t.Errorf("cmd_end without a spool range: %+v", e)
		}
	}
	spool, _ := os.ReadFile(filepath.Join(h.dir, protocol.FileSpool))
	if end := rc.SpoolEnd; int64(len(spool)) < end || !strings.Contains(string(spool[ra.SpoolStart:ra.SpoolEnd]), "hello") {
		t.Errorf("spool range of a does not hold its output")
	}
	if st := h.state(); st.Phase != protocol.PhaseStopped {
		t.Errorf("final phase %s", st.Phase)
	}
	tail, _ := os.ReadFile(filepath.Join(h.dir, protocol.FileTail))
	if !strings.Contains(string(tail), "x is 42") {
		t.Errorf("tail %q", tail)
	}
	invariants(t, h.dir)
}

func TestOrderingOfShuffledBacklog(t *testing.T) {
	t.Parallel()
	testenv.Slow(t, "seconds of real tclsh and races")
	h := newHarness(t)
	const n = 60
	seqs := rand.Perm(n)
	names := map[int64]string{}
	for _, s := range seqs {
		seq := int64(s + 1)
		c := protocol.Command{CmdID: fmt.Sprintf("o%d", seq), Seq: seq, Kind: protocol.KindTcl, Payload: fmt.Sprintf("lappend ::order %d", seq)}
		b, _ := json.Marshal(c)
		// Unpadded names, as a seed-protocol master writes them.
		name := fmt.Sprintf("cmd_%d_%s.json", seq, c.CmdID)
		h.writeFile(rel(protocol.DirQueue, name), string(b))
		names[seq] = name
	}
	h.start()
	h.result(names[n])
	last := h.submit("set ::order", func(c *protocol.Command) { c.Seq = n + 1; c.CmdID = "last" })
	r := h.result(last)
	want := make([]string, n)
	for i := range want {
		want[i] = fmt.Sprint(i + 1)
	}
	if *r.Value != strings.Join(want, " ") {
		t.Fatalf("order = %s", *r.Value)
	}
}

func TestLargePayloads(t *testing.T) {
	t.Parallel()
	h := newHarness(t).start()
	var sb strings.Builder
	for i := 0; i < 10000; i++ {
		fmt.Fprintf(&sb, "incr ::count\n")
	}
	sb.WriteString("set ::count")
	a := h.submit(sb.String())
	long := strings.Repeat("x", 100*1024)
	b := h.submit(fmt.Sprintf("set s %q\nputs $s\nstring length $s", long))
	if r := h.result(a); r.Status != protocol.StatusOK || *r.Value != "10000" {
		t.Fatalf("10,000-line payload: %+v", r)
	}
	if r := h.result(b); r.Status != protocol.StatusOK || *r.Value != "102400" {
		t.Fatalf("100 KB line: %+v", r)
	}
	if got := h.output(b); got != long+"\n" {
		t.Fatalf("100 KB line output: %d bytes", len(got))
	}
}

func TestChunkedSlowOutput(t *testing.T) {
	t.Parallel()
	h := newHarness(t).start()
	a := h.submit("for {set i 0} {$i < 20} {incr i} { puts -nonewline \"part$i \"; flush stdout; after 5; puts done$i; flush stdout; after 5 }")
	r := h.result(a)
	var want strings.Builder
	for i := 0; i < 20; i++ {
		fmt.Fprintf(&want, "part%d done%d\n", i, i)
	}
	if r.Status != protocol.StatusOK || h.output(a) != want.String() {
		t.Fatalf("output %q", h.output(a))
	}
}

func TestTclErrorThenGoodCommand(t *testing.T) {
	t.Parallel()
	h := newHarness(t).start()
	a := h.submit("puts before\nerror {something broke}\nputs after")
	b := h.submit("puts fine")
	ra := h.result(a)
	if ra.Status != protocol.StatusError || ra.Error == nil || ra.Error.Message != "something broke" || *ra.ToolRC != 1 {
		t.Fatalf("error result %+v %+v", ra, ra.Error)
	}
	if h.output(a) != "before\n" {
		t.Errorf("output %q", h.output(a))
	}
	if rb := h.result(b); rb.Status != protocol.StatusOK || h.output(b) != "fine\n" {
		t.Fatalf("next command %+v", rb)
	}
}

// Output holds exactly what the payload printed: no prompt, no echo, no
// marker, no trailing newline added, with the fake EDA tool's own prompt
// and its marker-like lines.
func TestExactOutputFakeEDA(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.Tool = fakeEDA(t) }).start()
	a := h.submit("load_design top\nreport_markers\nreport_timing 3 5")
	b := h.submit("puts -nonewline no-newline")
	c := h.submit("set ::design")
	ra := h.result(a)
	want := "Design 'top' loaded: 12345 cells\n" +
		"Note: lines that start with __SP_DONE__ are reserved\n" +
		"__SP_DONE__ not-your-token rc=0\n" +
		"  __SP_DONE__ indented\n" +
		"__SP_DONE__ split\n" +
		"Path 1: slack 0.125 ns (MET)\nPath 2: slack 0.250 ns (MET)\nPath 3: slack 0.375 ns (MET)\n"
	if ra.Status != protocol.StatusOK || h.output(a) != want {
		t.Fatalf("output:\n%q\nwant:\n%q", h.output(a), want)
	}
	if *ra.Value != "3 paths" {
		t.Errorf("value %q", *ra.Value)
	}
	h.result(b)
	if got := h.output(b); got != "no-newline" {
		t.Errorf("output %q", got)
	}
	if rc := h.result(c); *rc.Value != "top" {
		t.Errorf("state did not persist: %q", *rc.Value)
	}
	for _, n := range []string{a, b, c} {
		out := h.output(n)
		for _, bad := range []string{"fake_shell", "__SP_BEGIN__", "::__sp::", "\r"} {
			if strings.Contains(out, bad) {
				t.Errorf("output of %s contains %q: %q", n, bad, out)
			}
		}
	}
}

func TestHugeOutputBoundedMemory(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("200 MB through a PTY")
	}
	dir := filepath.Join(t.TempDir(), "s")
	p := startRunnerProc(t, "--session", dir, "--heartbeat", "200ms")
	writeCmd(t, dir, 1, "big", "set line [string repeat x 1023]\nfor {set i 0} {$i < 204800} {incr i} { puts $line }\nexpr 1")
	res := waitResultFile(t, dir, protocol.CommandName(1, "big"))
	if res.Status != protocol.StatusOK || res.Stats.Bytes != 200<<20 || res.Stats.Lines != 204800 {
		t.Fatalf("result %+v", res)
	}
	hwm := vmHWM(t, p.Pid())
	t.Logf("runner peak RSS after 200 MiB of output: %d KiB", hwm)
	if hwm > 60<<10 {
		t.Errorf("runner peak RSS %d KiB; output must not be held in memory", hwm)
	}
	fi, err := os.Stat(filepath.Join(dir, res.OutputPath))
	if err != nil || fi.Size() != 200<<20 {
		t.Fatalf("output file: %v %v", fi, err)
	}
	os.WriteFile(filepath.Join(dir, protocol.FileStop), nil, 0o600)
	if code := p.ExitCode(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	checkNoOrphans(t, dir)
	invariants(t, dir, protocol.CommandName(1, "big"))
}

func vmHWM(t testing.TB, pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			var kb int64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kb)
			return kb
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

func writeCmd(t testing.TB, dir string, seq int64, id, payload string) string {
	t.Helper()
	return writeCmdKind(t, dir, seq, id, protocol.KindTcl, payload)
}

// writeCmdKind queues a command of kind as a master does: a temporary
// file in queue/, then a rename to its name.
func writeCmdKind(t testing.TB, dir string, seq int64, id string, kind protocol.Kind, payload string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, protocol.DirQueue), 0o700); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(protocol.Command{CmdID: id, Seq: seq, Kind: kind, Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	name := protocol.CommandName(seq, id)
	tmp := filepath.Join(dir, protocol.DirQueue, "."+name+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, protocol.DirQueue, name)); err != nil {
		t.Fatal(err)
	}
	return name
}

func waitResultFile(t testing.TB, dir, name string) protocol.Result {
	t.Helper()
	h := &harness{t: t, dir: dir}
	return h.result(name)
}

func TestInvalidInput(t *testing.T) {
	t.Parallel()
	h := newHarness(t).start()
	q := func(name, content string) string {
		h.writeFile(rel(protocol.DirQueue, name), content)
		return name
	}
	cases := []struct {
		name, file, wantMsg string
	}{
		{"not json", q("cmd_1_bad1.json", "{not json"), "not valid JSON"},
		{"missing payload", q("cmd_2_bad2.json", `{"cmd_id":"bad2","seq":2,"kind":"tcl"}`), "payload: required"},
		{"seq mismatch", q("cmd_3_bad3.json", `{"cmd_id":"bad3","seq":4,"kind":"tcl","payload":"puts x"}`), "seq: is 4 but the file name says 3"},
		{"id mismatch", q("cmd_5_bad5.json", `{"cmd_id":"other","seq":5,"kind":"tcl","payload":"puts x"}`), "cmd_id: is \"other\""},
		{"unsafe id in name", q("cmd_6_a b.json", `{"cmd_id":"a b","seq":6,"kind":"tcl","payload":"puts x"}`), "cmd_id:"},
		{"unknown kind", q("cmd_7_bad7.json", `{"cmd_id":"bad7","seq":7,"kind":"perl","payload":"print 1"}`), "kind: unknown kind"},
		{"wrong type", q("cmd_8_bad8.json", `{"cmd_id":"bad8","seq":"8","kind":"tcl","payload":"x"}`), "seq: has the wrong type"},
		{"bad policy", q("cmd_9_bad9.json", `{"cmd_id":"bad9","seq":9,"kind":"tcl","payload":"x","cancel_policy":"nuke"}`), "cancel_policy"},
		{"empty file", q("cmd_10_bad10.json", ""), "not valid JSON"},
		{"kind of another runner", q("cmd_15_bad15.json", `{"cmd_id":"bad15","seq":15,"kind":"sh","payload":"ls"}`), "this runner runs tcl payloads"},
		{"another protocol version", q("cmd_16_bad16.json", `{"protocol_version":99,"cmd_id":"bad16","seq":16,"kind":"tcl","payload":"puts x"}`),
			"protocol_version: is 99; this runner speaks version 1"},
	}
	big := filepath.Join(h.dir, protocol.DirQueue, "cmd_11_big.json")
	if err := os.WriteFile(big, make([]byte, protocol.MaxCommandSize+10), 0o600); err != nil {
		t.Fatal(err)
	}
	cases = append(cases, struct{ name, file, wantMsg string }{"too large", "cmd_11_big.json", "larger than"})
	target := filepath.Join(t.TempDir(), "target.json")
	os.WriteFile(target, []byte(`{"cmd_id":"ln","seq":12,"kind":"tcl","payload":"puts x"}`), 0o600)
	if err := os.Symlink(target, filepath.Join(h.dir, protocol.DirQueue, "cmd_12_ln.json")); err != nil {
		t.Fatal(err)
	}
	cases = append(cases, struct{ name, file, wantMsg string }{"symlink", "cmd_12_ln.json", "symlink"})
	good := h.submit("puts ok", func(c *protocol.Command) { c.Seq = 13; c.CmdID = "good" })
	// Files that are not commands are ignored and left alone.
	h.writeFile(rel(protocol.DirQueue, "notes.txt"), "hello")
	h.writeFile(rel(protocol.DirQueue, "cmd_14_x.json.tmp"), "{")
	for _, tc := range cases {
		r := h.result(tc.file)
		if r.Status != protocol.StatusError || r.ExitReason != protocol.ReasonInvalidRequest || r.Error == nil ||
			r.Error.Code != protocol.CodeInvalidRequest || !strings.Contains(r.Error.Message, tc.wantMsg) {
			t.Errorf("%s: %+v %+v", tc.name, r, r.Error)
		}
	}
	if r := h.result(good); r.Status != protocol.StatusOK {
		t.Fatalf("good command after bad ones: %+v", r)
	}
	h.stop(protocol.StopGraceful)
	for _, n := range []string{"notes.txt", "cmd_14_x.json.tmp"} {
		if _, err := os.Stat(filepath.Join(h.dir, protocol.DirQueue, n)); err != nil {
			t.Errorf("non-command %s was touched: %v", n, err)
		}
	}
	rejected, _ := readNames(filepath.Join(h.dir, protocol.DirRejected))
	if len(rejected) != len(cases) {
		t.Errorf("rejected/ holds %v", rejected)
	}
	invariants(t, h.dir)
}

// A writer that is not atomic (echo > queue/cmd_...json) may be caught
// half-way; the file runs normally once complete.
func TestHalfWrittenFileCompletedLater(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.ParseGrace = 5 * time.Second }).start()
	name := "cmd_1_half.json"
	full := `{"cmd_id":"half","seq":1,"kind":"tcl","payload":"puts completed"}`
	p := filepath.Join(h.dir, protocol.DirQueue, name)
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(full[:25])
	f.Sync()
	time.Sleep(300 * time.Millisecond)
	f.WriteString(full[25:])
	f.Close()
	r := h.result(name)
	if r.Status != protocol.StatusOK || h.output(name) != "completed\n" {
		t.Fatalf("%+v %q", r, h.output(name))
	}
}

// A command written after a half-written one (a later seq, renamed into
// place at once) does not overtake it: the half-written file holds the
// queue until it is complete, then both run in seq order (PROTOCOL.md 6.1).
func TestHalfWrittenFileHoldsLaterSeqs(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.ParseGrace = 5 * time.Second }).start()
	first := "cmd_1_first.json"
	full := `{"cmd_id":"first","seq":1,"kind":"tcl","payload":"puts one"}`
	f, err := os.Create(filepath.Join(h.dir, protocol.DirQueue, first))
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(full[:25])
	f.Sync()
	second := writeCmd(t, h.dir, 2, "second", "puts two")
	// Give the runner time to see both and (before the fix) run the second.
	h.waitFor("the runner to see both files", func() bool { return h.state().QueueDepth == 2 })
	time.Sleep(300 * time.Millisecond)
	if _, err := os.Stat(filepath.Join(h.dir, protocol.DirResult, second)); err == nil {
		t.Fatal("the later command finished while the earlier one was still being written")
	}
	f.WriteString(full[25:])
	f.Close()
	if r := h.result(second); r.Status != protocol.StatusOK {
		t.Fatalf("second: %+v", r)
	}
	if r := h.result(first); r.Status != protocol.StatusOK || h.output(first) != "one\n" {
		t.Fatalf("first: %+v %q", r, h.output(first))
	}
	var begun []string
	for _, ev := range h.events() {
		if ev.Event == protocol.EvCmdBegin {
			begun = append(begun, ev.CmdID)
		}
	}
	if !slices.Equal(begun, []string{"first", "second"}) {
		t.Errorf("cmd_begin order %v, want [first second]", begun)
	}
}

func TestIdempotency(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	side := filepath.Join(t.TempDir(), "side")
	// A result already exists for this name: the command must not run.
	name := protocol.CommandName(1, "done1")
	h.writeDone(name)
	writeCmd(t, h.dir, 1, "done1", fmt.Sprintf("set f [open %q a]; puts $f ran; close $f", side))
	h.start()
	dup := writeCmd(t, h.dir, 2, "done1", "puts dup")
	r := h.result(dup)
	if r.Error == nil || r.Error.Code != protocol.CodeDuplicateCmdID {
		t.Fatalf("duplicate cmd_id: %+v", r)
	}
	h.waitFor("queue cleared", func() bool {
		_, err := os.Stat(filepath.Join(h.dir, protocol.DirQueue, name))
		return os.IsNotExist(err)
	})
	h.stop(protocol.StopGraceful)
	if _, err := os.Stat(side); !os.IsNotExist(err) {
		t.Fatal("a command with a result was executed again")
	}
	if countEvents(h.events(), protocol.EvSkipped) != 1 {
		t.Error("want one cmd_skipped event")
	}
}

func TestShKind(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.Kind = protocol.KindSh }).start()
	a := h.submit("X=41; echo \"value $((X+1))\"")
	b := h.submit("echo $X; false")
	c := h.submit("printf 'no newline'")
	if r := h.result(a); r.Status != protocol.StatusOK || h.output(a) != "value 42\n" {
		t.Fatalf("%+v %q", r, h.output(a))
	}
	rb := h.result(b)
	if rb.Status != protocol.StatusError || *rb.ToolRC != 1 || h.output(b) != "41\n" {
		t.Fatalf("%+v %q", rb, h.output(b))
	}
	h.result(c)
	if h.output(c) != "no newline" {
		t.Fatalf("%q", h.output(c))
	}
}

func TestPayloadContainsMarker(t *testing.T) {
	t.Parallel()
	h := newHarness(t).start()
	a := h.submit("puts work\nputs \"__SP_DONE__ mytok rc=0\"", func(c *protocol.Command) {
		c.Marker = &protocol.Marker{Mode: protocol.MarkerPayloadContains, Token: "mytok"}
	})
	b := h.submit("puts next")
	if r := h.result(a); r.Status != protocol.StatusOK || h.output(a) != "work\n" {
		t.Fatalf("%+v %q", r, h.output(a))
	}
	if r := h.result(b); r.Status != protocol.StatusOK || h.output(b) != "next\n" {
		t.Fatalf("%+v %q", r, h.output(b))
	}
}

func TestUTF8AndValueTruncation(t *testing.T) {
	t.Parallel()
	h := newHarness(t).start()
	a := h.submit("puts \"héllo wörld → ✓\"\nset v \"π≈3.14\"")
	b := h.submit("string repeat ab 40000")
	if r := h.result(a); h.output(a) != "héllo wörld → ✓\n" || *r.Value != "π≈3.14" {
		t.Fatalf("%q %q", h.output(a), *r.Value)
	}
	rb := h.result(b)
	if !rb.ValueTruncated || len(*rb.Value) != maxValue {
		t.Fatalf("value %d bytes, truncated %v", len(*rb.Value), rb.ValueTruncated)
	}
	_ = slices.Contains[[]string]
}

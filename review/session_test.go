package review_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
	"github.com/skillpilot/skillpilot/review"
	"github.com/skillpilot/skillpilot/review/internal/sessiontest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if recorded.dir != "" {
		os.RemoveAll(filepath.Dir(recorded.dir))
	}
	os.Exit(code)
}

// recorded is a finished session made once by a real runner on tclsh:
// ok, a Tcl error, a cancelled running command (tclsh dies: a tool
// restart), a payload that exits (another restart) and a graceful stop.
var recorded struct {
	dir  string
	cmds []sessiontest.Cmd
}

func session(t *testing.T) (string, []sessiontest.Cmd) {
	t.Helper()
	if recorded.dir != "" {
		return recorded.dir, recorded.cmds
	}
	sessiontest.RequireTclsh(t)
	dir := filepath.Join(t.TempDir(), "s")
	r := sessiontest.Start(t, dir, "--", "tclsh")
	cmds := []sessiontest.Cmd{
		{Seq: 1, ID: "ok", Payload: "puts hello; expr 6*7"},
		{Seq: 2, ID: "fails", Payload: "error {no such cell}"},
		{Seq: 3, ID: "long", Payload: "puts started; flush stdout; after 60000"},
		{Seq: 4, ID: "exits", Payload: "exit 3"},
		{Seq: 5, ID: "last", Payload: "puts [string repeat é 10]"},
	}
	for _, c := range cmds {
		sessiontest.Submit(t, dir, c)
		if c.ID == "long" {
			sessiontest.WaitOutput(t, dir, c, 7)
			sessiontest.Cancel(t, dir, c.ID)
		}
		sessiontest.WaitResult(t, dir, c)
	}
	r.Stop()
	// Keep it for the other tests of this process (t.TempDir goes away).
	keep, err := os.MkdirTemp("", "history-session")
	if err != nil {
		t.Fatal(err)
	}
	copyDir(t, dir, filepath.Join(keep, "s"), true)
	recorded.dir, recorded.cmds = filepath.Join(keep, "s"), cmds
	return recorded.dir, cmds
}

// copyDir copies a session with cp: -a keeps the mtimes, -r gives new ones
// (a session copied carelessly to another host).
func copyDir(t *testing.T, from, to string, keepTimes bool) {
	t.Helper()
	flag := "-r"
	if keepTimes {
		flag = "-a"
	}
	if out, err := exec.Command("cp", flag, from, to).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
}

func load(t *testing.T, dir string) *review.Session {
	t.Helper()
	s, err := review.Load(dir, review.Options{Payloads: true})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestLoadFinishedSession(t *testing.T) {
	dir, cmds := session(t)
	s := load(t, dir)
	if len(s.Warnings) > 0 {
		t.Errorf("warnings: %v", s.Warnings)
	}
	if len(s.Commands) != len(cmds) || s.Live || s.Queued != 0 || s.Kind != protocol.KindTcl {
		t.Fatalf("%d commands (want %d), live %v, queued %d, kind %q", len(s.Commands), len(cmds), s.Live, s.Queued, s.Kind)
	}
	want := map[string]string{"ok": "ok", "fails": "error", "long": "cancelled", "exits": "error", "last": "ok"}
	for i, c := range s.Commands {
		if c.CmdID != cmds[i].ID {
			t.Errorf("command %d is %s, want %s (start order)", i, c.CmdID, cmds[i].ID)
		}
		if c.Status != want[c.CmdID] || !c.PayloadKnown || c.Payload != cmds[i].Payload || c.CommandPath != "archive/"+cmds[i].Name() {
			t.Errorf("%s: status %s, payload %q known %v, path %s", c.CmdID, c.Status, c.Payload, c.PayloadKnown, c.CommandPath)
		}
		if c.Submitted.IsZero() || c.QueueWait() < 0 || c.Duration() < 0 || c.End.Before(c.Start) {
			t.Errorf("%s: submitted %v, start %v, end %v", c.CmdID, c.Submitted, c.Start, c.End)
		}
		out, err := s.Output(c, 1<<20)
		if err != nil || int64(len(out)) != c.Result.Stats.Bytes {
			t.Errorf("%s: output %q, %v", c.CmdID, out, err)
		}
	}
	if !strings.HasPrefix(s.Commands[4].PayloadHead, "puts [string") {
		t.Errorf("payload head %q", s.Commands[4].PayloadHead)
	}
	kinds := map[string]int{}
	for _, m := range s.Marks {
		kinds[m.Kind]++
	}
	if kinds[review.MarkRunnerStart] != 1 || kinds[review.MarkToolRestart] != 2 || kinds[review.MarkCancel] != 1 ||
		kinds[review.MarkStop] != 1 || kinds[review.MarkRunnerStop] != 1 || kinds[review.MarkRunnerRestart] != 0 {
		t.Errorf("marks: %v", kinds)
	}
	if s.Events[protocol.EvCmdEnd] != len(cmds) || len(s.SessionIDs) != 1 {
		t.Errorf("events %v, session ids %v", s.Events, s.SessionIDs)
	}
	if s.Start.After(s.Commands[0].Submitted) || s.End.Before(s.Commands[4].End) {
		t.Errorf("span %v–%v does not cover the commands", s.Start, s.End)
	}
}

// TestLoadCopiedSession: a copy with new mtimes still has its submit times
// (submitted_at); without submitted_at, a file mtime later than the start
// is not taken for a submit time: the wait is unknown, never negative.
func TestLoadCopiedSession(t *testing.T) {
	dir, _ := session(t)
	cp := filepath.Join(t.TempDir(), "copy")
	copyDir(t, dir, cp, false)
	time.Sleep(10 * time.Millisecond)
	s := load(t, cp)
	for _, c := range s.Commands {
		if c.Submitted.IsZero() {
			t.Errorf("%s lost its submit time in a copy", c.CmdID)
		}
	}
	// Strip submitted_at from the archived command files, then copy again.
	names, _ := filepath.Glob(filepath.Join(cp, "archive", "*.json"))
	for _, n := range names {
		b, _ := os.ReadFile(n)
		i := bytes.Index(b, []byte(`"submitted_at"`))
		j := bytes.Index(b[i:], []byte(`Z",`))
		if i < 0 || j < 0 {
			t.Fatalf("%s: %s", n, b)
		}
		os.WriteFile(n, append(b[:i:i], b[i+j+3:]...), 0o600)
	}
	s = load(t, cp)
	for _, c := range s.Commands {
		if !c.PayloadKnown || !c.Submitted.IsZero() || c.QueueWait() != -1 {
			t.Errorf("%s: known %v, submitted %v (mtime after start must not count)", c.CmdID, c.PayloadKnown, c.Submitted)
		}
	}
}

// TestLoadLiveSession reads a session while a command runs.
func TestLoadLiveSession(t *testing.T) {
	sessiontest.RequireTclsh(t)
	dir := filepath.Join(t.TempDir(), "live")
	r := sessiontest.Start(t, dir, "--", "tclsh")
	c := sessiontest.Cmd{Seq: 1, ID: "running", Payload: "puts going; flush stdout; after 60000"}
	q := sessiontest.Cmd{Seq: 2, ID: "queued", Payload: "expr 1"}
	sessiontest.Submit(t, dir, c)
	sessiontest.Submit(t, dir, q)
	sessiontest.WaitOutput(t, dir, c, 5)
	now := time.Now()
	s, err := review.Load(dir, review.Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if !s.Live || s.Queued != 1 || len(s.Commands) != 1 {
		t.Fatalf("live %v, queued %d, commands %d", s.Live, s.Queued, len(s.Commands))
	}
	rc := s.Commands[0]
	if rc.Status != review.StatusRunning || rc.Result != nil || !rc.End.Equal(now) || rc.Start.IsZero() || rc.PayloadHead != c.Payload {
		t.Errorf("running command: %+v", rc)
	}
	sessiontest.Cancel(t, dir, c.ID)
	sessiontest.WaitResult(t, dir, c)
	sessiontest.WaitResult(t, dir, q)
	r.Stop()
}

// TestLoadHostileFiles plants what must not hang, crash or lead the reader
// out of the session: FIFOs, symlinks, a huge sparse file, garbage and a
// torn last line in meta.log, an over-long event line.
func TestLoadHostileFiles(t *testing.T) {
	dir, cmds := session(t)
	h := filepath.Join(t.TempDir(), "h")
	copyDir(t, dir, h, true)
	outside := filepath.Join(t.TempDir(), "outside")
	os.MkdirAll(outside, 0o700)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// meta.log: a garbage line, an over-long line, and a torn last line.
	f, err := os.OpenFile(filepath.Join(h, protocol.FileMeta), os.O_APPEND|os.O_WRONLY, 0)
	must(err)
	f.WriteString("not json\n")
	f.WriteString(`{"ts":"2026-01-01T00:00:00Z","event":"warning","detail":{"x":"` + strings.Repeat("y", 2<<20) + "\"}}\n")
	f.WriteString(`{"ts":"2026-01-01T00:00:00.000Z","event":"cmd_b`)
	f.Close()
	// result/: a symlink to a file outside, a FIFO, a 300 MB sparse file.
	secret := filepath.Join(outside, "secret.json")
	must(os.WriteFile(secret, []byte(`{"cmd_id":"leak","status":"ok"}`), 0o600))
	must(os.Symlink(secret, filepath.Join(h, "result", "cmd_0000000090_leak.json")))
	must(syscall.Mkfifo(filepath.Join(h, "result", "cmd_0000000091_fifo.json"), 0o600))
	must(os.WriteFile(filepath.Join(h, "result", "cmd_0000000092_huge.json"), nil, 0o600))
	must(os.Truncate(filepath.Join(h, "result", "cmd_0000000092_huge.json"), 300<<20))
	// archive/ replaced by a symlink to a directory outside.
	must(os.Rename(filepath.Join(h, "archive"), filepath.Join(outside, "archive")))
	must(os.Symlink(filepath.Join(outside, "archive"), filepath.Join(h, "archive")))
	// An output file that was changed after its result.
	must(os.WriteFile(filepath.Join(h, "output", protocol.OutputName(cmds[0].Name())), []byte("tampered\n"), 0o600))

	done := make(chan *review.Session, 1)
	go func() {
		s, err := review.Load(h, review.Options{})
		if err != nil {
			t.Error(err)
		}
		done <- s
	}()
	var s *review.Session
	select {
	case s = <-done:
	case <-time.After(sessiontest.LongWait):
		t.Fatal("Load hung on the planted files")
	}
	if s == nil {
		return
	}
	w := strings.Join(s.Warnings, "\n")
	for _, want := range []string{"cmd_0000000090_leak.json", "cmd_0000000091_fifo.json", "cmd_0000000092_huge.json",
		"archive/: " + "fsq: refusing to follow a symlink", "1 lines are not valid JSON", "longer than"} {
		if !strings.Contains(w, want) {
			t.Errorf("no warning about %q in:\n%s", want, w)
		}
	}
	if strings.Contains(w, "cmd_b") {
		t.Errorf("the torn last line of meta.log was reported: %s", w)
	}
	if len(s.Commands) != len(cmds) {
		t.Errorf("%d commands, want the %d real ones", len(s.Commands), len(cmds))
	}
	for _, c := range s.Commands {
		if c.CmdID == "leak" || c.PayloadKnown {
			t.Errorf("%s read through a symlink (payload known %v)", c.CmdID, c.PayloadKnown)
		}
	}
	if _, err := s.Output(s.Commands[0], 1<<20); !errors.Is(err, review.ErrOutputMismatch) {
		t.Errorf("a changed output file: %v, want ErrOutputMismatch", err)
	}
	// The events before the garbage are all there.
	if s.Events[protocol.EvCmdEnd] != len(cmds) {
		t.Errorf("events: %v", s.Events)
	}
	// A meta.log that is a FIFO is refused, not opened for a blocking read.
	must(os.Remove(filepath.Join(h, protocol.FileMeta)))
	must(syscall.Mkfifo(filepath.Join(h, protocol.FileMeta), 0o600))
	go func() { s, _ := review.Load(h, review.Options{}); done <- s }()
	select {
	case s = <-done:
		if !strings.Contains(strings.Join(s.Warnings, "\n"), "log/meta.log: not a regular file") {
			t.Errorf("warnings: %v", s.Warnings)
		}
	case <-time.After(sessiontest.LongWait):
		t.Fatal("Load hung on a FIFO meta.log")
	}
}

func TestFindSessionsAndNotASession(t *testing.T) {
	dir, _ := session(t)
	pool := t.TempDir()
	copyDir(t, dir, filepath.Join(pool, "b"), true)
	copyDir(t, dir, filepath.Join(pool, "a"), true)
	os.MkdirAll(filepath.Join(pool, "empty"), 0o700)
	os.WriteFile(filepath.Join(pool, "notes.txt"), []byte("x"), 0o600)
	os.Symlink(dir, filepath.Join(pool, "link"))
	got, err := review.FindSessions(pool)
	if err != nil || len(got) != 2 || filepath.Base(got[0]) != "a" || filepath.Base(got[1]) != "b" {
		t.Errorf("FindSessions: %v %v", got, err)
	}
	if got, err := review.FindSessions(dir); err != nil || len(got) != 1 || got[0] != dir {
		t.Errorf("a session given as a pool: %v %v", got, err)
	}
	if _, err := review.FindSessions(filepath.Join(pool, "empty")); !errors.Is(err, review.ErrNotSession) {
		t.Errorf("an empty pool: %v", err)
	}
	if _, err := review.Load(filepath.Join(pool, "empty"), review.Options{}); !errors.Is(err, review.ErrNotSession) {
		t.Errorf("Load of a directory that is not a session: %v", err)
	}
}

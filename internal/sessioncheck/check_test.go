package sessioncheck

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skillpilot/skillpilot/protocol"
)

// session builds a small valid session tree: one command that ran (with
// output), one rejected file, one command still queued.
func session(t *testing.T) (string, []string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "s")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, d := range protocol.Dirs {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	ran, bad, queued := protocol.CommandName(1, "a"), protocol.CommandName(2, "b"), protocol.CommandName(3, "c")
	out := []byte("hello\n")
	sum := sha256.Sum256(out)
	write(t, dir, "output/"+protocol.OutputName(ran), out)
	write(t, dir, "archive/"+ran, []byte(`{}`))
	write(t, dir, "log/rejected/"+bad, []byte(`{`))
	write(t, dir, "queue/"+queued, []byte(`{}`))
	writeJSON(t, dir, "result/"+ran, protocol.Result{ProtocolVersion: 1, CmdID: "a", Seq: 1, Status: protocol.StatusOK,
		OutputPath: "output/" + protocol.OutputName(ran), Stats: protocol.Stats{Bytes: 6, Lines: 1},
		OutputSHA256: hex.EncodeToString(sum[:]), CommandPath: "archive/" + ran})
	writeJSON(t, dir, "result/"+bad, protocol.Result{ProtocolVersion: 1, CmdID: "b", Seq: 2, Status: protocol.StatusError,
		Error: &protocol.Error{Code: protocol.CodeInvalidRequest, Message: "x"}, CommandPath: "log/rejected/" + bad})
	events := []protocol.Event{
		{Event: protocol.EvRunnerStart, Detail: map[string]any{"protocol_version": 1}},
		{Event: protocol.EvCmdBegin, CmdID: "a", Seq: 1},
		{Event: protocol.EvRejected, CmdID: "b", Seq: 2},
		{Event: protocol.EvCmdEnd, CmdID: "a", Seq: 1},
	}
	var log []byte
	for _, e := range events {
		e.TS = protocol.Now()
		b, _ := json.Marshal(e)
		log = append(append(log, b...), '\n')
	}
	write(t, dir, protocol.FileMeta, log)
	return dir, []string{ran, bad, queued}
}

func write(t *testing.T, dir, rel string, b []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, rel), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func writeJSON(t *testing.T, dir, rel string, v any) {
	t.Helper()
	b, _ := json.Marshal(v)
	write(t, dir, rel, b)
}

func appendFile(t *testing.T, dir, rel, s string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, rel), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(s)
	f.Close()
}

func TestCheckValidSession(t *testing.T) {
	dir, names := session(t)
	if err := Check(dir, Options{Submitted: names, AllowQueued: true}); err != nil {
		t.Fatalf("a valid session fails:\n%v", err)
	}
	if err := Check(dir, Options{Submitted: names}); err == nil || !strings.Contains(err.Error(), "still in queue") {
		t.Fatalf("a queued command without AllowQueued: %v", err)
	}
}

// Each break of an invariant is reported, with a message naming it.
func TestCheckFindsEachViolation(t *testing.T) {
	ran, bad := protocol.CommandName(1, "a"), protocol.CommandName(2, "b")
	for _, tc := range []struct {
		name   string
		break_ func(t *testing.T, dir string)
		opts   Options
		want   string
	}{
		{"missing result", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, "result", ran)) }, Options{}, "has no result"},
		{"output size", func(t *testing.T, dir string) { appendFile(t, dir, "output/"+protocol.OutputName(ran), "x") }, Options{}, "holds 7 bytes"},
		{"output sha", func(t *testing.T, dir string) { write(t, dir, "output/"+protocol.OutputName(ran), []byte("HELLO\n")) }, Options{}, "sha256"},
		{"archive missing", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, "archive", ran)) }, Options{}, "its command file"},
		{"second result for a cmd_id", func(t *testing.T, dir string) {
			writeJSON(t, dir, "result/"+protocol.CommandName(9, "a"), protocol.Result{ProtocolVersion: 1, CmdID: "a", Seq: 9,
				Status: protocol.StatusCancelled, Error: &protocol.Error{Code: "cancelled"}, CommandPath: "archive/" + ran})
		}, Options{}, `cmd_id "a" has 2 results`},
		{"end without begin", func(t *testing.T, dir string) {
			appendFile(t, dir, protocol.FileMeta, `{"ts":"2026-01-01T00:00:00Z","event":"cmd_end","cmd_id":"z","seq":7}`+"\n")
		}, Options{}, "without a cmd_begin"},
		{"begin without end", func(t *testing.T, dir string) {
			appendFile(t, dir, protocol.FileMeta, `{"ts":"2026-01-01T00:00:00Z","event":"cmd_begin","cmd_id":"z","seq":7}`+"\n")
		}, Options{}, "has no cmd_end"},
		{"runner_start without version", func(t *testing.T, dir string) {
			appendFile(t, dir, protocol.FileMeta, `{"ts":"2026-01-01T00:00:00Z","event":"runner_start"}`+"\n")
		}, Options{}, "protocol_version"},
		{"inflight leftover", func(t *testing.T, dir string) { write(t, dir, "inflight/"+protocol.CommandName(4, "d"), nil) }, Options{}, "inflight/"},
		{"tmp leftover", func(t *testing.T, dir string) { write(t, dir, "tmp/.spare-x", nil) }, Options{}, "tmp/"},
		{"temp file in result", func(t *testing.T, dir string) { write(t, dir, "result/.cmd_1_a.json.x.tmp", nil) }, Options{}, "temporary file result/"},
		{"taken in ctl", func(t *testing.T, dir string) { os.Mkdir(filepath.Join(dir, "ctl", "cancel.json.taken.12"), 0o700) }, Options{}, "taken"},
		{"spare in output", func(t *testing.T, dir string) { write(t, dir, "output/.spare-abc", nil) }, Options{}, "spare"},
		{"loose directory", func(t *testing.T, dir string) { os.Chmod(filepath.Join(dir, "queue"), 0o777) }, Options{}, "queue/ has mode"},
		{"loose session", func(t *testing.T, dir string) { os.Chmod(dir, 0o755) }, Options{}, "session directory has mode"},
		{"loose result file", func(t *testing.T, dir string) { os.Chmod(filepath.Join(dir, "result", bad), 0o644) }, Options{}, "want -rw-------"},
		{"result names another command", func(t *testing.T, dir string) {
			writeJSON(t, dir, "result/"+bad, protocol.Result{ProtocolVersion: 1, CmdID: "q", Seq: 2, Status: protocol.StatusError,
				Error: &protocol.Error{Code: "invalid_request"}, CommandPath: "log/rejected/" + bad})
		}, Options{}, "the file name says"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, names := session(t)
			tc.break_(t, dir)
			opts := tc.opts
			opts.Submitted, opts.AllowQueued = names, true
			err := Check(dir, opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want an error containing %q, got:\n%v", tc.want, err)
			}
		})
	}
}

// An NFS client's silly-renamed file (removed while still open) is not a
// leftover of the runner's; a dot-file of ours is.
func TestCheckIgnoresNFSSillyRenames(t *testing.T) {
	dir, names := session(t)
	write(t, dir, "result/.nfs000000000123abcd00000001", nil)
	write(t, dir, "tmp/.nfs000000000123abcd00000002", nil)
	if err := Check(dir, Options{Submitted: names, AllowQueued: true}); err != nil {
		t.Fatalf(".nfs files: %v", err)
	}
	write(t, dir, "result/.x.tmp", nil)
	if err := Check(dir, Options{Submitted: names, AllowQueued: true}); err == nil {
		t.Fatal("a temporary file in result/ accepted")
	}
}

// A running runner's current work is not a violation; a second open
// cmd_begin is.
func TestCheckRunning(t *testing.T) {
	dir, names := session(t)
	write(t, dir, "inflight/"+protocol.CommandName(4, "d"), nil)
	appendFile(t, dir, protocol.FileMeta, `{"ts":"2026-01-01T00:00:00Z","event":"cmd_begin","cmd_id":"d","seq":4}`+"\n")
	if err := Check(dir, Options{Submitted: names, AllowQueued: true, Running: true}); err != nil {
		t.Fatalf("running: %v", err)
	}
	appendFile(t, dir, protocol.FileMeta, `{"ts":"2026-01-01T00:00:00Z","event":"cmd_begin","cmd_id":"e","seq":5}`+"\n")
	if err := Check(dir, Options{Submitted: names, AllowQueued: true, Running: true}); err == nil {
		t.Fatal("two open commands accepted")
	}
}

// The group-shared convention: setgid session directory, 2770 for the
// directories masters write, 2750 for the runner's, 0640 runner files.
func TestCheckSharedModes(t *testing.T) {
	dir, names := session(t)
	os.Chmod(dir, 0o770|os.ModeSetgid)
	for _, d := range protocol.Dirs {
		m := os.FileMode(0o750)
		if protocol.IsMasterDir(d) {
			m = 0o770
		}
		os.Chmod(filepath.Join(dir, d), m|os.ModeSetgid)
	}
	for _, f := range []string{"result/" + protocol.CommandName(1, "a"), "result/" + protocol.CommandName(2, "b"),
		"output/" + protocol.OutputName(protocol.CommandName(1, "a")), protocol.FileMeta} {
		os.Chmod(filepath.Join(dir, f), 0o640)
	}
	if err := Check(dir, Options{Submitted: names, AllowQueued: true}); err != nil {
		t.Fatalf("shared session: %v", err)
	}
	os.Chmod(filepath.Join(dir, "result"), 0o770|os.ModeSetgid)
	if err := Check(dir, Options{Submitted: names, AllowQueued: true}); err == nil || !strings.Contains(err.Error(), "result/ has mode") {
		t.Fatalf("masters could write result/: %v", err)
	}
}

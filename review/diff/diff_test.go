package diff_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
	"github.com/skillpilot/skillpilot/review"
	"github.com/skillpilot/skillpilot/review/diff"
)

type cmd struct {
	payload string
	status  protocol.Status
	value   string
	output  string
	ms      int
}

// write makes a finished session of cmds, as a runner leaves it.
func write(t *testing.T, dir string, cmds []cmd) *review.Session {
	t.Helper()
	for _, d := range []string{protocol.DirResult, protocol.DirArchive, protocol.DirOutput} {
		os.MkdirAll(filepath.Join(dir, d), 0o700)
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, c := range cmds {
		id := "c" + string(rune('a'+i))
		name := protocol.CommandName(int64(i+1), id)
		sum := sha256.Sum256([]byte(c.output))
		v := c.value
		res := protocol.Result{ProtocolVersion: 1, CmdID: id, Seq: int64(i + 1), Status: c.status, ExitReason: protocol.ReasonMarkerSeen,
			StartTS: protocol.Time{Time: at}, EndTS: protocol.Time{Time: at.Add(time.Duration(c.ms) * time.Millisecond)}, Value: &v,
			Stats: protocol.Stats{Bytes: int64(len(c.output)), DurationMS: int64(c.ms)}, OutputSHA256: hex.EncodeToString(sum[:]),
			OutputPath: "output/" + protocol.OutputName(name), CommandPath: "archive/" + name}
		at = at.Add(time.Second)
		rb, _ := json.Marshal(res)
		cb, _ := json.Marshal(protocol.Command{CmdID: id, Seq: int64(i + 1), Kind: protocol.KindTcl, Payload: c.payload})
		for p, b := range map[string][]byte{"result/" + name: rb, "archive/" + name: cb, res.OutputPath: []byte(c.output)} {
			if err := os.WriteFile(filepath.Join(dir, p), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	s, err := review.Load(dir, review.Options{Payloads: true})
	if err != nil || len(s.Warnings) > 0 {
		t.Fatalf("%v %v", err, s.Warnings)
	}
	return s
}

func lines(prefix string, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteString(prefix)
		b.WriteString(strings.Repeat("-", 60))
		b.WriteString("\n")
	}
	return b.String()
}

// TestCompare: the k-th occurrence of a payload in A is compared with the
// k-th in B; status, value and output differences are found; commands of one
// run only are differences; durations never are; the output diff is bounded.
func TestCompare(t *testing.T) {
	base := t.TempDir()
	big := lines("a", 5000) // about 300 KiB
	a := write(t, filepath.Join(base, "a"), []cmd{
		{"report", protocol.StatusOK, "1", "slack 1\n", 10},
		{"check", protocol.StatusOK, "", "fine\n", 10},
		{"report", protocol.StatusOK, "2", big, 10},
		{"only A", protocol.StatusOK, "", "", 10},
	})
	b := write(t, filepath.Join(base, "b"), []cmd{
		{"report", protocol.StatusOK, "1", "slack 1\n", 900}, // slower: not a difference
		{"report", protocol.StatusOK, "2", lines("b", 5000), 10},
		{"check", protocol.StatusError, "no license", "fine\n", 10},
		{"only B", protocol.StatusOK, "", "", 10},
	})
	r := diff.Compare(a, b)
	if r.Agree || r.Matched != 3 || r.Same != 1 || r.Different != 2 || r.OnlyInA != 1 || r.OnlyInB != 1 {
		t.Fatalf("%+v", r)
	}
	got := map[string]string{}
	for _, p := range r.Differences {
		got[p.Payload+"#"+string(rune('0'+p.Occurrence))] = strings.Join(p.Differs, ",")
	}
	want := map[string]string{"check#1": "status,value", "report#2": "output", "only A#1": "only_in_a", "only B#1": "only_in_b"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: differs %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
	for _, p := range r.Differences {
		if p.Payload == "report" {
			n := strings.Count(p.OutputDiff, "\n")
			if !strings.HasPrefix(p.OutputDiff, "(line diff of the first 256 KiB only)") || n > diff.MaxDiffLines+2 ||
				!strings.Contains(p.OutputDiff, "-a---") || !strings.Contains(p.OutputDiff, "more lines of diff") {
				t.Errorf("output diff (%d lines): %.300s", n, p.OutputDiff)
			}
		}
	}
	if len(r.Slower) == 0 || r.Slower[0].DurationMS != 890 {
		t.Errorf("largest duration change: %+v", r.Slower)
	}
	var text bytes.Buffer
	if err := diff.WriteText(&text, r); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"the runs DIFFER", "only in A: cd", "only in B: cd", "+890ms", "status, value"} {
		if !strings.Contains(text.String(), s) {
			t.Errorf("text lacks %q:\n%s", s, text.String())
		}
	}
	if r := diff.Compare(a, a); !r.Agree || r.Same != 4 {
		t.Errorf("a run compared with itself: %+v", r)
	}
}

// An output file replaced after the run (by other bytes, a symlink to the
// other run's output, a FIFO, a larger file) is a difference even though
// both results record the same output_sha256: diff checks the files, never
// following a link or blocking on the FIFO.
func TestReplacedOutputDiffers(t *testing.T) {
	base := t.TempDir()
	runs := []cmd{{"report", protocol.StatusOK, "", "slack 1\n", 10}}
	a := write(t, filepath.Join(base, "a"), runs)
	outA := filepath.Join(base, "a", "output", protocol.OutputName(protocol.CommandName(1, "ca")))
	for name, replace := range map[string]func() error{
		"other bytes": func() error { return os.WriteFile(outA, []byte("slack 9\n"), 0o600) },
		"larger":      func() error { return os.WriteFile(outA, bytes.Repeat([]byte("x"), 1<<20), 0o600) },
		"symlink": func() error {
			good := filepath.Join(base, "good.out")
			os.WriteFile(good, []byte("slack 1\n"), 0o600)
			return os.Symlink(good, outA)
		},
		"fifo": func() error { return syscall.Mkfifo(outA, 0o600) },
	} {
		t.Run(name, func(t *testing.T) {
			b := write(t, filepath.Join(base, "b-"+strings.ReplaceAll(name, " ", "-")), runs)
			if r := diff.Compare(a, b); !r.Agree {
				t.Fatalf("before the replacement: %+v", r)
			}
			os.Remove(outA)
			if err := replace(); err != nil {
				t.Fatal(err)
			}
			r := diff.Compare(a, b)
			if r.Agree || r.Different != 1 || len(r.Warnings) == 0 || r.Differences[0].Differs[0] != "output" {
				t.Fatalf("replaced output (%s) still agrees: %+v", name, r)
			}
			os.Remove(outA)
			os.WriteFile(outA, []byte("slack 1\n"), 0o600)
		})
	}
}

// An edited payload is one changed step (not "only in A" plus
// "only in B"), compared as a pair; unmatched commands in different places
// stay apart; --ignore leaves volatile lines out of values and outputs.
func TestEditedStepAndIgnore(t *testing.T) {
	base := t.TempDir()
	a := write(t, filepath.Join(base, "a"), []cmd{
		{"load", protocol.StatusOK, "", "", 10},
		{"report -x 1", protocol.StatusOK, "", "slack 1\n", 10},
		{"header", protocol.StatusOK, "run at 10:00 on host1\nok", "Date: Mon 10:00\nHost: host1\nslack 5\n", 10},
		{"a tail", protocol.StatusOK, "", "", 10},
	})
	b := write(t, filepath.Join(base, "b"), []cmd{
		{"load", protocol.StatusOK, "", "", 10},
		{"report -x 2", protocol.StatusOK, "", "slack 2\n", 10},
		{"header", protocol.StatusOK, "run at 11:30 on host2\nok", "Date: Tue 11:30\nHost: host2\nslack 5\n", 10},
		{"b tail 1", protocol.StatusOK, "", "", 10},
		{"b tail 2", protocol.StatusOK, "", "", 10},
	})
	r := diff.Compare(a, b)
	// The edit between load and header pairs; the tails pair first with
	// first (a tail ↔ b tail 1), b tail 2 is only in B.
	if r.Edited != 2 || r.OnlyInA != 0 || r.OnlyInB != 1 || r.Matched != 2 || r.Different != 1 || r.Agree {
		t.Fatalf("%+v", r)
	}
	p := r.Differences[0]
	if p.Payload != "report -x 1" || p.PayloadB != "report -x 2" || strings.Join(p.Differs, ",") != "payload,output" ||
		!strings.Contains(p.OutputDiff, "-slack 1") {
		t.Fatalf("edited step: %+v", p)
	}
	var text bytes.Buffer
	diff.WriteText(&text, r)
	for _, s := range []string{`payload, output  edited step: "report -x 1" → "report -x 2"`, "2 edited, 0 only in A, 1 only in B", "2 commands matched"} {
		if !strings.Contains(text.String(), s) {
			t.Errorf("text lacks %q:\n%s", s, text.String())
		}
	}
	if strings.Contains(text.String(), "only in A: cb") {
		t.Errorf("the edit shown as only in A:\n%s", text.String())
	}

	// --ignore: the header's dates and hosts are volatile; the rest agrees.
	ign := diff.Options{Ignore: []*regexp.Regexp{regexp.MustCompile(`^(Date|Host):`), regexp.MustCompile(`^run at `)}}
	r = diff.CompareWith(a, b, ign)
	for _, p := range r.Differences {
		if p.Payload == "header" {
			t.Errorf("header still differs with --ignore: %+v", p)
		}
	}
	r = diff.Compare(a, b)
	found := false
	for _, p := range r.Differences {
		if p.Payload == "header" && strings.Join(p.Differs, ",") == "value,output" {
			found = true
		}
	}
	if !found {
		t.Errorf("without --ignore the header differs in value and output: %+v", r.Differences)
	}
	// What is left after --ignore is still compared.
	c := write(t, filepath.Join(base, "c"), []cmd{{"header", protocol.StatusOK, "", "Date: x\nslack 5\n", 10}})
	d := write(t, filepath.Join(base, "d"), []cmd{{"header", protocol.StatusOK, "", "Date: y\nslack 6\n", 10}})
	r = diff.CompareWith(c, d, ign)
	if r.Agree || !strings.Contains(r.Differences[0].OutputDiff, "+slack 6") || strings.Contains(r.Differences[0].OutputDiff, "Date") {
		t.Errorf("%+v", r.Differences)
	}
	var one bytes.Buffer
	diff.WriteText(&one, diff.Compare(c, c))
	if !strings.Contains(one.String(), "the runs agree: 1 command matched,") {
		t.Errorf("%s", one.String())
	}
}

package diff_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
	"github.com/skillpilot/skillpilot/review"
	"github.com/skillpilot/skillpilot/review/diff"
)

type traced struct {
	id, trace, payload, output string
	submitted                  int // seconds after the run's start
}

// writeTraced makes a finished session of commands carrying trace ids.
func writeTraced(t *testing.T, dir string, cmds []traced) *review.Session {
	t.Helper()
	for _, d := range []string{protocol.DirResult, protocol.DirArchive, protocol.DirOutput} {
		os.MkdirAll(filepath.Join(dir, d), 0o700)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, c := range cmds {
		name := protocol.CommandName(int64(i+1), c.id)
		sum := sha256.Sum256([]byte(c.output))
		sub := protocol.Time{Time: t0.Add(time.Duration(c.submitted) * time.Second)}
		start := protocol.Time{Time: sub.Add(100 * time.Millisecond)}
		res := protocol.Result{ProtocolVersion: 1, CmdID: c.id, Seq: int64(i + 1), Status: protocol.StatusOK, ExitReason: protocol.ReasonMarkerSeen,
			StartTS: start, EndTS: protocol.Time{Time: start.Add(time.Millisecond)}, TraceID: c.trace,
			Stats: protocol.Stats{Bytes: int64(len(c.output))}, OutputSHA256: hex.EncodeToString(sum[:]),
			OutputPath: "output/" + protocol.OutputName(name), CommandPath: "archive/" + name}
		rb, _ := json.Marshal(res)
		cb, _ := json.Marshal(protocol.Command{CmdID: c.id, Seq: int64(i + 1), Kind: protocol.KindTcl, Payload: c.payload, TraceID: c.trace, SubmittedAt: sub})
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

// Two pool runs of the same flow: the same payload for two steps told
// apart by trace id, run on other sessions and submitted in another
// order. They pair by trace id, not by session or order, and agree;
// a payload-only pairing would cross them.
func TestComparePoolRunsByTraceID(t *testing.T) {
	base := t.TempDir()
	runA := diff.Run{Dir: "A", Sessions: []*review.Session{
		writeTraced(t, filepath.Join(base, "A", "s00"), []traced{{"a1", "flow/place", "report", "slack 1\n", 0}}),
		writeTraced(t, filepath.Join(base, "A", "s01"), []traced{{"a2", "flow/route", "report", "slack 2\n", 1}}),
	}}
	runB := diff.Run{Dir: "B", Sessions: []*review.Session{
		writeTraced(t, filepath.Join(base, "B", "s00"), []traced{{"b1", "flow/route", "report", "slack 2\n", 0}}),
		writeTraced(t, filepath.Join(base, "B", "s01"), []traced{{"b2", "flow/place", "report", "slack 1\n", 1}}),
	}}
	r := diff.CompareRuns(runA, runB, diff.Options{})
	if !r.Agree || r.Matched != 2 {
		t.Fatalf("pool runs: %+v", r)
	}
	// Changed output of one step: the pair names the sessions and the trace.
	runB.Sessions[1] = writeTraced(t, filepath.Join(base, "B2", "s01"), []traced{{"b2", "flow/place", "report", "slack 9\n", 1}})
	r = diff.CompareRuns(runA, runB, diff.Options{})
	if r.Agree || len(r.Differences) != 1 {
		t.Fatalf("%+v", r)
	}
	p := r.Differences[0]
	if p.A.TraceID != "flow/place" || p.B.TraceID != "flow/place" || p.A.Session != "s00" || p.B.Session != "s01" {
		t.Errorf("pair %+v %+v", p.A, p.B)
	}
}

// --mask replaces matches inside a line, where --ignore would drop the
// whole line and with it what must still be compared.
func TestCompareMask(t *testing.T) {
	base := t.TempDir()
	a := writeTraced(t, filepath.Join(base, "a"), []traced{{"c1", "", "report", "at 10:00:01 slack 5\n", 0}})
	b := writeTraced(t, filepath.Join(base, "b"), []traced{{"c1", "", "report", "at 11:30:02 slack 5\n", 0}})
	c := writeTraced(t, filepath.Join(base, "c"), []traced{{"c1", "", "report", "at 11:30:02 slack 6\n", 0}})
	mask := diff.Options{Mask: []*regexp.Regexp{regexp.MustCompile(`[0-9]{2}:[0-9]{2}:[0-9]{2}`)}}
	if r := diff.CompareWith(a, b, diff.Options{}); r.Agree {
		t.Errorf("without --mask the timestamps differ: %+v", r)
	}
	if r := diff.CompareWith(a, b, mask); !r.Agree {
		t.Errorf("with --mask: %+v", r.Differences)
	}
	r := diff.CompareWith(a, c, mask)
	if r.Agree || len(r.Differences) != 1 {
		t.Fatalf("the rest of a masked line is compared: %+v", r)
	}
	if d := r.Differences[0].OutputDiff; !regexp.MustCompile(`\+at <masked> slack 6`).MatchString(d) {
		t.Errorf("diff %q", d)
	}
}

// Pool runs pair an edited step even where concurrent submits interleave
// the other steps differently: by its trace id when it has
// one, wherever it sits; else by a place that overlaps its own. Within
// one session, a deleted step and an added one elsewhere stay apart.
func TestComparePoolRunsEditedSteps(t *testing.T) {
	base := t.TempDir()
	pool := func(dir string, s0, s1 []traced) diff.Run {
		return diff.Run{Dir: dir, Sessions: []*review.Session{
			writeTraced(t, filepath.Join(base, dir, "s00"), s0), writeTraced(t, filepath.Join(base, dir, "s01"), s1)}}
	}
	// A: p, x, q, r in submit order; B: p, q, x' (edited), r.
	a := pool("A", []traced{{"a1", "", "p", "1\n", 0}, {"a3", "", "q", "3\n", 2}}, []traced{{"a2", "", "x", "2\n", 1}, {"a4", "", "r", "4\n", 3}})
	b := pool("B", []traced{{"b1", "", "p", "1\n", 0}, {"b2", "", "q", "3\n", 1}}, []traced{{"b3", "", "x edited", "2\n", 2}, {"b4", "", "r", "4\n", 3}})
	r := diff.CompareRuns(a, b, diff.Options{})
	if r.Edited != 1 || r.OnlyInA != 0 || r.OnlyInB != 0 || len(r.Differences) != 1 || r.Differences[0].PayloadB != "x edited" {
		t.Errorf("interleaved: edited %d, only in A %d, only in B %d: %+v", r.Edited, r.OnlyInA, r.OnlyInB, r.Differences)
	}
	// A traced step, moved far from its place by the interleaving.
	a = pool("A2", []traced{{"a1", "", "p", "1\n", 0}, {"a2", "flow/x", "x", "2\n", 1}}, []traced{{"a3", "", "q", "3\n", 2}, {"a4", "", "r", "4\n", 3}, {"a5", "", "s", "5\n", 4}})
	b = pool("B2", []traced{{"b1", "", "p", "1\n", 0}, {"b2", "", "q", "3\n", 1}}, []traced{{"b3", "", "r", "4\n", 2}, {"b4", "", "s", "5\n", 3}, {"b5", "flow/x", "x v2", "2\n", 4}})
	r = diff.CompareRuns(a, b, diff.Options{})
	if r.Edited != 1 || r.OnlyInA+r.OnlyInB != 0 || r.Differences[0].A.TraceID != "flow/x" || r.Differences[0].PayloadB != "x v2" {
		t.Errorf("traced: edited %d, only in A %d, only in B %d: %+v", r.Edited, r.OnlyInA, r.OnlyInB, r.Differences)
	}
	// One session: a step removed and another added two places later are
	// not one edit (the exact place rule, as before).
	one := func(dir string, cmds []traced) *review.Session {
		return writeTraced(t, filepath.Join(base, dir), cmds)
	}
	sa := one("sA", []traced{{"a1", "", "p", "1\n", 0}, {"a2", "", "x", "2\n", 1}, {"a3", "", "q", "3\n", 2}, {"a4", "", "r", "4\n", 3}})
	sb := one("sB", []traced{{"b1", "", "p", "1\n", 0}, {"b2", "", "q", "3\n", 1}, {"b3", "", "y", "9\n", 2}, {"b4", "", "r", "4\n", 3}})
	if r := diff.Compare(sa, sb); r.Edited != 0 || r.OnlyInA != 1 || r.OnlyInB != 1 {
		t.Errorf("one session: edited %d, only in A %d, only in B %d", r.Edited, r.OnlyInA, r.OnlyInB)
	}
}

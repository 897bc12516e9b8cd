package report_test

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/internal/testenv"
	"github.com/skillpilot/skillpilot/protocol"
	"github.com/skillpilot/skillpilot/review"
	"github.com/skillpilot/skillpilot/review/report"
)

var t0 = time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)

// synth makes a session of n commands in memory: each runs 10 ms after
// waiting 5 ms, back to back from t0+offset, every 10th fails, with a gap
// of 1 s after the first half.
func synth(name string, n int, offset time.Duration) *review.Session {
	s := &review.Session{Dir: "/sessions/" + name, Name: name, Events: map[string]int{}}
	at := t0.Add(offset)
	for i := 0; i < n; i++ {
		if i == n/2 {
			at = at.Add(time.Second)
		}
		st := review.StatusOK
		res := &protocol.Result{Status: protocol.StatusOK, ExitReason: protocol.ReasonMarkerSeen, Stats: protocol.Stats{Bytes: 100}}
		if i%10 == 9 {
			st, res.Status = review.StatusError, protocol.StatusError
		}
		c := &review.Command{Name: fmt.Sprintf("cmd_%d_c%d.json", i+1, i+1), CmdID: fmt.Sprintf("%s-%d", name, i+1), Seq: int64(i + 1),
			Status: st, Result: res, Submitted: at, Start: at.Add(5 * time.Millisecond), End: at.Add(15 * time.Millisecond),
			PayloadKnown: true, PayloadHead: fmt.Sprintf("step %d <b>&", i)}
		s.Commands = append(s.Commands, c)
		at = c.End
	}
	s.Start, s.End = s.Commands[0].Submitted, s.Commands[n-1].End
	s.Marks = []review.Mark{{TS: protocol.Time{Time: s.Start}, Kind: review.MarkRunnerStart, Text: "runner started"},
		{TS: protocol.Time{Time: s.Start.Add(time.Millisecond)}, Kind: review.MarkToolRestart, Text: "tool restarted"}}
	return s
}

func TestModelSummary(t *testing.T) {
	s := synth("a", 100, 0)
	s.Commands[3].End = s.Commands[3].Start.Add(500 * time.Millisecond) // the longest (overlaps the next ones)
	m := report.Build([]*review.Session{s}, report.Options{Now: t0})
	sm := m.Summary
	if sm.Commands != 100 || sm.ByStatus["ok"] != 90 || sm.ByStatus["error"] != 10 || sm.ByStatus["cancelled"] != 0 {
		t.Errorf("counts: %d %v", sm.Commands, sm.ByStatus)
	}
	if sm.Run.P50 != 10 || sm.Run.P90 != 10 || sm.Run.Max != 500 || sm.Queue.P50 != 5 || sm.QueueKnown != 100 {
		t.Errorf("percentiles: run %+v queue %+v", sm.Run, sm.Queue)
	}
	if len(sm.Longest) != 10 || sm.Longest[0].CmdID != "a-4" || sm.Longest[0].RunMS != 500 {
		t.Errorf("longest: %+v", sm.Longest[0])
	}
	// Span: 100 × 15 ms + 1 s gap; busy: the union of run intervals.
	if sm.SpanMS != 2500 || sm.BusyMS+sm.IdleMS != sm.SpanMS {
		t.Errorf("span %d busy %d idle %d", sm.SpanMS, sm.BusyMS, sm.IdleMS)
	}
	wantBusy := int64(99*10) + 500 - overlap(s) // 99 others of 10 ms and the long one, minus what coincides
	if sm.BusyMS != wantBusy {
		t.Errorf("busy %dms, want %dms", sm.BusyMS, wantBusy)
	}
	if m.Aggregated || len(m.Lanes[0].Bins) != 0 || m.Note != "" {
		t.Errorf("100 commands aggregated")
	}
	// The JSON model is complete and round-trips.
	var buf bytes.Buffer
	if err := report.WriteJSON(&buf, m); err != nil {
		t.Fatal(err)
	}
	var back report.Model
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.ProtocolVersion != 1 || len(back.Lanes[0].Commands) != 100 || back.Lanes[0].Commands[0].QueueMS == nil ||
		*back.Lanes[0].Commands[0].QueueMS != 5 || back.Summary.BusyMS != sm.BusyMS || len(back.Lanes[0].Marks) != 2 {
		t.Errorf("JSON round trip lost data: %s", buf.String()[:min(buf.Len(), 400)])
	}
}

// overlap is how much of command 4's long run lies over later commands.
func overlap(s *review.Session) int64 {
	long := s.Commands[3]
	var d time.Duration
	for _, c := range s.Commands[4:] {
		if c.Start.Before(long.End) {
			end := c.End
			if long.End.Before(end) {
				end = long.End
			}
			d += end.Sub(c.Start)
		}
	}
	return d.Milliseconds()
}

// TestModelAggregates: beyond MaxBars, lanes become bins whose counts add
// up to every command, and the page says so.
func TestModelAggregates(t *testing.T) {
	sessions := []*review.Session{synth("a", 3000, 0), synth("b", 2000, 3*time.Second)}
	m := report.Build(sessions, report.Options{MaxBars: 4000, Bins: 200, Now: t0})
	if !m.Aggregated || !strings.Contains(m.Note, "5000 commands") {
		t.Fatalf("aggregated %v, note %q", m.Aggregated, m.Note)
	}
	for i, l := range m.Lanes {
		n, errs := 0, 0
		var busy float64
		for _, b := range l.Bins {
			n += b.Count
			errs += b.ByStatus["error"]
			busy += b.BusyMS
			if b.BusyMS > m.BinMS+1e-9 {
				t.Errorf("bin busier than its width: %v > %v", b.BusyMS, m.BinMS)
			}
		}
		if n != len(sessions[i].Commands) || errs != len(sessions[i].Commands)/10 || len(l.Bins) != 200 {
			t.Errorf("lane %d: bins count %d commands (%d errors) in %d bins", i, n, errs, len(l.Bins))
		}
		if want := float64(len(sessions[i].Commands) * 10); busy < want-1 || busy > want+1 {
			t.Errorf("lane %d: bins hold %.1f ms of run time, want %.0f", i, busy, want)
		}
		if len(l.Commands) != len(sessions[i].Commands) {
			t.Errorf("the JSON model lost commands: %d", len(l.Commands))
		}
	}
	// Queue depth: with a 5 ms wait before every 10 ms run, at most one waits.
	for _, b := range m.Lanes[0].Bins {
		if b.MaxQueue > 1 {
			t.Fatalf("max queue %d", b.MaxQueue)
		}
	}
}

// TestSVGAndHTMLAreWellFormed parses the SVG (both modes) as XML and checks
// that payload text is escaped.
func TestSVGAndHTMLAreWellFormed(t *testing.T) {
	for _, max := range []int{0, 100} {
		m := report.Build([]*review.Session{synth("a", 500, 0), synth("b", 50, time.Second)}, report.Options{MaxBars: max, Now: t0})
		var svg bytes.Buffer
		if err := report.WriteSVG(&svg, m); err != nil {
			t.Fatal(err)
		}
		d := xml.NewDecoder(bytes.NewReader(svg.Bytes()))
		rects, bins := 0, 0
		for {
			tok, err := d.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("max bars %d: the SVG is not well-formed XML: %v", max, err)
			}
			if se, ok := tok.(xml.StartElement); ok {
				for _, a := range se.Attr {
					if a.Name.Local == "class" && a.Value == "b" {
						rects++
					}
					if a.Name.Local == "class" && a.Value == "bin" {
						bins++
					}
				}
			}
		}
		if m.Aggregated != (max == 100) || (!m.Aggregated && rects != 550) || (m.Aggregated && (rects != 0 || bins == 0)) {
			t.Errorf("max bars %d: aggregated %v, %d bars, %d bins", max, m.Aggregated, rects, bins)
		}
		var page bytes.Buffer
		if err := report.WriteHTML(&page, m); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(page.String(), "step 1 <b>") || !strings.Contains(page.String(), "step 1 &lt;b&gt;") {
			t.Errorf("payload text not escaped in the page")
		}
	}
}

// TestBrowserAggregated100k loads the page of 100,000 commands (two lanes,
// aggregated) in chromium: no console errors, the bins account for every
// command, and the page says it aggregated.
func TestBrowserAggregated100k(t *testing.T) {
	testenv.Slow(t, "chromium on a 100k-command report")
	m := report.Build([]*review.Session{synth("big", 70000, 0), synth("other", 30000, time.Minute)}, report.Options{Now: t0})
	var page bytes.Buffer
	start := time.Now()
	if err := report.WriteHTML(&page, m); err != nil {
		t.Fatal(err)
	}
	t.Logf("100,000 commands: page %d bytes, written in %s", page.Len(), time.Since(start))
	path := filepath.Join(artifactDir(t), "timeline-100k.html")
	if err := os.WriteFile(path, page.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	b := openPage(t, path)
	var got struct {
		Bins, Commands int
		Note           string
	}
	if err := b.Eval(`(function(){
		var n = 0, gs = document.querySelectorAll("#timeline g.bin");
		for (var i = 0; i < gs.length; i++) n += +gs[i].dataset.n;
		var note = document.getElementById("note");
		return {Bins: gs.length, Commands: n, Note: note ? note.textContent : ""};
	})()`, &got); err != nil {
		t.Fatal(err)
	}
	if got.Commands != 100000 || got.Bins == 0 || !strings.Contains(got.Note, "100000 commands") {
		t.Errorf("page: %+v", got)
	}
	png, err := b.Screenshot(1400, 3000)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(artifactDir(t), "timeline-100k.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestSVGControlBytes: payloads, errors, marks and names holding bytes XML
// 1.0 does not allow (\x01 \x1b \x0b \x0c, invalid UTF-8) still give a
// well-formed SVG, and the bytes are shown, not dropped.
func TestSVGControlBytes(t *testing.T) {
	const bad = "a\x01b\x1bc\x0bd\x0ce\xffz"
	s := synth("ctl\x01", 20, 0)
	s.Dir += "\x0b"
	for i, c := range s.Commands {
		c.PayloadHead = "puts " + bad
		if i%10 == 9 {
			c.Result.Error = &protocol.Error{Code: "tcl_error", Message: "error " + bad}
		}
		c.TraceID, c.Labels = "t\x1b", map[string]string{"k": bad}
	}
	s.Marks = append(s.Marks, review.Mark{TS: s.Marks[0].TS, Kind: review.MarkCancel, Text: "cancel " + bad})
	s2 := synth("only-invalid-utf8", 3, time.Second)
	s2.Dir += "\xfe"
	for _, max := range []int{0, 5} {
		m := report.Build([]*review.Session{s, s2}, report.Options{MaxBars: max, Now: t0})
		var svg bytes.Buffer
		if err := report.WriteSVG(&svg, m); err != nil {
			t.Fatal(err)
		}
		d := xml.NewDecoder(bytes.NewReader(svg.Bytes()))
		var text strings.Builder
		for {
			tok, err := d.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("max bars %d: the SVG is not well-formed XML: %v", max, err)
			}
			if cd, ok := tok.(xml.CharData); ok {
				text.Write(cd)
			}
		}
		if max == 0 && !strings.Contains(text.String(), `puts a\x01b\x1bc\x0bd\x0ce`) {
			t.Errorf("the payload's control bytes are not shown: %q", text.String())
		}
	}
}

// TestDeadRunnerTime: the time a runner was dead with a
// command it was running is neither the command's run nor busy: its own
// figure (dead_ms), its own grey slice in the page and the SVG, its own
// "runner dead" thread in the trace.
func TestDeadRunnerTime(t *testing.T) {
	s := &review.Session{Dir: "/sessions/d", Name: "d", Events: map[string]int{}}
	res := func(st protocol.Status, why protocol.ExitReason) *protocol.Result {
		return &protocol.Result{Status: st, ExitReason: why}
	}
	s.Commands = []*review.Command{
		{Name: "cmd_1_c1.json", CmdID: "c1", Seq: 1, Status: review.StatusRunnerRestarted,
			Result: res(protocol.StatusError, protocol.ReasonRunnerRestarted),
			Start:  t0, End: t0.Add(6 * time.Second), DeadUntil: t0.Add(65 * time.Second)},
		{Name: "cmd_2_c2.json", CmdID: "c2", Seq: 2, Status: review.StatusOK, Result: res(protocol.StatusOK, protocol.ReasonMarkerSeen),
			Start: t0.Add(66 * time.Second), End: t0.Add(68 * time.Second)},
	}
	s.Start, s.End = t0, t0.Add(70*time.Second)
	m := report.Build([]*review.Session{s}, report.Options{Now: t0})
	sm := m.Summary
	if sm.Run.Max != 6000 || sm.BusyMS != 8000 || sm.DeadMS != 59000 || sm.IdleMS != 70000-8000-59000 {
		t.Errorf("run max %d, busy %d, dead %d, idle %d; want 6000, 8000, 59000, 3000", sm.Run.Max, sm.BusyMS, sm.DeadMS, sm.IdleMS)
	}
	b := m.Lanes[0].Commands[0]
	if b.RunMS != 6000 || b.DeadMS != 59000 || b.DeadUntil == nil || !b.DeadUntil.Equal(t0.Add(65*time.Second)) {
		t.Errorf("bar %+v", b)
	}
	var tr bytes.Buffer
	if err := report.WriteTrace(&tr, m); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TraceEvents []struct {
			Name, Cat, Ph string
			TS, Dur       float64
			TID           int
		}
	}
	if err := json.Unmarshal(tr.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	var run, dead int
	for _, e := range doc.TraceEvents {
		switch {
		case e.Ph == "X" && e.Name == "c1":
			run++
			if e.Dur != 6e6 {
				t.Errorf("c1's slice lasts %gµs, want 6e6", e.Dur)
			}
		case e.Ph == "X" && e.Cat == "dead":
			dead++
			if e.Name != "runner dead" || e.TS != 6e6 || e.Dur != 59e6 {
				t.Errorf("dead slice %+v", e)
			}
		}
	}
	if run != 1 || dead != 1 {
		t.Errorf("%d c1 slices, %d dead slices; want 1 each", run, dead)
	}
	var page bytes.Buffer
	if err := report.WriteHTML(&page, m); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page.String(), `class="dead"`) || !strings.Contains(page.String(), "runner dead for 59.0s") {
		t.Errorf("the page draws no dead slice")
	}
}

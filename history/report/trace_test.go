package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
)

// CheckTrace is the checker the trace tests share: it parses a Trace
// Event JSON document and fails when two complete events (ph X) of one
// thread (pid, tid) overlap without one ending at or before the other
// starts (viewers mis-draw or drop those), when a pid has no
// process_name, or when two processes share a name. It returns the
// number of X events by pid.
func CheckTrace(t *testing.T, data []byte) map[int]int {
	t.Helper()
	var doc struct {
		TraceEvents []struct {
			Name string         `json:"name"`
			Ph   string         `json:"ph"`
			TS   float64        `json:"ts"`
			Dur  float64        `json:"dur"`
			PID  int            `json:"pid"`
			TID  int            `json:"tid"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("trace is not JSON: %v", err)
	}
	type span struct{ start, end float64 }
	byThread := map[[2]int][]span{}
	names := map[int]string{}
	count := map[int]int{}
	for _, e := range doc.TraceEvents {
		switch e.Ph {
		case "X":
			byThread[[2]int{e.PID, e.TID}] = append(byThread[[2]int{e.PID, e.TID}], span{e.TS, e.TS + e.Dur})
			count[e.PID]++
		case "M":
			if e.Name == "process_name" {
				names[e.PID] = fmt.Sprint(e.Args["name"])
			}
		}
	}
	seen := map[string]int{}
	for pid, n := range names {
		if other, dup := seen[n]; dup {
			t.Errorf("processes %d and %d are both %q", other, pid, n)
		}
		seen[n] = pid
	}
	for th, spans := range byThread {
		if _, ok := names[th[0]]; !ok {
			t.Errorf("pid %d has no process_name", th[0])
		}
		sort.Slice(spans, func(i, j int) bool { return spans[i].start < spans[j].start })
		for i := 1; i < len(spans); i++ {
			if spans[i].start < spans[i-1].end {
				t.Errorf("pid %d tid %d: slice [%v, %v) overlaps [%v, %v)", th[0], th[1], spans[i].start, spans[i].end, spans[i-1].start, spans[i-1].end)
			}
		}
	}
	return count
}

// 35 commands queued at once on one session (as issue 31.6 saw: 30 of 35
// queue waits overlapped on one track), and a second session: one
// process per session, no overlapping slices on any thread, every command
// drawn, the queue waits on up to 16 threads and a "queued" counter.
func TestTraceNoOverlap(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	m := &Model{ProtocolVersion: 1, Start: protocol.Time{Time: t0}}
	for li, name := range []string{"s00", "s01"} {
		l := &Lane{Name: name}
		for i := 0; i < 35; i++ {
			sub := protocol.Time{Time: t0}
			start := t0.Add(time.Duration(i) * time.Second)
			q := int64(i * 1000)
			l.Commands = append(l.Commands, Bar{CmdID: fmt.Sprintf("c%d_%d", li, i), Seq: int64(i + 1), Status: "ok",
				Submitted: &sub, QueueMS: &q, Start: protocol.Time{Time: start}, End: protocol.Time{Time: start.Add(time.Second)}, TraceID: "flow42"})
		}
		m.Lanes = append(m.Lanes, l)
	}
	var buf bytes.Buffer
	if err := WriteTrace(&buf, m); err != nil {
		t.Fatal(err)
	}
	count := CheckTrace(t, buf.Bytes())
	// 35 commands + the queue waits that fit on 16 threads (the first,
	// of zero length, and 16 more; the rest are in the counter).
	if count[1] != 35+17 || count[2] != 35+17 {
		t.Errorf("slices by process %v", count)
	}
	if !bytes.Contains(buf.Bytes(), []byte(`"name":"queued","ph":"C"`)) || !bytes.Contains(buf.Bytes(), []byte(`"queue wait 16"`)) {
		t.Errorf("no queued counter or 16th queue thread")
	}
}

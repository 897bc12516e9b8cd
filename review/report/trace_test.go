package report

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/internal/tracecheck"
	"github.com/skillpilot/skillpilot/protocol"
)

// CheckTrace fails t with every problem tracecheck.Check finds and
// returns the number of complete events by pid.
func CheckTrace(t *testing.T, data []byte) map[int]int {
	t.Helper()
	res, err := tracecheck.Check(data)
	if err != nil {
		t.Error(err)
	}
	return res.Slices
}

// 35 commands queued at once on one session (30 of 35 queue waits
// once overlapped on one track), and a second session: one
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

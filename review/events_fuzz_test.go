package review

import (
	"bytes"
	"testing"
	"time"
)

func newEventLog() *eventLog {
	return &eventLog{counts: map[string]int{}, begins: map[string]time.Time{}}
}

// FuzzParseEvents feeds arbitrary bytes as log/meta.log: the reader never
// panics, keeps at most one mark per line, and an unterminated last line
// never causes a warning (it may be a torn or in-progress append).
func FuzzParseEvents(f *testing.F) {
	f.Add([]byte(`{"ts":"2026-01-01T00:00:00.000Z","event":"runner_start","detail":{"session_id":"s"}}` + "\n" +
		`{"ts":"2026-01-01T00:00:01.000Z","event":"tool_start"}` + "\n" + `{"ts":"2026-01-01T00:00:02.000Z","event":"tool_start"}` + "\n"))
	f.Add([]byte("not json\n{\"event\":\"cancel_request\",\"cmd_id\":\"x\",\"detail\":{\"outcome\":1}}\n{\"ts\":\"2026"))
	f.Add([]byte("\n\n\r\n{}\n[]\nnull\n"))
	f.Add([]byte(`{"ts":1e300,"event":"cmd_begin","cmd_id":"a"}` + "\n" + `{"ts":"-1","event":"lease","detail":{"action":"expired"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var w warnings
		ev := newEventLog()
		parseEvents(ev, bytes.NewReader(data), &w)
		if lines := bytes.Count(data, []byte("\n")) + 1; len(ev.marks) > lines {
			t.Errorf("%d marks from %d lines", len(ev.marks), lines)
		}
		terminated := data
		if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
			terminated = data[:i+1]
		} else {
			terminated = nil
		}
		var only warnings
		parseEvents(newEventLog(), bytes.NewReader(terminated), &only)
		if len(only.list) != len(w.list) {
			t.Errorf("the unterminated last line caused a warning: %v vs %v", w.list, only.list)
		}
	})
}

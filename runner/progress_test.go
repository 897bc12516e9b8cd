package runner

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/skillpilot/skillpilot/protocol"
)

// While a command runs, meta.log records its output progress
// as spool ranges: cmd_output events whose ranges are contiguous from its
// cmd_begin's spool_start and end within its cmd_end's range, carrying
// offsets and counts, never the bytes; at most one per heartbeat and per
// progressGap of the runner's clock. A reader following meta.log finds
// each line the command printed in log/session.out at the range reported.
func TestOutputProgressEvents(t *testing.T) {
	t.Parallel()
	h := newHarness(t).start() // Heartbeat 100 ms.
	name := h.submit(`for {set i 0} {$i < 20} {incr i} {puts "progress-line-$i"; flush stdout; after 100}`)
	res := h.result(name)
	h.stop(protocol.StopGraceful)
	spool := readSpool(h)
	var begin, end protocol.Event
	var outs []protocol.Event
	for _, e := range h.events() {
		if e.CmdID != res.CmdID {
			continue
		}
		switch e.Event {
		case protocol.EvCmdBegin:
			begin = e
		case protocol.EvCmdEnd:
			end = e
		case protocol.EvCmdOutput:
			if begin.SpoolStart == nil || end.SpoolEnd != nil {
				t.Errorf("cmd_output outside cmd_begin..cmd_end: %+v", e)
			}
			outs = append(outs, e)
		}
	}
	if len(outs) < 2 {
		t.Fatalf("%d cmd_output events for a command printing for 2 s", len(outs))
	}
	if max := res.Stats.DurationMS/progressGap.Milliseconds() + 1; int64(len(outs)) > max {
		t.Errorf("%d cmd_output events in %d ms: more than one per %v", len(outs), res.Stats.DurationMS, progressGap)
	}
	at := *begin.SpoolStart
	var lastOut float64
	seen := 0
	for _, e := range outs {
		if *e.SpoolStart != at || *e.SpoolEnd <= at || *e.SpoolEnd > *end.SpoolEnd {
			t.Fatalf("range [%d,%d) after %d (command [%d,%d))", *e.SpoolStart, *e.SpoolEnd, at, *begin.SpoolStart, *end.SpoolEnd)
		}
		if e.Detail["spool_bytes"] != float64(*e.SpoolEnd-*e.SpoolStart) {
			t.Errorf("spool_bytes %v for [%d,%d)", e.Detail["spool_bytes"], *e.SpoolStart, *e.SpoolEnd)
		}
		ob, _ := e.Detail["output_bytes"].(float64)
		if ob < lastOut || ob > float64(res.Stats.Bytes) {
			t.Errorf("output_bytes %v after %v (final %d)", ob, lastOut, res.Stats.Bytes)
		}
		lastOut = ob
		chunk := spool[*e.SpoolStart:*e.SpoolEnd]
		for ; seen < 20 && bytes.Contains(chunk, fmt.Appendf(nil, "progress-line-%d\n", seen)); seen++ {
		}
		at = *e.SpoolEnd
		for k := range e.Detail {
			if k != "spool_bytes" && k != "output_bytes" {
				t.Errorf("cmd_output detail carries %q", k)
			}
		}
	}
	if seen == 0 {
		t.Errorf("no printed line found in the reported ranges")
	}
}

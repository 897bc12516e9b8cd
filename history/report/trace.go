package report

import (
	"bufio"
	"encoding/json"
	"io"
	"time"
)

// traceEvent is one entry of the Trace Event Format, the JSON that
// chrome://tracing and Perfetto (ui.perfetto.dev) open.
type traceEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`            // X: a complete span, i: an instant, M: metadata
	TS   *float64       `json:"ts,omitempty"`  // microseconds since the model's Start
	Dur  *float64       `json:"dur,omitempty"` // microseconds
	PID  int            `json:"pid"`
	TID  int            `json:"tid"`
	S    string         `json:"s,omitempty"` // scope of an instant: t (thread)
	Args map[string]any `json:"args,omitempty"`
}

// Threads of a lane in the trace: the commands as they ran, the time each
// waited in queue/ (overlapping spans, so on a thread of its own), and the
// session's marks (tool restarts, cancels, warnings).
const (
	traceRun   = 1
	traceQueue = 2
	traceMarks = 3
)

// WriteTrace writes the model in the Trace Event Format (`master report
// --format trace`): one process per lane (session), one complete event per
// command with its cmd_id, seq, status, exit_reason, trace_id and labels as
// arguments, its queue wait on a second thread, and the session's marks as
// instants. Times are microseconds since the model's Start, which
// otherData.start gives as RFC 3339.
func WriteTrace(w io.Writer, m *Model) error {
	origin := m.Start.Time
	us := func(t time.Time) *float64 {
		v := float64(t.Sub(origin).Nanoseconds()) / 1e3
		return &v
	}
	dur := func(d time.Duration) *float64 {
		v := float64(max(d, 0).Nanoseconds()) / 1e3
		return &v
	}
	evs := make([]traceEvent, 0, 16)
	for li, l := range m.Lanes {
		pid := li + 1
		evs = append(evs,
			traceEvent{Name: "process_name", Ph: "M", PID: pid, Args: map[string]any{"name": l.Name}},
			traceEvent{Name: "thread_name", Ph: "M", PID: pid, TID: traceRun, Args: map[string]any{"name": "commands"}},
			traceEvent{Name: "thread_name", Ph: "M", PID: pid, TID: traceQueue, Args: map[string]any{"name": "queue wait"}},
			traceEvent{Name: "thread_name", Ph: "M", PID: pid, TID: traceMarks, Args: map[string]any{"name": "events"}})
		for _, b := range l.Commands {
			args := map[string]any{"cmd_id": b.CmdID, "seq": b.Seq, "status": b.Status,
				"start": b.Start.UTC().Format(time.RFC3339Nano), "output_bytes": b.Bytes, "payload": b.Payload}
			if b.ExitReason != "" {
				args["exit_reason"] = b.ExitReason
			}
			if b.Error != "" {
				args["error"] = b.Error
			}
			if b.TraceID != "" {
				args["trace_id"] = b.TraceID
			}
			if len(b.Labels) > 0 {
				args["labels"] = b.Labels
			}
			name := b.CmdID
			if b.TraceID != "" {
				name = b.TraceID + " " + b.CmdID
			}
			evs = append(evs, traceEvent{Name: name, Cat: b.Status, Ph: "X", TS: us(b.Start.Time),
				Dur: dur(b.End.Sub(b.Start.Time)), PID: pid, TID: traceRun, Args: args})
			if b.Submitted != nil && b.QueueMS != nil {
				qargs := map[string]any{"cmd_id": b.CmdID}
				if b.TraceID != "" {
					qargs["trace_id"] = b.TraceID
				}
				evs = append(evs, traceEvent{Name: b.CmdID, Cat: "queue", Ph: "X", TS: us(b.Submitted.Time),
					Dur: dur(b.Start.Sub(b.Submitted.Time)), PID: pid, TID: traceQueue, Args: qargs})
			}
		}
		for _, mk := range l.Marks {
			args := map[string]any{"text": mk.Text}
			if mk.CmdID != "" {
				args["cmd_id"] = mk.CmdID
			}
			evs = append(evs, traceEvent{Name: mk.Kind, Cat: "event", Ph: "i", S: "t", TS: us(mk.TS.Time),
				PID: pid, TID: traceMarks, Args: args})
		}
	}
	doc := struct {
		TraceEvents     []traceEvent   `json:"traceEvents"`
		DisplayTimeUnit string         `json:"displayTimeUnit"`
		OtherData       map[string]any `json:"otherData"`
	}{evs, "ms", map[string]any{"protocol_version": m.ProtocolVersion,
		"start": m.Start.UTC().Format(time.RFC3339Nano), "generated_at": m.GeneratedAt.UTC().Format(time.RFC3339Nano)}}
	bw := bufio.NewWriterSize(w, 256<<10)
	enc := json.NewEncoder(bw)
	if err := enc.Encode(doc); err != nil {
		return err
	}
	return bw.Flush()
}

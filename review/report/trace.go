package report

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sort"
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
// waited in queue/, and the session's marks (tool restarts, cancels,
// warnings). Trace viewers draw complete events of one thread as a stack
// and mis-draw or drop ones that overlap without nesting, so no two slices
// of one thread overlap: queue waits (which overlap whenever commands are
// queued together) are spread over up to maxQueueThreads threads, "queue
// wait", "queue wait 2", ... (tids traceQueue, then traceQueueMore+1, ...),
// each slice on the first whose previous slice has ended; waits beyond
// that are left out (the "queued" counter and the command's queue_ms
// argument still show them). Commands that overlap (clocks of two
// runners, say) go to extra threads "commands 2", ... the same way.
const (
	traceRun        = 1
	traceQueue      = 2
	traceMarks      = 3
	traceDead       = 4   // "runner dead": a runner dead with a command it was running (Bar.DeadUntil)
	traceRunMore    = 100 // + k: "commands k+1"
	traceQueueMore  = 200 // + k: "queue wait k+1"
	maxQueueThreads = 16
	maxRunThreads   = 16
)

// threads assigns slices to threads of one kind so that none overlap on a
// thread: each slice goes to the first thread whose last slice ended at or
// before its start (slices in start order), a new one while fewer than
// max exist; -1 when all max are busy.
type threads struct {
	ends []time.Time
	max  int
}

func (th *threads) place(start, end time.Time) int {
	for i, e := range th.ends {
		if !start.Before(e) {
			th.ends[i] = end
			return i
		}
	}
	if len(th.ends) < th.max {
		th.ends = append(th.ends, end)
		return len(th.ends) - 1
	}
	return -1
}

// WriteTrace writes the model in the Trace Event Format (`master report
// --format trace`): one process per lane (session), one complete event per
// command with its cmd_id, seq, status, exit_reason, trace_id, labels and
// queue_ms as arguments, its queue wait on a queue thread (see threads
// above: no two slices of a thread overlap), a "queued" counter, and the
// session's marks as instants. Times are microseconds since the model's
// Start, which otherData.start gives as RFC 3339.
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
			traceEvent{Name: "thread_name", Ph: "M", PID: pid, TID: traceMarks, Args: map[string]any{"name": "events"}},
			traceEvent{Name: "thread_name", Ph: "M", PID: pid, TID: traceDead, Args: map[string]any{"name": "runner dead"}})
		bars := append([]Bar(nil), l.Commands...)
		sort.SliceStable(bars, func(i, j int) bool { return bars[i].Start.Before(bars[j].Start.Time) })
		run := threads{max: maxRunThreads}
		for _, b := range bars {
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
			if b.QueueMS != nil {
				args["queue_ms"] = *b.QueueMS
			}
			name := b.CmdID
			if b.TraceID != "" {
				name = b.TraceID + " " + b.CmdID
			}
			end := b.End.Time
			if end.Before(b.Start.Time) {
				end = b.Start.Time
			}
			k := run.place(b.Start.Time, end)
			if k < 0 {
				continue // More than maxRunThreads commands at once: not a session's own timeline.
			}
			tid := traceRun
			if k > 0 {
				tid = traceRunMore + k
				if k == len(run.ends)-1 && !threadNamed(evs, pid, tid) {
					evs = append(evs, traceEvent{Name: "thread_name", Ph: "M", PID: pid, TID: tid, Args: map[string]any{"name": fmt.Sprintf("commands %d", k+1)}})
				}
			}
			evs = append(evs, traceEvent{Name: name, Cat: b.Status, Ph: "X", TS: us(b.Start.Time),
				Dur: dur(end.Sub(b.Start.Time)), PID: pid, TID: tid, Args: args})
			if b.DeadUntil != nil && b.DeadUntil.After(end) {
				// Its own kind of slice, on its own thread: the runner
				// was dead, the command no longer ran (one death at a
				// time, so none overlap).
				evs = append(evs, traceEvent{Name: "runner dead", Cat: "dead", Ph: "X", TS: us(end),
					Dur: dur(b.DeadUntil.Sub(end)), PID: pid, TID: traceDead,
					Args: map[string]any{"cmd_id": b.CmdID, "seq": b.Seq, "dead_ms": b.DeadMS}})
			}
		}
		evs = append(evs, queueEvents(pid, bars, us, dur)...)
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

func threadNamed(evs []traceEvent, pid, tid int) bool {
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Ph == "M" && evs[i].PID == pid && evs[i].TID == tid {
			return true
		}
	}
	return false
}

// queueEvents are the queue waits of one lane's commands (bars in start
// order) on queue threads that never hold two overlapping slices, and a
// "queued" counter (ph C) of the commands waiting, changing at each submit
// and start.
func queueEvents(pid int, bars []Bar, us func(time.Time) *float64, dur func(time.Duration) *float64) []traceEvent {
	var waits []Bar
	for _, b := range bars {
		if b.Submitted != nil && b.QueueMS != nil {
			waits = append(waits, b)
		}
	}
	sort.SliceStable(waits, func(i, j int) bool { return waits[i].Submitted.Before(waits[j].Submitted.Time) })
	var evs []traceEvent
	q := threads{max: maxQueueThreads}
	type change struct {
		at    time.Time
		delta int
	}
	var changes []change
	for _, b := range waits {
		end := b.Start.Time
		if end.Before(b.Submitted.Time) {
			end = b.Submitted.Time
		}
		changes = append(changes, change{b.Submitted.Time, +1}, change{end, -1})
		k := q.place(b.Submitted.Time, end)
		if k < 0 {
			continue
		}
		tid := traceQueue
		if k > 0 {
			tid = traceQueueMore + k
			if k == len(q.ends)-1 && !threadNamed(evs, pid, tid) {
				evs = append(evs, traceEvent{Name: "thread_name", Ph: "M", PID: pid, TID: tid, Args: map[string]any{"name": fmt.Sprintf("queue wait %d", k+1)}})
			}
		}
		qargs := map[string]any{"cmd_id": b.CmdID}
		if b.TraceID != "" {
			qargs["trace_id"] = b.TraceID
		}
		evs = append(evs, traceEvent{Name: b.CmdID, Cat: "queue", Ph: "X", TS: us(b.Submitted.Time),
			Dur: dur(end.Sub(b.Submitted.Time)), PID: pid, TID: tid, Args: qargs})
	}
	sort.SliceStable(changes, func(i, j int) bool {
		if !changes[i].at.Equal(changes[j].at) {
			return changes[i].at.Before(changes[j].at)
		}
		return changes[i].delta < changes[j].delta // A start before a submit at the same instant.
	})
	depth := 0
	for i, c := range changes {
		depth += c.delta
		if i+1 < len(changes) && changes[i+1].at.Equal(c.at) {
			continue // One sample per instant.
		}
		evs = append(evs, traceEvent{Name: "queued", Ph: "C", TS: us(c.at), PID: pid, Args: map[string]any{"commands": depth}})
	}
	return evs
}

package review

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/protocol"
)

// Mark kinds: the events of log/meta.log that a timeline marks on its time
// axis.
const (
	MarkRunnerStart   = "runner_start"   // the first runner_start in the log
	MarkRunnerRestart = "runner_restart" // every later runner_start: a new runner on the session
	MarkRunnerStop    = "runner_stop"
	MarkToolRestart   = "tool_restart" // a tool start after the first one of the same runner
	MarkToolExit      = "tool_exit"
	MarkCancel        = "cancel" // cancel_request (whatever its outcome)
	MarkStop          = "stop"   // stop_request
	MarkLeaseExpired  = "lease_expired"
	MarkRecovered     = "recovered"     // a result written at start for an interrupted command
	MarkLockTakeover  = "lock_takeover" // a runner took over from a dead one
)

// Mark is one event placed on the time axis.
type Mark struct {
	TS    protocol.Time `json:"ts"`
	Kind  string        `json:"kind"`
	CmdID string        `json:"cmd_id,omitempty"`
	Text  string        `json:"text"` // a human sentence built from the event's fields
}

// eventLog is what Load keeps of log/meta.log.
type eventLog struct {
	marks      []Mark
	counts     map[string]int       // events by name
	sessionIDs []string             // of runner_start events, in order
	begins     map[string]time.Time // cmd_begin ts by cmd_id (for commands without a result)
	// settled is the ts of each recovered event by cmd_id: when the next
	// runner settled a command its runner died running; lastSign is the
	// ts of the last event before that recovery (the dead run's last).
	settled, lastSign map[string]time.Time
	runLast           time.Time // the last event that is not a recovery's
	first             time.Time
	last              time.Time
}

// readEvents reads log/meta.log line by line. Lines longer than
// maxEventLine or not valid JSON are counted in warnings and skipped; an
// unterminated last line that is not valid JSON is a torn or in-progress
// append and is ignored silently. Reading stops after maxMetaBytes.
func readEvents(path string, w *warnings) *eventLog {
	return readEventsInto(&eventLog{counts: map[string]int{}, begins: map[string]time.Time{}, settled: map[string]time.Time{}, lastSign: map[string]time.Time{}}, path, w)
}

// readEventsInto is readEvents adding to ev: a rotated event log is read
// as log/meta.log.1, then log/meta.log (PROTOCOL.md section 23).
func readEventsInto(ev *eventLog, path string, w *warnings) *eventLog {
	if path == "" {
		return ev
	}
	f, err := fsq.CreateFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, os.ErrNotExist) {
		return ev
	}
	if err != nil {
		w.add("log/meta.log: %v", err)
		return ev
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		w.add("log/meta.log: not a regular file; events ignored")
		return ev
	}
	parseEvents(ev, io.LimitReader(f, maxMetaBytes), w)
	return ev
}

// parseEvents reads JSON Lines events from r into ev.
func parseEvents(ev *eventLog, r io.Reader, w *warnings) {
	br := bufio.NewReaderSize(r, 64<<10)
	var toolStarts, bad, long int
	var line []byte
	for n := 1; ; n++ {
		chunk, err := br.ReadSlice('\n')
		tooLong := false
		line = append(line[:0], chunk...)
		for errors.Is(err, bufio.ErrBufferFull) {
			chunk, err = br.ReadSlice('\n')
			if len(line) <= maxEventLine {
				line = append(line, chunk...)
			} else {
				tooLong = true
			}
		}
		terminated := len(line) > 0 && line[len(line)-1] == '\n'
		if len(bytes.TrimSpace(line)) > 0 {
			switch {
			case tooLong:
				long++
			default:
				var e protocol.Event
				if jerr := json.Unmarshal(line, &e); jerr != nil {
					if terminated {
						bad++
					} // else: a torn or in-progress last line.
				} else {
					ev.add(e, &toolStarts)
				}
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				w.add("log/meta.log: %v", err)
			}
			break
		}
	}
	if bad > 0 {
		w.add("log/meta.log: %d lines are not valid JSON events; skipped", bad)
	}
	if long > 0 {
		w.add("log/meta.log: %d lines longer than %d bytes; skipped", long, maxEventLine)
	}
	sort.SliceStable(ev.marks, func(i, j int) bool { return ev.marks[i].TS.Before(ev.marks[j].TS.Time) })
}

// add records one event. toolStarts counts tool starts since the last
// runner start: every start after the first is a tool restart.
func (ev *eventLog) add(e protocol.Event, toolStarts *int) {
	ev.counts[e.Event]++
	ts := e.TS.Time
	if !ts.IsZero() {
		if ev.first.IsZero() || ts.Before(ev.first) {
			ev.first = ts
		}
		if ts.After(ev.last) {
			ev.last = ts
		}
	}
	if !ts.IsZero() && !recoveryEvent(e) && ts.After(ev.runLast) {
		ev.runLast = ts
	}
	mark := func(kind, text string) {
		ev.marks = append(ev.marks, Mark{TS: protocol.Time{Time: ts.UTC()}, Kind: kind, CmdID: e.CmdID, Text: text})
	}
	switch e.Event {
	case protocol.EvRunnerStart:
		*toolStarts = 0
		id, _ := e.Detail["session_id"].(string)
		host, _ := e.Detail["hostname"].(string)
		kind := MarkRunnerStart
		if len(ev.sessionIDs) > 0 {
			kind = MarkRunnerRestart
		}
		ev.sessionIDs = append(ev.sessionIDs, id)
		mark(kind, strings.TrimSpace(fmt.Sprintf("runner started %s on %s", id, host)))
	case protocol.EvRunnerStop:
		mark(MarkRunnerStop, "runner stopped"+details(e, "reason"))
	case protocol.EvToolStart:
		*toolStarts++
		if *toolStarts > 1 {
			mark(MarkToolRestart, fmt.Sprintf("tool restarted (start %d of this runner)", *toolStarts)+details(e, "tool_pid"))
		}
	case protocol.EvToolExit:
		mark(MarkToolExit, "tool exited"+details(e, "exit_code", "signal", "lived_ms"))
	case protocol.EvCancel:
		mark(MarkCancel, "cancel request"+details(e, "outcome", "action", "scope", "why", "message"))
	case protocol.EvStop:
		mark(MarkStop, "stop request"+details(e, "mode", "outcome", "why", "message"))
	case protocol.EvLease:
		if a, _ := e.Detail["action"].(string); a == "expired" {
			mark(MarkLeaseExpired, "lease expired"+details(e, "why"))
		}
	case protocol.EvRecovered:
		mark(MarkRecovered, "interrupted command settled at runner start")
		if e.CmdID != "" && !ts.IsZero() {
			ev.settled[e.CmdID], ev.lastSign[e.CmdID] = ts, ev.runLast
		}
	case protocol.EvLockTakeover:
		mark(MarkLockTakeover, "runner took over a dead runner's lock")
	case protocol.EvCmdBegin:
		if e.CmdID != "" && !ts.IsZero() {
			ev.begins[e.CmdID] = ts
		}
	}
}

// recoveryEvent reports whether e is one a runner writes at its start to
// settle what a dead runner left (PROTOCOL.md section 13): these come
// before its runner_start and say nothing of when the dead run ended.
func recoveryEvent(e protocol.Event) bool {
	switch e.Event {
	case protocol.EvRecovered, protocol.EvRecoverySummary, protocol.EvLockTakeover, protocol.EvStaleToolKilled:
		return true
	case protocol.EvCmdEnd:
		return e.Detail["recovered"] == true
	case protocol.EvWarning:
		_, rebuilt := e.Detail["from"]
		_, repaired := e.Detail["repaired_meta_log_bytes"]
		return rebuilt || repaired
	}
	return false
}

// details renders the named detail fields that are present, as
// " (k: v, k: v)".
func details(e protocol.Event, keys ...string) string {
	var parts []string
	for _, k := range keys {
		v, ok := e.Detail[k]
		if !ok || v == nil || v == "" {
			continue
		}
		s := fmt.Sprint(v)
		if c := clip(s, 200); c != s {
			s = c + "…"
		}
		parts = append(parts, k+": "+s)
	}
	if e.CmdID != "" {
		parts = append(parts, "cmd_id: "+e.CmdID)
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

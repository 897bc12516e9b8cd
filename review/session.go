package review

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/protocol"
)

// Display statuses: a result's status, except that an error whose
// exit_reason is runner_restarted is its own kind (the runner died while the
// command ran), and a command without a result yet is running.
const (
	StatusOK              = "ok"
	StatusError           = "error"
	StatusTimeout         = "timeout"
	StatusCancelled       = "cancelled"
	StatusRunnerRestarted = "runner_restarted"
	StatusRunning         = "running"
)

// Statuses lists the display statuses in the order reports show them.
var Statuses = []string{StatusOK, StatusError, StatusTimeout, StatusCancelled, StatusRunnerRestarted, StatusRunning}

// PayloadHeadLen is how much of each payload Command.PayloadHead keeps.
const PayloadHeadLen = 160

// Command is one command of a session: a result and the command file it
// ran, or the command still running.
type Command struct {
	Name   string           // cmd_<seq>_<cmd_id>.json
	CmdID  string           // from the result (or the name)
	Seq    int64            //
	Status string           // display status (see Statuses)
	Result *protocol.Result // nil while running

	// Submitted is when the command was queued: its submitted_at (the
	// master's clock), else the command file's mtime when it is not later
	// than Start (a copied session has new mtimes). Zero when unknown.
	Submitted time.Time
	Start     time.Time
	End       time.Time // for a running command: when the session was read
	// DeadUntil is set for a command its runner died running
	// (runner_restarted): End is the dead runner's last sign of life, and
	// [End, DeadUntil) the time until the next runner settled it, during
	// which nothing ran. Zero otherwise.
	DeadUntil time.Time

	// The command file as run (archive/, log/rejected/ or inflight/).
	// PayloadKnown is false when it is gone or unreadable.
	CommandPath  string
	PayloadKnown bool
	Kind         protocol.Kind
	PayloadHead  string // the payload's first PayloadHeadLen bytes (UTF-8 safe)
	Payload      string // the whole payload, only with Options.Payloads
	PayloadSHA   string // sha256 of the payload (from the result, or computed)
	TimeoutS     float64
	// TraceID and Labels are the command's correlation fields (from the
	// result, else the command file).
	TraceID string
	Labels  map[string]string
}

// Duration is how long the command ran (End − Start), never negative.
func (c *Command) Duration() time.Duration { return max(c.End.Sub(c.Start), 0) }

// QueueWait is Start − Submitted, or -1 when Submitted is unknown. Clock
// differences between the master and the runner host can make it
// approximate; it is never negative.
func (c *Command) QueueWait() time.Duration {
	if c.Submitted.IsZero() {
		return -1
	}
	return max(c.Start.Sub(c.Submitted), 0)
}

// OutputBytes is the size of the command's output (from its result; for a
// running command, the size of its output file so far).
func (c *Command) OutputBytes() int64 {
	if c.Result != nil {
		return c.Result.Stats.Bytes
	}
	return 0
}

// Session is what Load read of one session directory.
type Session struct {
	Dir        string
	Name       string
	State      *protocol.State // nil when state/state.json is missing or unreadable
	Kind       protocol.Kind
	SessionIDs []string   // runner sessions, from runner_start events
	Commands   []*Command // finished and running, ordered by Start, then seq
	Queued     int        // command files still in queue/
	Marks      []Mark     // events on the time axis, by time
	Events     map[string]int
	Start, End time.Time // the span the session's records cover
	Live       bool      // state.json says a runner may still be running (phase not stopped)
	ReadAt     time.Time
	Warnings   []string

	dirs map[string]error // checked directories (see path); not safe for concurrent use
}

// Options tune Load.
type Options struct {
	// Payloads keeps each command's whole payload in Command.Payload
	// (the stand-in and diff need it; a report needs only the head).
	Payloads bool
	// Now is when the session is read (default time.Now()): the end of a
	// running command's bar.
	Now time.Time
}

// Load reads the session directory dir. It fails only when dir is not a
// session directory; everything it could not read is in Warnings.
func Load(dir string, opt Options) (*Session, error) {
	if opt.Now.IsZero() {
		opt.Now = time.Now()
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	if !fi.IsDir() || !IsSession(dir) {
		return nil, fmt.Errorf("%s: %w", dir, ErrNotSession)
	}
	s := &Session{Dir: dir, Name: filepath.Base(filepath.Clean(dir)), ReadAt: opt.Now}
	var w warnings
	s.readState(&w)
	// inflight/ first, results second: a command that finishes in between
	// is then seen with its result, not lost.
	inflight, err := listDir(filepath.Join(dir, protocol.DirInflight))
	if err != nil {
		w.add("inflight/: %v", err)
	}
	var ev *eventLog
	if p, err := s.path(protocol.FileMeta); err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			w.add("log/meta.log: %v", err)
		}
		ev = readEvents("", &w)
	} else {
		ev = readEvents("", &w)
		if old, err := s.path(protocol.FileMetaOld); err == nil {
			readEventsInto(ev, old, &w) // Rotated by retention: the older generation first.
		}
		readEventsInto(ev, p, &w)
	}
	s.readResults(ev, &w, opt)
	s.readRunning(inflight, ev, &w, opt)
	if q, err := listDir(filepath.Join(dir, protocol.DirQueue)); err == nil {
		for _, n := range q {
			if _, _, err := protocol.ParseCommandName(n); err == nil {
				s.Queued++
			}
		}
	}
	s.Marks, s.Events, s.SessionIDs = ev.marks, ev.counts, ev.sessionIDs
	sort.SliceStable(s.Commands, func(i, j int) bool {
		a, b := s.Commands[i], s.Commands[j]
		if !a.Start.Equal(b.Start) {
			return a.Start.Before(b.Start)
		}
		return a.Seq < b.Seq
	})
	s.span(ev)
	s.Warnings = w.result()
	return s, nil
}

func (s *Session) readState(w *warnings) {
	p, err := s.path(protocol.FileState)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			w.add("state/state.json: %v", err)
		}
		return
	}
	data, _, err := readFile(p, maxStateSize)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	if err != nil {
		w.add("state/state.json: %v", err)
		return
	}
	var st protocol.State
	if err := json.Unmarshal(data, &st); err != nil {
		w.add("state/state.json: %v", err)
		return
	}
	s.State, s.Kind = &st, st.Kind
	s.Live = st.Phase != protocol.PhaseStopped
}

// readResults loads result/ and, for each result, the command file it ran.
func (s *Session) readResults(ev *eventLog, w *warnings, opt Options) {
	names, err := listDir(filepath.Join(s.Dir, protocol.DirResult))
	if err != nil {
		w.add("result/: %v", err)
	}
	dir, err := s.path(protocol.DirResult + "/x")
	if err != nil {
		return
	}
	results, err := fsq.OpenRoot(filepath.Dir(dir))
	if err != nil {
		w.add("result/: %v", err)
		return
	}
	defer results.Close()
	for _, name := range names {
		seq, id, err := protocol.ParseCommandName(name)
		if err != nil && !errors.Is(err, protocol.ErrBadCmdID) {
			continue // Not a result file (the runner writes none other).
		}
		data, _, err := results.ReadFile(name, maxResultSize)
		if err != nil {
			w.add("result/%s: %v", name, err)
			continue
		}
		var res protocol.Result
		if err := json.Unmarshal(data, &res); err != nil {
			w.add("result/%s: %v", name, err)
			continue
		}
		if res.CmdID == "" {
			res.CmdID = id
		}
		if res.Seq == 0 {
			res.Seq = seq
		}
		c := &Command{Name: name, CmdID: res.CmdID, Seq: res.Seq, Result: &res, Status: displayStatus(&res),
			Start: res.StartTS.Time, End: res.EndTS.Time, PayloadSHA: res.PayloadSHA256,
			TraceID: res.TraceID, Labels: res.Labels}
		if res.ExitReason == protocol.ReasonRunnerRestarted {
			c.settle(ev)
		}
		if c.End.Before(c.Start) {
			c.End = c.Start
		}
		s.readCommand(c, commandFile(name, res.CommandPath), w, opt)
		s.Commands = append(s.Commands, c)
	}
}

// settle places a command its runner died running (runner_restarted,
// written by the next runner): it ran from its cmd_begin to the dead
// runner's last sign of life, and from there until the next runner settled
// it (its recovered event) the runner was dead: DeadUntil (PROTOCOL.md
// section 7, start_ts and end_ts). A result from a runner older than that
// rule has the recovery's time as its end: the last event of the dead run
// is its last sign then.
func (c *Command) settle(ev *eventLog) {
	if t, ok := ev.begins[c.CmdID]; ok && t.Before(c.Start) {
		c.Start = t // An older runner wrote the recovery's time as its start too.
	}
	settled, ok := ev.settled[c.CmdID]
	if !ok || c.Start.IsZero() || !settled.After(c.Start) {
		return
	}
	end := c.End
	if !end.Before(settled) {
		end = ev.lastSign[c.CmdID]
	}
	if end.Before(c.Start) {
		end = c.Start
	}
	if end.Before(settled) {
		c.End, c.DeadUntil = end, settled
	}
}

// readRunning adds the commands in inflight/ that have no result yet.
func (s *Session) readRunning(inflight []string, ev *eventLog, w *warnings, opt Options) {
	have := make(map[string]bool, len(s.Commands))
	for _, c := range s.Commands {
		have[c.Name] = true
	}
	for _, name := range inflight {
		seq, id, err := protocol.ParseCommandName(name)
		if err != nil || have[name] {
			continue
		}
		c := &Command{Name: name, CmdID: id, Seq: seq, Status: StatusRunning, End: opt.Now}
		if t, ok := ev.begins[id]; ok {
			c.Start = t
		}
		if st := s.State; st != nil && st.CurrentCmdID != nil && *st.CurrentCmdID == id && !st.CurrentStart.IsZero() {
			c.Start = st.CurrentStart.Time
		}
		s.readCommand(c, path.Join(protocol.DirInflight, name), w, opt)
		if c.Start.IsZero() {
			continue // Claimed but not begun (or its events are gone): nothing to draw.
		}
		if !s.Live {
			// No runner: the command ended at the latest event; the next
			// runner will settle it as runner_restarted.
			c.End = c.Start
			if ev.last.After(c.Start) {
				c.End = ev.last
			}
		}
		s.Commands = append(s.Commands, c)
	}
}

// commandFile returns where the command file of result name is kept: the
// directory its command_path names (archive/ or log/rejected/) with the
// result's own name; command_path is input and is never used as a path.
func commandFile(name, commandPath string) string {
	if strings.HasPrefix(commandPath, protocol.DirRejected+"/") {
		return path.Join(protocol.DirRejected, name)
	}
	return path.Join(protocol.DirArchive, name)
}

// readCommand fills the payload fields of c from its command file rel.
func (s *Session) readCommand(c *Command, rel string, w *warnings, opt Options) {
	p, err := s.path(rel)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			w.add("%s: %v", rel, err)
		}
		return
	}
	data, fi, err := readFile(p, maxCommandSize)
	if errors.Is(err, os.ErrNotExist) {
		return // Older sessions kept no archive; a rejected file may be unreadable.
	}
	if err != nil {
		w.add("%s: %v", rel, err)
		return
	}
	c.CommandPath = rel
	var cmd protocol.Command
	if err := json.Unmarshal(data, &cmd); err != nil {
		return // A rejected command file: its result says why.
	}
	c.PayloadKnown, c.Kind, c.TimeoutS = true, cmd.Kind, cmd.TimeoutS
	if c.TraceID == "" && len(c.Labels) == 0 && protocol.ValidateCorrelation(cmd.TraceID, cmd.Labels) == nil {
		c.TraceID, c.Labels = cmd.TraceID, cmd.Labels
	}
	c.PayloadHead = clip(cmd.Payload, PayloadHeadLen)
	if opt.Payloads {
		c.Payload = cmd.Payload
	}
	if c.PayloadSHA == "" {
		sum := sha256.Sum256([]byte(cmd.Payload))
		c.PayloadSHA = hex.EncodeToString(sum[:])
	}
	if s.Kind == "" {
		s.Kind = cmd.Kind
	}
	switch {
	case !cmd.SubmittedAt.IsZero():
		c.Submitted = cmd.SubmittedAt.Time
	case fi != nil && !c.Start.IsZero() && !fi.ModTime().After(c.Start):
		c.Submitted = fi.ModTime()
	}
}

// span sets Start and End: from the earliest record to the latest.
func (s *Session) span(ev *eventLog) {
	s.Start, s.End = ev.first, ev.last
	widen := func(t time.Time) {
		if t.IsZero() {
			return
		}
		if s.Start.IsZero() || t.Before(s.Start) {
			s.Start = t
		}
		if t.After(s.End) {
			s.End = t
		}
	}
	for _, c := range s.Commands {
		widen(c.Start)
		widen(c.End)
		if !c.DeadUntil.IsZero() {
			widen(c.DeadUntil)
		}
		if !c.Submitted.IsZero() && c.QueueWait() > 0 {
			widen(c.Submitted)
		}
	}
}

func displayStatus(r *protocol.Result) string {
	if r.ExitReason == protocol.ReasonRunnerRestarted {
		return StatusRunnerRestarted
	}
	switch r.Status {
	case protocol.StatusOK, protocol.StatusError, protocol.StatusTimeout, protocol.StatusCancelled:
		return string(r.Status)
	}
	return StatusError // An unknown status from a newer runner: not ok.
}

// clip returns at most n bytes of s, cut at a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

package report

import (
	"fmt"
	"sort"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
	"github.com/skillpilot/skillpilot/review"
)

// Model is the data a report is drawn from; `master report --format json`
// prints it. Every command of every session is in it, whether or not the
// page draws it as its own bar.
type Model struct {
	ProtocolVersion int           `json:"protocol_version"`
	GeneratedAt     protocol.Time `json:"generated_at"`
	Start           protocol.Time `json:"start"` // the time axis, shared by every lane
	End             protocol.Time `json:"end"`
	// Aggregated is true when there are more commands than MaxBars: the
	// page then draws each lane as Bins instead of one bar per command,
	// and Note says so.
	Aggregated bool    `json:"aggregated"`
	MaxBars    int     `json:"max_bars"`
	BinMS      float64 `json:"bin_ms,omitempty"`
	Note       string  `json:"note,omitempty"`
	Summary    Summary `json:"summary"`
	Lanes      []*Lane `json:"lanes"`
}

// Lane is one session.
type Lane struct {
	Name       string         `json:"name"`
	Dir        string         `json:"dir"`
	SessionIDs []string       `json:"session_ids"`
	Live       bool           `json:"live"`
	Phase      string         `json:"phase,omitempty"`
	Queued     int            `json:"queued"` // still in queue/ when read
	Start      protocol.Time  `json:"start"`
	End        protocol.Time  `json:"end"`
	Summary    Summary        `json:"summary"`
	Commands   []Bar          `json:"commands"` // in start order
	Bins       []Bin          `json:"bins,omitempty"`
	Marks      []review.Mark  `json:"marks"`
	Events     map[string]int `json:"events"` // meta.log events by name
	Warnings   []string       `json:"warnings,omitempty"`
}

// Bar is one command.
type Bar struct {
	CmdID      string         `json:"cmd_id"`
	Seq        int64          `json:"seq"`
	Status     string         `json:"status"`
	ExitReason string         `json:"exit_reason,omitempty"`
	Submitted  *protocol.Time `json:"submitted,omitempty"`
	Start      protocol.Time  `json:"start"`
	End        protocol.Time  `json:"end"`
	RunMS      int64          `json:"run_ms"`
	QueueMS    *int64         `json:"queue_ms"` // null when the submit time is unknown
	Bytes      int64          `json:"bytes"`
	Payload    string         `json:"payload"` // its first bytes
	Error      string         `json:"error,omitempty"`
	Lane       int            `json:"lane"`
	// DeadUntil and DeadMS: for a command its runner died running
	// (runner_restarted), the runner was dead from End (its last sign of
	// life) until DeadUntil (when the next runner settled it). That time
	// is neither the command's run (RunMS) nor busy: it is drawn apart.
	DeadUntil *protocol.Time `json:"dead_until,omitempty"`
	DeadMS    int64          `json:"dead_ms,omitempty"`
	// TraceID and Labels are the command's (PROTOCOL.md section 4).
	TraceID string            `json:"trace_id,omitempty"`
	Labels  map[string]string `json:"labels,omitempty"`
}

// Bin aggregates the commands that started in [Start, Start+BinMS).
type Bin struct {
	Start    protocol.Time  `json:"start"`
	Count    int            `json:"count"`
	ByStatus map[string]int `json:"by_status"`
	// BusyMS is how much of the bin commands were running (from any bin).
	BusyMS float64 `json:"busy_ms"`
	// MaxQueue is the most commands waiting in the queue during the bin
	// (of those whose submit time is known).
	MaxQueue int `json:"max_queue"`
}

// Summary holds the figures of the table above the timeline.
type Summary struct {
	Commands    int            `json:"commands"`
	ByStatus    map[string]int `json:"by_status"`
	Run         Percentiles    `json:"run_ms"`
	Queue       Percentiles    `json:"queue_ms"` // over commands with a known submit time
	QueueKnown  int            `json:"queue_known"`
	Longest     []Bar          `json:"longest"` // the ten longest, longest first
	SpanMS      int64          `json:"span_ms"`
	BusyMS      int64          `json:"busy_ms"` // commands running (their runner alive)
	DeadMS      int64          `json:"dead_ms"` // a runner dead with a command it was running (Bar.DeadMS)
	IdleMS      int64          `json:"idle_ms"` // the rest: span − busy − dead
	OutputBytes int64          `json:"output_bytes"`
}

// Percentiles are nearest-rank percentiles in milliseconds.
type Percentiles struct {
	P50 int64 `json:"p50"`
	P90 int64 `json:"p90"`
	Max int64 `json:"max"`
}

// DefaultMaxBars is how many commands a page draws one by one; above it
// the lanes are drawn as time bins.
const DefaultMaxBars = 20000

// DefaultBins is the number of time bins of an aggregated timeline.
const DefaultBins = 600

// Options tune Build.
type Options struct {
	MaxBars int       // 0: DefaultMaxBars
	Bins    int       // 0: DefaultBins
	Now     time.Time // 0: time.Now()
}

// Build makes the model of the given sessions, one lane each.
func Build(sessions []*review.Session, opt Options) *Model {
	if opt.MaxBars <= 0 {
		opt.MaxBars = DefaultMaxBars
	}
	if opt.Bins <= 0 {
		opt.Bins = DefaultBins
	}
	if opt.Now.IsZero() {
		opt.Now = time.Now()
	}
	m := &Model{ProtocolVersion: protocol.Version, GeneratedAt: protocol.Time{Time: opt.Now.UTC()}, MaxBars: opt.MaxBars}
	var start, end time.Time
	total := 0
	for i, s := range sessions {
		l := buildLane(s, i)
		m.Lanes = append(m.Lanes, l)
		total += len(l.Commands)
		if !s.Start.IsZero() && (start.IsZero() || s.Start.Before(start)) {
			start = s.Start
		}
		if s.End.After(end) {
			end = s.End
		}
	}
	if start.IsZero() {
		start, end = opt.Now, opt.Now
	}
	if !end.After(start) {
		end = start.Add(time.Second)
	}
	m.Start, m.End = protocol.Time{Time: start.UTC()}, protocol.Time{Time: end.UTC()}
	m.Summary = summarize(allBars(m.Lanes), sumSpans(m.Lanes))
	if total > opt.MaxBars {
		m.Aggregated = true
		binW := end.Sub(start) / time.Duration(opt.Bins)
		binW = max(binW, time.Millisecond)
		m.BinMS = float64(binW) / float64(time.Millisecond)
		for _, l := range m.Lanes {
			l.Bins = binLane(l, start, binW, opt.Bins)
		}
		m.Note = fmt.Sprintf("%d commands: more than %d, so the timeline draws each lane as %d time bins of %s "+
			"(a column per bin: its height is the share of the bin spent running commands, its colours the statuses of "+
			"the commands that started in it) instead of one bar per command. The summary and the JSON model "+
			"(--format json) cover every command; --max-bars raises the limit.",
			total, opt.MaxBars, opt.Bins, fmtDur(binW))
	}
	return m
}

func buildLane(s *review.Session, idx int) *Lane {
	l := &Lane{Name: s.Name, Dir: s.Dir, SessionIDs: s.SessionIDs, Live: s.Live, Queued: s.Queued,
		Start: protocol.Time{Time: s.Start.UTC()}, End: protocol.Time{Time: s.End.UTC()},
		Marks: s.Marks, Events: s.Events, Warnings: s.Warnings, Commands: make([]Bar, 0, len(s.Commands))}
	if l.SessionIDs == nil {
		l.SessionIDs = []string{}
	}
	if l.Marks == nil {
		l.Marks = []review.Mark{}
	}
	if s.State != nil {
		l.Phase = string(s.State.Phase)
	}
	for _, c := range s.Commands {
		l.Commands = append(l.Commands, bar(c, idx))
	}
	l.Summary = summarize(l.Commands, s.End.Sub(s.Start))
	return l
}

func bar(c *review.Command, lane int) Bar {
	b := Bar{CmdID: c.CmdID, Seq: c.Seq, Status: c.Status, Start: protocol.Time{Time: c.Start.UTC()},
		End: protocol.Time{Time: c.End.UTC()}, RunMS: c.Duration().Milliseconds(), Bytes: c.OutputBytes(),
		Payload: c.PayloadHead, Lane: lane, TraceID: c.TraceID, Labels: c.Labels}
	if !c.DeadUntil.IsZero() {
		b.DeadUntil = &protocol.Time{Time: c.DeadUntil.UTC()}
		b.DeadMS = c.DeadUntil.Sub(c.End).Milliseconds()
	}
	if w := c.QueueWait(); w >= 0 {
		ms := w.Milliseconds()
		b.QueueMS = &ms
		b.Submitted = &protocol.Time{Time: c.Start.Add(-w).UTC()}
	}
	if r := c.Result; r != nil {
		b.ExitReason = string(r.ExitReason)
		if r.Error != nil {
			b.Error = clip(r.Error.Message, 300)
		}
	}
	return b
}

func allBars(lanes []*Lane) []Bar {
	var out []Bar
	for _, l := range lanes {
		out = append(out, l.Commands...)
	}
	return out
}

func sumSpans(lanes []*Lane) time.Duration {
	var d time.Duration
	for _, l := range lanes {
		d += l.End.Sub(l.Start.Time)
	}
	return d
}

// summarize computes the table's figures over bars, whose lanes together
// span span. Busy time is the union of the run intervals within each lane.
func summarize(bars []Bar, span time.Duration) Summary {
	s := Summary{Commands: len(bars), ByStatus: map[string]int{}, SpanMS: span.Milliseconds()}
	for _, st := range review.Statuses {
		s.ByStatus[st] = 0
	}
	run := make([]int64, 0, len(bars))
	var queue []int64
	byLane := map[int][]Bar{}
	for _, b := range bars {
		s.ByStatus[b.Status]++
		run = append(run, b.RunMS)
		if b.QueueMS != nil {
			queue = append(queue, *b.QueueMS)
		}
		s.OutputBytes += b.Bytes
		byLane[b.Lane] = append(byLane[b.Lane], b)
	}
	s.Run, s.Queue, s.QueueKnown = percentiles(run), percentiles(queue), len(queue)
	for _, lb := range byLane {
		s.BusyMS += busy(lb).Milliseconds()
		var dead []Bar // The dead intervals, as bars of their own.
		for _, b := range lb {
			if b.DeadUntil != nil {
				dead = append(dead, Bar{Start: b.End, End: *b.DeadUntil})
			}
		}
		s.DeadMS += busy(dead).Milliseconds()
	}
	s.BusyMS = min(s.BusyMS, s.SpanMS)
	s.DeadMS = min(s.DeadMS, s.SpanMS-s.BusyMS)
	s.IdleMS = s.SpanMS - s.BusyMS - s.DeadMS
	longest := append([]Bar(nil), bars...)
	sort.SliceStable(longest, func(i, j int) bool { return longest[i].RunMS > longest[j].RunMS })
	s.Longest = longest[:min(10, len(longest))]
	return s
}

// busy is the length of the union of the bars' [start, end) intervals;
// bars are in start order.
func busy(bars []Bar) time.Duration {
	var total time.Duration
	var curS, curE time.Time
	for _, b := range bars {
		st, en := b.Start.Time, b.End.Time
		if curE.IsZero() || st.After(curE) {
			total += curE.Sub(curS)
			curS, curE = st, en
			continue
		}
		if en.After(curE) {
			curE = en
		}
	}
	return total + curE.Sub(curS)
}

func percentiles(v []int64) Percentiles {
	if len(v) == 0 {
		return Percentiles{}
	}
	sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
	rank := func(p float64) int64 {
		i := int(p*float64(len(v))+0.999999) - 1 // nearest rank
		return v[min(max(i, 0), len(v)-1)]
	}
	return Percentiles{P50: rank(0.5), P90: rank(0.9), Max: v[len(v)-1]}
}

// binLane aggregates a lane's commands into n bins of width w from start.
func binLane(l *Lane, start time.Time, w time.Duration, n int) []Bin {
	bins := make([]Bin, n)
	for i := range bins {
		bins[i] = Bin{Start: protocol.Time{Time: start.Add(time.Duration(i) * w).UTC()}, ByStatus: map[string]int{}}
	}
	idx := func(t time.Time) int { return min(max(int(t.Sub(start)/w), 0), n-1) }
	for _, b := range l.Commands {
		i := idx(b.Start.Time)
		bins[i].Count++
		bins[i].ByStatus[b.Status]++
		// Spread the run time over the bins it covers.
		for j := i; j < n; j++ {
			bs := start.Add(time.Duration(j) * w)
			be := bs.Add(w)
			ov := minTime(be, b.End.Time).Sub(maxTime(bs, b.Start.Time))
			if ov > 0 {
				bins[j].BusyMS += float64(ov) / float64(time.Millisecond)
			}
			if !b.End.After(be) {
				break
			}
		}
	}
	for i, q := range queueDepth(l.Commands, start, w, n) {
		bins[i].MaxQueue = q
	}
	for i := range bins {
		bins[i].BusyMS = min(bins[i].BusyMS, float64(w)/float64(time.Millisecond))
	}
	return bins
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// queueDepth returns, for each of n columns of width w from start, the most
// commands waiting in the queue at once during the column (commands with a
// known submit time only).
func queueDepth(bars []Bar, start time.Time, w time.Duration, n int) []int {
	type edge struct {
		t time.Time
		d int
	}
	var edges []edge
	for _, b := range bars {
		if b.Submitted != nil && b.Start.After(b.Submitted.Time) {
			edges = append(edges, edge{b.Submitted.Time, +1}, edge{b.Start.Time, -1})
		}
	}
	sort.Slice(edges, func(i, j int) bool {
		if !edges[i].t.Equal(edges[j].t) {
			return edges[i].t.Before(edges[j].t)
		}
		return edges[i].d < edges[j].d
	})
	idx := func(t time.Time) int { return min(max(int(t.Sub(start)/w), 0), n-1) }
	out := make([]int, n)
	depth, k := 0, 0
	for i := range out {
		most := depth // carried over from earlier columns
		for k < len(edges) && (i == n-1 || idx(edges[k].t) <= i) {
			depth += edges[k].d
			most = max(most, depth)
			k++
		}
		out[i] = most
	}
	return out
}

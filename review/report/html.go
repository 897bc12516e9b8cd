package report

import (
	"bufio"
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"strings"
	"sync"

	"github.com/skillpilot/skillpilot/review"
)

var (
	//go:embed page.html.tmpl
	pageTemplate string
	//go:embed page.css
	pageCSS string
	//go:embed page.js
	pageJS string
)

// page is the parsed template, parsed on first use: a process that links
// this package but writes no report (the master CLI's hot commands) does
// not pay for the parse at start.
var page = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("page").Funcs(template.FuncMap{"inc": func(i int) int { return i + 1 }}).Parse(pageTemplate))
})

// pageData is what the template sees.
type pageData struct {
	Title, Span, Generated string
	M                      *Model
	Statuses               []string
	Colors                 map[string]string
	Rows                   []summaryRow
	Longest                []longRow
	SVG                    template.HTML
	CSS                    template.CSS
	JS                     template.JS
	Data                   scriptData
	Warnings               []string
}

type summaryRow struct {
	Name                                       string
	Total                                      bool
	S                                          Summary
	Counts                                     []int
	Run, Queue, Busy, Dead, Idle, BusyPct, Out string
}

type longRow struct {
	Lane                                             int
	CmdID, Session, Status, Color, Run, Queue, Start string
	Payload, Text                                    string
}

// scriptData is the JSON the page's script reads: per lane, a compact row
// per drawn bar, or the hover text of each bin.
type scriptData struct {
	Lanes []scriptLane `json:"lanes"`
}

type scriptLane struct {
	Name string   `json:"name"`
	C    [][]any  `json:"c,omitempty"`
	Bins []string `json:"bins,omitempty"`
}

// WriteHTML writes the self-contained report page: inline CSS, SVG and
// script, no network access.
func WriteHTML(w io.Writer, m *Model) error {
	var svg bytes.Buffer
	bw := bufio.NewWriter(&svg)
	writeTimeline(bw, m, svgOptions{})
	if err := bw.Flush(); err != nil {
		return err
	}
	d := pageData{
		Title: title(m), Generated: m.GeneratedAt.UTC().Format("2006-01-02 15:04:05 UTC"),
		Span: fmt.Sprintf("From %s to %s (%s)", m.Start.UTC().Format("2006-01-02 15:04:05"),
			m.End.UTC().Format("2006-01-02 15:04:05"), fmtDur(m.End.Sub(m.Start.Time))),
		M: m, Statuses: review.Statuses, Colors: statusColor,
		SVG: template.HTML(svg.String()), CSS: template.CSS(pageCSS), JS: template.JS(pageJS),
	}
	for _, l := range m.Lanes {
		d.Rows = append(d.Rows, row(l.Name, l.Summary, false))
		sl := scriptLane{Name: l.Name}
		if m.Aggregated {
			for _, b := range l.Bins {
				sl.Bins = append(sl.Bins, binText(b, m.BinMS))
			}
		} else {
			sl.C = make([][]any, 0, len(l.Commands))
			for _, b := range l.Commands {
				q := int64(-1)
				if b.QueueMS != nil {
					q = *b.QueueMS
				}
				sl.C = append(sl.C, []any{b.CmdID, b.Seq, b.Status, b.ExitReason, b.RunMS, q, b.Bytes,
					b.Start.UTC().Format("2006-01-02 15:04:05.000"), clip(b.Payload, 120), clip(b.Error, 200), traceText(b)})
			}
		}
		d.Data.Lanes = append(d.Data.Lanes, sl)
		for _, wn := range l.Warnings {
			d.Warnings = append(d.Warnings, l.Name+": "+wn)
		}
	}
	if len(m.Lanes) > 1 {
		d.Rows = append(d.Rows, row("all sessions", m.Summary, true))
	}
	for _, b := range m.Summary.Longest {
		q := "unknown"
		if b.QueueMS != nil {
			q = fmtMS(*b.QueueMS)
		}
		d.Longest = append(d.Longest, longRow{Lane: b.Lane, CmdID: b.CmdID, Session: m.Lanes[b.Lane].Name,
			Status: b.Status, Color: statusColor[b.Status], Run: fmtMS(b.RunMS), Queue: q,
			Start: b.Start.UTC().Format("2006-01-02 15:04:05.000"), Payload: clip(b.Payload, 120), Text: barText(b)})
	}
	bw = bufio.NewWriterSize(w, 256<<10)
	if err := page().Execute(bw, d); err != nil {
		return err
	}
	return bw.Flush()
}

func row(name string, s Summary, total bool) summaryRow {
	r := summaryRow{Name: name, Total: total, S: s,
		Run:   fmt.Sprintf("%s / %s / %s", fmtMS(s.Run.P50), fmtMS(s.Run.P90), fmtMS(s.Run.Max)),
		Queue: "unknown",
		Busy:  fmtMS(s.BusyMS), Dead: fmtMS(s.DeadMS), Idle: fmtMS(s.IdleMS), Out: fmtBytes(s.OutputBytes), BusyPct: "–"}
	for _, st := range review.Statuses {
		r.Counts = append(r.Counts, s.ByStatus[st])
	}
	if s.QueueKnown > 0 {
		r.Queue = fmt.Sprintf("%s / %s / %s", fmtMS(s.Queue.P50), fmtMS(s.Queue.P90), fmtMS(s.Queue.Max))
		if s.QueueKnown < s.Commands {
			r.Queue += fmt.Sprintf(" (%d known)", s.QueueKnown)
		}
	}
	if s.SpanMS > 0 {
		r.BusyPct = fmt.Sprintf("%.1f%%", 100*float64(s.BusyMS)/float64(s.SpanMS))
	}
	return r
}

func title(m *Model) string {
	var names []string
	for _, l := range m.Lanes {
		names = append(names, l.Name)
	}
	if len(names) > 3 {
		return fmt.Sprintf("%s and %d more sessions", strings.Join(names[:3], ", "), len(names)-3)
	}
	if len(names) == 0 {
		return "no sessions"
	}
	return strings.Join(names, ", ")
}

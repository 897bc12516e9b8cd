package report

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/skillpilot/skillpilot/review"
)

// Geometry of the timeline, in SVG user units (the page scales it).
const (
	svgWidth   = 1400.0
	gutter     = 190.0 // lane labels
	rightPad   = 16.0
	plotWidth  = svgWidth - gutter - rightPad
	axisHeight = 30.0
	laneHeight = 70.0
	barTop     = 14.0 // within a lane
	barHeight  = 26.0
	queueTop   = 46.0
	queueH     = 18.0
	legendH    = 40.0
	minBarW    = 0.6
	minMarkedW = 2.0 // bars of commands that did not end ok
)

// Status colours (also used by the page's CSS and legend).
var statusColor = map[string]string{
	review.StatusOK:              "#2ca02c",
	review.StatusError:           "#d62728",
	review.StatusTimeout:         "#ff7f0e",
	review.StatusCancelled:       "#9467bd",
	review.StatusRunnerRestarted: "#8c564b",
	review.StatusRunning:         "#1f77b4",
}

// Marks drawn on the time axis, with their colour and legend text.
var markStyle = []struct{ kind, color, label string }{
	{review.MarkRunnerStart, "#000000", "runner start"},
	{review.MarkRunnerRestart, "#000000", "runner restart"},
	{review.MarkLockTakeover, "#17becf", "lock takeover"},
	{review.MarkRecovered, "#8c564b", "recovered after a runner crash"},
	{review.MarkToolRestart, "#d62728", "tool restart"},
	{review.MarkCancel, "#9467bd", "cancel"},
	{review.MarkStop, "#444444", "stop request"},
	{review.MarkRunnerStop, "#777777", "runner stop"},
	{review.MarkLeaseExpired, "#ff7f0e", "lease expired"},
}

// svgOptions say how the timeline is written.
type svgOptions struct {
	titles bool // a <title> per bar: hover text without script (standalone SVG)
}

// svgHeight is the height of the timeline of m.
func svgHeight(m *Model) float64 {
	return axisHeight + float64(len(m.Lanes))*laneHeight + legendH
}

// WriteSVG writes the timeline alone as a standalone SVG document.
func WriteSVG(w io.Writer, m *Model) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	fmt.Fprintln(bw, `<?xml version="1.0" encoding="UTF-8"?>`)
	writeTimeline(bw, m, svgOptions{titles: true})
	return bw.Flush()
}

type svgWriter struct {
	w     *bufio.Writer
	m     *Model
	opt   svgOptions
	start time.Time
	span  float64 // ns
	cols  int
	colW  time.Duration
}

func (s *svgWriter) x(t time.Time) float64 {
	return gutter + float64(t.Sub(s.start))/s.span*plotWidth
}

func f1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
func f2(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

// esc makes s text of an XML element or attribute: markup escaped, and
// what XML 1.0 does not allow in a document (control bytes other than tab,
// newline and carriage return, U+FFFE, U+FFFF, invalid UTF-8) written as
// a Go escape, \x01 or \ufffe, so the SVG stays well-formed and shows
// what the payload held.
func esc(s string) string { return html.EscapeString(xmlText(s)) }

// xmlText replaces what XML 1.0 does not allow in a document (see esc).
func xmlText(s string) string {
	clean := utf8.ValidString(s)
	for _, r := range s {
		if !clean || !xmlChar(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case !xmlChar(r) && r < 0x100:
			fmt.Fprintf(&b, `\x%02x`, r)
		case !xmlChar(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// xmlChar reports whether r may appear in an XML 1.0 document (its Char
// production). An invalid byte decodes as utf8.RuneError, which is
// allowed; xmlText looks at the width to tell them apart.
func xmlChar(r rune) bool {
	return r == '\t' || r == '\n' || r == '\r' || r >= 0x20 && r < 0xd800 || r >= 0xe000 && r < 0xfffe || r >= 0x10000 && r <= 0x10ffff
}

// writeTimeline writes the <svg> element.
func writeTimeline(w *bufio.Writer, m *Model, opt svgOptions) {
	s := &svgWriter{w: w, m: m, opt: opt, start: m.Start.Time, span: float64(m.End.Sub(m.Start.Time)), cols: int(plotWidth)}
	s.colW = max(m.End.Sub(m.Start.Time)/time.Duration(s.cols), 1)
	h := svgHeight(m)
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" id="timeline" viewBox="0 0 %s %s" width="%s" height="%s" font-family="sans-serif" font-size="11">`+"\n",
		f1(svgWidth), f1(h), f1(svgWidth), f1(h))
	fmt.Fprintln(w, `<style>.b{stroke:none}.w{stroke:#9a9a9a;stroke-width:1;fill:none}.q{fill:#c8c8c8}`+
		`.grid{stroke:#e6e6e6}.lane{fill:#fafafa;stroke:#ddd}.mk{stroke-width:1.2}.hl{stroke:#000;stroke-width:2}</style>`)
	s.axis(h)
	for i, l := range m.Lanes {
		s.lane(i, l)
	}
	s.legend(h - legendH)
	fmt.Fprintln(w, `</svg>`)
}

// tickSteps are the candidate spacings of axis ticks.
var tickSteps = []time.Duration{
	time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond,
	50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour, 48 * time.Hour, 7 * 24 * time.Hour,
}

func (s *svgWriter) axis(h float64) {
	span := s.m.End.Sub(s.start)
	step := tickSteps[len(tickSteps)-1]
	for _, st := range tickSteps {
		if span/st <= 12 {
			step = st
			break
		}
	}
	layout := "15:04:05"
	switch {
	case step < time.Second:
		layout = "15:04:05.000"
	case span > 24*time.Hour:
		layout = "01-02 15:04"
	}
	fmt.Fprintf(s.w, `<text x="4" y="18" fill="#555">UTC</text>`+"\n")
	for t := s.start.Truncate(step); !t.After(s.m.End.Time); t = t.Add(step) {
		if t.Before(s.start) {
			continue
		}
		x := s.x(t)
		fmt.Fprintf(s.w, `<line class="grid" x1="%s" y1="%s" x2="%s" y2="%s"/><text x="%s" y="18" text-anchor="middle" fill="#333">%s</text>`+"\n",
			f1(x), f1(axisHeight-6), f1(x), f1(h-legendH), f1(x), t.UTC().Format(layout))
	}
}

func (s *svgWriter) lane(i int, l *Lane) {
	y0 := axisHeight + float64(i)*laneHeight
	fmt.Fprintf(s.w, `<g class="ln" data-l="%d"><rect class="lane" x="%s" y="%s" width="%s" height="%s"/>`+"\n",
		i, f1(gutter), f1(y0+2), f1(plotWidth), f1(laneHeight-4))
	label := l.Name
	if l.Live {
		label += " (live)"
	}
	fmt.Fprintf(s.w, `<text x="6" y="%s" font-weight="bold">%s<title>%s</title></text>`+"\n", f1(y0+barTop+barHeight/2+4), esc(clip(label, 28)), esc(l.Dir))
	fmt.Fprintf(s.w, `<text x="6" y="%s" fill="#666">%d commands</text>`+"\n", f1(y0+barTop+barHeight/2+18), len(l.Commands))
	s.queueStrip(y0, l)
	if s.m.Aggregated {
		s.bins(i, y0, l)
	} else {
		s.bars(i, y0, l)
	}
	s.marks(y0, l)
	fmt.Fprintln(s.w, `</g>`)
}

// queueStrip draws how many commands were waiting, per pixel column.
func (s *svgWriter) queueStrip(y0 float64, l *Lane) {
	depth := queueDepth(l.Commands, s.start, s.colW, s.cols)
	most := 0
	for _, d := range depth {
		most = max(most, d)
	}
	if most == 0 {
		return
	}
	base := y0 + queueTop + queueH
	fmt.Fprintf(s.w, `<path class="q" d="M%s %s`, f1(gutter), f1(base))
	prev := -1
	for c, d := range depth {
		if d == prev {
			continue
		}
		y := base - float64(d)/float64(most)*queueH
		fmt.Fprintf(s.w, `H%sV%s`, f1(gutter+float64(c)*plotWidth/float64(s.cols)), f1(y))
		prev = d
	}
	fmt.Fprintf(s.w, `H%sV%sZ"><title>queue depth (max %d waiting)</title></path>`+"\n", f1(gutter+plotWidth), f1(base), most)
	fmt.Fprintf(s.w, `<text x="%s" y="%s" text-anchor="end" fill="#888" font-size="9">queue ≤%d</text>`+"\n", f1(gutter-4), f1(base), most)
}

// bars draws each command: its queue wait as a thin line leading into it,
// then the bar.
func (s *svgWriter) bars(li int, y0 float64, l *Lane) {
	yc := y0 + barTop + barHeight/2
	any := false
	for _, b := range l.Commands {
		if b.Submitted != nil && b.Start.After(b.Submitted.Time) {
			if !any {
				fmt.Fprintf(s.w, `<path class="w" d="`)
				any = true
			}
			fmt.Fprintf(s.w, `M%s %sH%s`, f1(s.x(b.Submitted.Time)), f1(yc), f1(s.x(b.Start.Time)))
		}
	}
	if any {
		fmt.Fprintln(s.w, `"/>`)
	}
	// Everything but ok is drawn last, on top, and at least minMarkedW
	// wide: at 10,000 commands a bar is far below a pixel, and the
	// failures are what people look for.
	for pass := 0; pass < 2; pass++ {
		for i, b := range l.Commands {
			ok := b.Status == review.StatusOK
			if ok != (pass == 0) {
				continue
			}
			x := s.x(b.Start.Time)
			wd := s.x(b.End.Time) - x
			if ok {
				wd = max(wd, minBarW)
			} else {
				wd = max(wd, minMarkedW)
			}
			fmt.Fprintf(s.w, `<rect class="b" data-l="%d" data-i="%d" x="%s" y="%s" width="%s" height="%s" fill="%s">`,
				li, i, f2(x), f1(y0+barTop), f2(wd), f1(barHeight), statusColor[b.Status])
			if s.opt.titles {
				fmt.Fprintf(s.w, `<title>%s</title>`, esc(barText(b)))
			}
			fmt.Fprintln(s.w, `</rect>`)
		}
	}
	// The time a runner was dead with a command it was running: grey,
	// after the command's bar, never part of it.
	for _, b := range l.Commands {
		if b.DeadUntil == nil {
			continue
		}
		x := s.x(b.End.Time)
		wd := max(s.x(b.DeadUntil.Time)-x, minMarkedW)
		fmt.Fprintf(s.w, `<rect class="dead" x="%s" y="%s" width="%s" height="%s" fill="%s"><title>%s</title></rect>`+"\n",
			f2(x), f1(y0+barTop), f2(wd), f1(barHeight), deadColor, esc(deadText(b)))
	}
}

// deadColor is the colour of a dead runner's time.
const deadColor = "#c7c7c7"

// deadText is the hover text of a dead runner's time.
func deadText(b Bar) string {
	return fmt.Sprintf("runner dead for %s while running %s (seq %d): from its last sign of life %s until the next runner settled it %s",
		fmtMS(b.DeadMS), b.CmdID, b.Seq, b.End.UTC().Format("15:04:05.000"), b.DeadUntil.UTC().Format("15:04:05.000"))
}

// barText is a bar's hover text.
func barText(b Bar) string {
	q := "unknown"
	if b.QueueMS != nil {
		q = fmtMS(*b.QueueMS)
	}
	t := fmt.Sprintf("%s (seq %d)\n%s %s\nrun %s, queued %s, output %s\nstart %s\n%s",
		b.CmdID, b.Seq, b.Status, b.ExitReason, fmtMS(b.RunMS), q, fmtBytes(b.Bytes),
		b.Start.UTC().Format("2006-01-02 15:04:05.000"), clip(b.Payload, 120))
	if b.Error != "" {
		t += "\nerror: " + clip(b.Error, 160)
	}
	if tr := traceText(b); tr != "" {
		t += "\ntrace: " + tr
	}
	return t
}

// traceText is a bar's trace_id and labels in one line ("" for none):
// "<trace_id> key=value ...", keys sorted.
func traceText(b Bar) string {
	parts := make([]string, 0, len(b.Labels)+1)
	if b.TraceID != "" {
		parts = append(parts, b.TraceID)
	}
	keys := make([]string, 0, len(b.Labels))
	for k := range b.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		parts = append(parts, k+"="+b.Labels[k])
	}
	return clip(strings.Join(parts, " "), 300)
}

// bins draws an aggregated lane: one column per bin, as high as the share
// of the bin spent running, split by the statuses of the commands that
// started in it.
func (s *svgWriter) bins(li int, y0 float64, l *Lane) {
	bw := plotWidth / float64(len(l.Bins))
	binMS := s.m.BinMS
	for bi, b := range l.Bins {
		if b.Count == 0 && b.BusyMS == 0 {
			continue
		}
		x := gutter + float64(bi)*bw
		h := max(b.BusyMS/binMS*barHeight, 2)
		fmt.Fprintf(s.w, `<g class="bin" data-l="%d" data-b="%d" data-n="%d">`, li, bi, b.Count)
		if s.opt.titles {
			fmt.Fprintf(s.w, `<title>%s</title>`, esc(binText(b, binMS)))
		}
		y := y0 + barTop + barHeight
		if b.Count == 0 { // Busy with commands that started earlier.
			fmt.Fprintf(s.w, `<rect x="%s" y="%s" width="%s" height="%s" fill="#9bbf9b"/>`, f2(x), f2(y-h), f2(bw), f2(h))
		}
		for _, st := range review.Statuses {
			n := b.ByStatus[st]
			if n == 0 {
				continue
			}
			sh := h * float64(n) / float64(b.Count)
			y -= sh
			fmt.Fprintf(s.w, `<rect x="%s" y="%s" width="%s" height="%s" fill="%s"/>`, f2(x), f2(y), f2(bw), f2(sh), statusColor[st])
		}
		fmt.Fprintln(s.w, `</g>`)
	}
}

func binText(b Bin, binMS float64) string {
	t := fmt.Sprintf("%s +%s: %d commands started, busy %.0f%%, up to %d queued",
		b.Start.UTC().Format("15:04:05.000"), fmtMS(int64(binMS)), b.Count, 100*b.BusyMS/binMS, b.MaxQueue)
	for _, st := range review.Statuses {
		if n := b.ByStatus[st]; n > 0 {
			t += fmt.Sprintf("\n%s: %d", st, n)
		}
	}
	return t
}

// marks draws the lane's events. Marks of one kind that fall into the same
// pixel column are drawn once, with their count.
func (s *svgWriter) marks(y0 float64, l *Lane) {
	type key struct {
		kind string
		col  int
	}
	type group struct {
		first review.Mark
		n     int
	}
	groups := map[key]*group{}
	var order []key
	for _, mk := range l.Marks {
		k := key{mk.Kind, int(s.x(mk.TS.Time))}
		if g := groups[k]; g != nil {
			g.n++
			continue
		}
		groups[k] = &group{first: mk, n: 1}
		order = append(order, k)
	}
	for _, st := range markStyle {
		for _, k := range order {
			if k.kind != st.kind {
				continue
			}
			g := groups[k]
			x := s.x(g.first.TS.Time)
			text := g.first.TS.UTC().Format("15:04:05.000") + " " + g.first.Text
			if g.n > 1 {
				text = fmt.Sprintf("%d × %s; the first: %s", g.n, st.label, text)
			}
			dash := ""
			if st.kind == review.MarkToolRestart || st.kind == review.MarkCancel {
				dash = ` stroke-dasharray="3 2"`
			}
			fmt.Fprintf(s.w, `<g class="mk" data-kind="%s"><title>%s</title><line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s"%s/>`+
				`<path d="M%s %sl-4 -7h8z" fill="%s"/></g>`+"\n",
				st.kind, esc(text), f1(x), f1(y0+9), f1(x), f1(y0+laneHeight-4), st.color, dash, f1(x), f1(y0+10), st.color)
		}
	}
}

func (s *svgWriter) legend(y float64) {
	x := 6.0
	fmt.Fprintf(s.w, `<g class="legend" transform="translate(0 %s)">`, f1(y+8))
	for _, st := range review.Statuses {
		fmt.Fprintf(s.w, `<rect x="%s" y="0" width="12" height="10" fill="%s"/><text x="%s" y="9">%s</text>`, f1(x), statusColor[st], f1(x+15), st)
		x += 20 + 7*float64(len(st))
	}
	fmt.Fprintf(s.w, `<path d="M%s 5H%s" class="w"/><text x="%s" y="9">queue wait</text>`, f1(x), f1(x+14), f1(x+17))
	x += 90
	fmt.Fprintf(s.w, `<rect x="%s" y="0" width="12" height="10" class="q"/><text x="%s" y="9">queue depth</text>`, f1(x), f1(x+15))
	x += 100
	fmt.Fprintf(s.w, `<rect x="%s" y="0" width="12" height="10" fill="%s"/><text x="%s" y="9">runner dead</text>`, f1(x), deadColor, f1(x+15))
	x, y2 := 6.0, 24.0
	for _, st := range markStyle {
		fmt.Fprintf(s.w, `<path d="M%s %sl-4 -7h8z" fill="%s"/><text x="%s" y="%s">%s</text>`, f1(x+4), f1(y2+1), st.color, f1(x+11), f1(y2), st.label)
		x += 18 + 6.2*float64(len(st.label))
	}
	fmt.Fprintln(s.w, `</g>`)
}

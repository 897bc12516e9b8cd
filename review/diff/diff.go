// Package diff compares two recorded runs command by command: the
// regression check of a golden run (`master diff A B`).
//
// Commands are matched by payload and order: the k-th command of run A with
// a given payload text is compared with the k-th command of run B with the
// same payload (commands whose command file is gone are matched among
// themselves, in order). Commands that carry a trace_id or labels are
// first matched with those of the other run that have the same trace_id,
// labels and payload; the rest by payload alone. A run may be one session
// or a pool's sessions together ([CompareRuns]): its commands are then
// taken in submit order whatever session ran them, so two pool runs pair
// their commands by trace id, labels and payload, not by session. A matched pair differs when its status or
// exit_reason, its value, or its output (by sha256) differ; a command
// without a partner in the other run is a difference too, except that an
// unmatched command of A and one of B in the same place (between the same
// matched neighbours, in order) are one edited step: a "payload"
// difference, compared as a pair. So are two with the same trace_id and
// labels, wherever they sit, and in pool runs two whose places overlap
// (steps submitted concurrently interleave differently from run to run). Lines matching Options.Ignore (dates,
// hosts, pids) are left out of values and outputs before they are
// compared. Durations are reported, never a difference. Commands still
// running are ignored.
package diff

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	udiff "github.com/aymanbagabas/go-udiff"
	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/protocol"
	"github.com/skillpilot/skillpilot/review"
)

// Bounds of the unified diff of two outputs.
const (
	MaxDiffInput = 256 << 10 // bytes of each output that are diffed
	MaxDiffLines = 200       // lines of unified diff kept per command
	// MaxIgnoreInput bounds each output read whole to drop Options.Ignore
	// lines; a longer output is compared by sha256 alone (with a warning).
	MaxIgnoreInput = 64 << 20
)

// Options changes what Compare takes for a difference.
type Options struct {
	// Ignore: lines of values and outputs matching any of these are left
	// out before comparing (volatile lines: dates, hosts, pids).
	Ignore []*regexp.Regexp
	// Mask: every match of these inside a line of a value or an output is
	// replaced by MaskText before comparing (a timestamp inside a line).
	Mask []*regexp.Regexp
}

// MaskText replaces what Options.Mask matches.
const MaskText = "<masked>"

// Run is one recorded run: a session, or every session of a pool.
type Run struct {
	Dir      string
	Sessions []*review.Session
}

// Side is one command of a pair as the report shows it.
type Side struct {
	CmdID        string  `json:"cmd_id"`
	Seq          int64   `json:"seq"`
	Status       string  `json:"status"`
	ExitReason   string  `json:"exit_reason"`
	Value        *string `json:"value"`
	OutputSHA256 string  `json:"output_sha256"`
	Bytes        int64   `json:"bytes"`
	DurationMS   int64   `json:"duration_ms"`
	Error        string  `json:"error,omitempty"`
	// Session is the session that ran it, in a pool run (its directory's
	// base name); TraceID and Labels are the command's.
	Session string            `json:"session,omitempty"`
	TraceID string            `json:"trace_id,omitempty"`
	Labels  map[string]string `json:"labels,omitempty"`
}

// Pair is one matched (or unmatched) command.
type Pair struct {
	Payload    string   `json:"payload"`             // its first bytes (A's for an edited step)
	PayloadB   string   `json:"payload_b,omitempty"` // an edited step: B's payload (its first bytes)
	Occurrence int      `json:"occurrence"`          // 1 for the first command with this payload
	A          *Side    `json:"a"`                   // nil: only in B
	B          *Side    `json:"b"`                   // nil: only in A
	Differs    []string `json:"differs"`             // payload, status, value, output, only_in_a, only_in_b
	OutputDiff string   `json:"output_diff,omitempty"`
	DurationMS int64    `json:"duration_change_ms"` // B − A
}

// Result is the comparison of two runs.
type Result struct {
	ProtocolVersion int    `json:"protocol_version"`
	A               string `json:"a"`
	B               string `json:"b"`
	Agree           bool   `json:"agree"`
	Matched         int    `json:"matched"`
	Same            int    `json:"same"`
	Different       int    `json:"different"`
	OnlyInA         int    `json:"only_in_a"`
	OnlyInB         int    `json:"only_in_b"`
	Edited          int    `json:"edited"`        // unmatched commands paired as one edited step (differs: payload)
	DurationA       int64  `json:"duration_a_ms"` // sum over matched commands
	DurationB       int64  `json:"duration_b_ms"`
	// Differences lists the pairs that differ, in A's order (then B-only).
	Differences []Pair `json:"differences"`
	// Slower lists the matched pairs with the largest duration changes.
	Slower []Pair `json:"largest_duration_changes"`
	// Warnings: outputs that could not be read (counted as differences).
	Warnings []string `json:"warnings,omitempty"`
}

// Compare compares run b with run a (both loaded with Payloads).
func Compare(a, b *review.Session) *Result { return CompareWith(a, b, Options{}) }

// CompareWith is Compare with options.
func CompareWith(a, b *review.Session, opt Options) *Result {
	return CompareRuns(Run{Dir: a.Dir, Sessions: []*review.Session{a}}, Run{Dir: b.Dir, Sessions: []*review.Session{b}}, opt)
}

// CompareRuns compares run b with run a, each one session or a pool's
// sessions (loaded with Payloads).
func CompareRuns(a, b Run, opt Options) *Result {
	r := &Result{ProtocolVersion: protocol.Version, A: a.Dir, B: b.Dir, Differences: []Pair{}, Slower: []Pair{}}
	listA, ownA := finished(a)
	listB, ownB := finished(b)
	cmp := &comparer{r: r, ownA: ownA, ownB: ownB, ignore: opt.Ignore, mask: opt.Mask, pool: len(a.Sessions) > 1 || len(b.Sessions) > 1}
	type key struct {
		known   bool
		payload string
		corr    string // trace_id and labels; "" in the second round
	}
	keyOf := func(c *review.Command, withCorr bool) key {
		k := key{known: c.PayloadKnown, payload: c.Payload}
		if withCorr {
			k.corr = correlation(c)
		}
		return k
	}
	// partnerA[i] is the index in B of A's i-th command (-1: unmatched),
	// and the reverse. First round: same trace_id, labels and payload
	// (commands that carry either); second: same payload.
	partnerA, partnerB := make([]int, len(listA)), make([]int, len(listB))
	for i := range partnerA {
		partnerA[i] = -1
	}
	for j := range partnerB {
		partnerB[j] = -1
	}
	for _, withCorr := range []bool{true, false} {
		queueB := map[key][]int{}
		for j, c := range listB {
			if partnerB[j] < 0 && (!withCorr || correlation(c) != "") {
				queueB[keyOf(c, withCorr)] = append(queueB[keyOf(c, withCorr)], j)
			}
		}
		for i, ca := range listA {
			if partnerA[i] >= 0 || (withCorr && correlation(ca) == "") {
				continue
			}
			k := keyOf(ca, withCorr)
			if q := queueB[k]; len(q) > 0 {
				partnerA[i], partnerB[q[0]] = q[0], i
				queueB[k] = q[1:]
			}
		}
	}
	seen := map[key]int{}
	occA := make([]int, len(listA))
	for i, ca := range listA {
		k := keyOf(ca, false)
		seen[k]++
		occA[i] = seen[k]
	}
	edits := editedSteps(partnerA, partnerB, cmp.pool)
	editedByCorrelation(listA, listB, partnerA, partnerB, edits)
	var matched []Pair
	for i, ca := range listA {
		p := Pair{Payload: head(ca), Occurrence: occA[i], A: cmp.side(ca, ownA)}
		switch j, edited := edits[i]; {
		case partnerA[i] >= 0:
			cb := listB[partnerA[i]]
			p.B = cmp.side(cb, ownB)
			cmp.compare(&p, ca, cb)
			matched = append(matched, p)
		case edited:
			cb := listB[j]
			p.B, p.PayloadB = cmp.side(cb, ownB), head(cb)
			cmp.compare(&p, ca, cb)
			p.Differs = append([]string{"payload"}, p.Differs...)
			r.Edited++
		default:
			p.Differs = []string{"only_in_a"}
			r.OnlyInA++
		}
		if len(p.Differs) > 0 {
			r.Differences = append(r.Differences, p)
		}
	}
	editedB := map[int]bool{}
	for _, j := range edits {
		editedB[j] = true
	}
	seenB := map[key]int{}
	for j, cb := range listB {
		k := keyOf(cb, false)
		seenB[k]++
		if partnerB[j] >= 0 || editedB[j] {
			continue // Matched or edited: above.
		}
		r.OnlyInB++
		r.Differences = append(r.Differences, Pair{Payload: head(cb), Occurrence: seenB[k], B: cmp.side(cb, ownB), Differs: []string{"only_in_b"}})
	}
	r.Matched = len(matched)
	r.Different = len(r.Differences) - r.OnlyInA - r.OnlyInB - r.Edited
	r.Same = r.Matched - r.Different
	r.Agree = len(r.Differences) == 0
	for i := range matched {
		r.DurationA += matched[i].A.DurationMS
		r.DurationB += matched[i].B.DurationMS
	}
	r.Slower = largestChanges(matched, 5)
	return r
}

// correlation is a command's trace_id and labels as one comparable
// string, "" when it has neither.
func correlation(c *review.Command) string {
	if c.TraceID == "" && len(c.Labels) == 0 {
		return ""
	}
	keys := make([]string, 0, len(c.Labels))
	for k := range c.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(c.TraceID)
	for _, k := range keys {
		fmt.Fprintf(&b, "\x00%s=%s", k, c.Labels[k])
	}
	return b.String()
}

// editedByCorrelation pairs, before any pairing by place, the unmatched
// commands of A and B that carry the same trace_id and labels: one step
// of the flow whose payload changed, wherever it sits (edits maps A's
// index to B's; pairs by place that cross these are undone).
func editedByCorrelation(listA, listB []*review.Command, partnerA, partnerB []int, edits map[int]int) {
	waiting := map[string][]int{}
	for j, c := range listB {
		if k := correlation(c); partnerB[j] < 0 && k != "" {
			waiting[k] = append(waiting[k], j)
		}
	}
	byB := map[int]int{}
	for i, j := range edits {
		byB[j] = i
	}
	for i, c := range listA {
		k := correlation(c)
		if partnerA[i] >= 0 || k == "" || len(waiting[k]) == 0 {
			continue
		}
		j := waiting[k][0]
		waiting[k] = waiting[k][1:]
		if old, ok := edits[i]; ok {
			delete(byB, old)
		}
		if other, ok := byB[j]; ok {
			delete(edits, other)
		}
		edits[i], byB[j] = j, i
	}
}

// editedSteps pairs the unmatched commands of A with those of B that sit
// in the same place: after the same matched pair (the last matched command
// before each, in its own run, belongs to the same pair; or none before
// either), first with first. It maps A's index to B's. With loose (pool
// runs, whose commands are taken in submit order across sessions: steps
// submitted concurrently interleave differently from run to run), an
// unmatched command left then pairs with one whose place overlaps its own:
// the matched neighbours around each (the last before and the first
// after, as indexes of A) span ranges that meet.
func editedSteps(partnerA, partnerB []int, loose bool) map[int]int {
	// gap is the A index of the last matched command before i in its run
	// (partner maps its run to the other; toA turns the partner into A's
	// index), or -1.
	gap := func(partner []int, i int, toA bool) int {
		for k := i - 1; k >= 0; k-- {
			if partner[k] >= 0 {
				if toA {
					return partner[k]
				}
				return k
			}
		}
		return -1
	}
	waitingB := map[int][]int{}
	for j := range partnerB {
		if partnerB[j] < 0 {
			g := gap(partnerB, j, true)
			waitingB[g] = append(waitingB[g], j)
		}
	}
	out := map[int]int{}
	for i := range partnerA {
		if partnerA[i] >= 0 {
			continue
		}
		g := gap(partnerA, i, false)
		if q := waitingB[g]; len(q) > 0 {
			out[i] = q[0]
			waitingB[g] = q[1:]
		}
	}
	if !loose {
		return out
	}
	// next is the A index of the first matched command after i in its run,
	// or len(partnerA) (none: the end).
	next := func(partner []int, i int, toA bool) int {
		for k := i + 1; k < len(partner); k++ {
			if partner[k] >= 0 {
				if toA {
					return partner[k]
				}
				return k
			}
		}
		return len(partnerA)
	}
	var leftB []int // B's unmatched commands the exact places left unpaired, in order
	for j := range partnerB {
		if partnerB[j] < 0 && slices.Contains(waitingB[gap(partnerB, j, true)], j) {
			leftB = append(leftB, j)
		}
	}
	for i := range partnerA {
		if _, paired := out[i]; paired || partnerA[i] >= 0 {
			continue
		}
		lo, hi := gap(partnerA, i, false), next(partnerA, i, false)
		for k, j := range leftB {
			if gap(partnerB, j, true) <= hi && lo <= next(partnerB, j, true) {
				out[i] = j
				leftB = slices.Delete(leftB, k, k+1)
				break
			}
		}
	}
	return out
}

// finished returns the commands of run that have a result, and the
// session of each: for one session in recorded order; for several (a
// pool) in submit order (then start, session, seq), each cmd_id once (a
// command moved between sessions is listed where it ran).
func finished(run Run) ([]*review.Command, map[*review.Command]*review.Session) {
	var out []*review.Command
	own := map[*review.Command]*review.Session{}
	seen := map[string]bool{}
	order := map[*review.Command]int{}
	for si, s := range run.Sessions {
		for _, c := range s.Commands {
			if c.Result == nil || (len(run.Sessions) > 1 && seen[c.CmdID]) {
				continue
			}
			seen[c.CmdID] = true
			own[c] = s
			order[c] = si
			out = append(out, c)
		}
	}
	if len(run.Sessions) > 1 {
		sort.SliceStable(out, func(i, j int) bool {
			a, b := out[i], out[j]
			if !a.Submitted.Equal(b.Submitted) {
				return a.Submitted.Before(b.Submitted)
			}
			if !a.Start.Equal(b.Start) {
				return a.Start.Before(b.Start)
			}
			if order[a] != order[b] {
				return order[a] < order[b]
			}
			return a.Seq < b.Seq
		})
	}
	return out, own
}

func (m *comparer) side(c *review.Command, own map[*review.Command]*review.Session) *Side {
	res := c.Result
	s := &Side{CmdID: c.CmdID, Seq: c.Seq, Status: string(res.Status), ExitReason: string(res.ExitReason),
		Value: res.Value, OutputSHA256: res.OutputSHA256, Bytes: res.Stats.Bytes, DurationMS: c.Duration().Milliseconds(),
		TraceID: c.TraceID, Labels: c.Labels}
	if res.Error != nil {
		s.Error = clip(res.Error.Message, 300)
	}
	if m.pool {
		s.Session = filepath.Base(own[c].Dir)
	}
	return s
}

// comparer compares the commands of two runs.
type comparer struct {
	r          *Result
	ownA, ownB map[*review.Command]*review.Session // the session of each command
	ignore     []*regexp.Regexp
	mask       []*regexp.Regexp
	pool       bool // a run has several sessions: sides name theirs
}

// compare fills p.Differs (and the output diff) for a pair.
func (m *comparer) compare(p *Pair, ca, cb *review.Command) {
	r, a, b := m.r, m.ownA[ca], m.ownB[cb]
	p.DurationMS = p.B.DurationMS - p.A.DurationMS
	if p.A.Status != p.B.Status || p.A.ExitReason != p.B.ExitReason {
		p.Differs = append(p.Differs, "status")
	}
	if (p.A.Value == nil) != (p.B.Value == nil) || (p.A.Value != nil && m.keep(*p.A.Value) != m.keep(*p.B.Value)) {
		p.Differs = append(p.Differs, "value")
	}
	if len(m.ignore)+len(m.mask) > 0 && (p.A.OutputSHA256 != p.B.OutputSHA256 || p.A.Bytes != p.B.Bytes) {
		m.compareIgnoring(p, ca, cb)
		return
	}
	if p.A.OutputSHA256 == p.B.OutputSHA256 && p.A.Bytes == p.B.Bytes {
		// The records agree; the files must still hold what they record
		// (an output replaced after the run by another file, a symlink,
		// a FIFO or a huge file is a difference, not an agreement).
		errA, errB := a.VerifyOutput(ca), b.VerifyOutput(cb)
		if errA == nil && errB == nil {
			return
		}
		for _, err := range []error{errA, errB} {
			if err != nil {
				r.Warnings = append(r.Warnings, err.Error())
			}
		}
		p.Differs = append(p.Differs, "output")
		p.OutputDiff = "(the recorded outputs agree, but an output file no longer holds what its result recorded)"
		return
	}
	p.Differs = append(p.Differs, "output")
	outA, truncA, errA := a.OutputPrefix(ca, MaxDiffInput)
	outB, truncB, errB := b.OutputPrefix(cb, MaxDiffInput)
	if errA != nil || errB != nil {
		for _, err := range []error{errA, errB} {
			if err != nil {
				r.Warnings = append(r.Warnings, err.Error())
			}
		}
		p.OutputDiff = "(the outputs differ by sha256; one of them could not be read for a line diff)"
		return
	}
	if truncA {
		outA = wholeRunes(outA)
	}
	if truncB {
		outB = wholeRunes(outB)
	}
	p.OutputDiff = unified(ca.CmdID, cb.CmdID, outA, outB)
	if truncA || truncB {
		p.OutputDiff = fmt.Sprintf("(line diff of the first %d KiB only)\n", MaxDiffInput>>10) + p.OutputDiff
	}
}

// compareIgnoring compares two outputs without the lines Ignore matches:
// each is read whole (at most MaxIgnoreInput, checked against its
// result's sha256), and the line diff shows what is left.
func (m *comparer) compareIgnoring(p *Pair, ca, cb *review.Command) {
	outA, errA := m.ownA[ca].Output(ca, MaxIgnoreInput)
	outB, errB := m.ownB[cb].Output(cb, MaxIgnoreInput)
	if errA != nil || errB != nil {
		for _, err := range []error{errA, errB} {
			if err != nil {
				m.r.Warnings = append(m.r.Warnings, err.Error())
			}
		}
		p.Differs = append(p.Differs, "output")
		p.OutputDiff = "(the outputs differ by sha256; one of them could not be read to leave out the --ignore lines)"
		if errors.Is(errA, fsq.ErrTooLarge) || errors.Is(errB, fsq.ErrTooLarge) {
			p.OutputDiff = fmt.Sprintf("(the outputs differ by sha256; one is over %d MiB, too large to leave out the --ignore lines)", MaxIgnoreInput>>20)
		}
		return
	}
	keptA, keptB := m.keepBytes(outA), m.keepBytes(outB)
	if bytes.Equal(keptA, keptB) {
		return
	}
	p.Differs = append(p.Differs, "output")
	truncated := len(keptA) > MaxDiffInput || len(keptB) > MaxDiffInput
	keptA, keptB = wholeRunes(keptA[:min(len(keptA), MaxDiffInput)]), wholeRunes(keptB[:min(len(keptB), MaxDiffInput)])
	p.OutputDiff = unified(ca.CmdID, cb.CmdID, keptA, keptB)
	if truncated {
		p.OutputDiff = fmt.Sprintf("(line diff of the first %d KiB only)\n", MaxDiffInput>>10) + p.OutputDiff
	}
}

// keep is s without the lines Ignore matches, Mask's matches masked.
func (m *comparer) keep(s string) string {
	if len(m.ignore)+len(m.mask) == 0 {
		return s
	}
	return string(m.keepBytes([]byte(s)))
}

// keepBytes is b without the lines Ignore matches (a line is matched
// without its newline), and with every match of Mask inside the lines
// kept replaced by MaskText.
func (m *comparer) keepBytes(b []byte) []byte {
	var out []byte
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line = b[:i+1]
		}
		b = b[len(line):]
		text := bytes.TrimSuffix(line, []byte("\n"))
		ignored := false
		for _, re := range m.ignore {
			if re.Match(text) {
				ignored = true
				break
			}
		}
		if !ignored {
			if len(m.mask) > 0 {
				nl := len(line) > len(text)
				for _, re := range m.mask {
					text = re.ReplaceAll(text, []byte(MaskText))
				}
				line = append([]byte(nil), text...)
				if nl {
					line = append(line, '\n')
				}
			}
			out = append(out, line...)
		}
	}
	return out
}

// unified renders a bounded unified diff of two outputs.
func unified(idA, idB string, a, b []byte) string {
	if !utf8.Valid(a) || !utf8.Valid(b) {
		return fmt.Sprintf("(binary outputs differ: %d and %d bytes)", len(a), len(b))
	}
	edits := udiff.Lines(string(a), string(b))
	text, err := udiff.ToUnified("a/"+idA, "b/"+idB, string(a), edits, 3)
	if err != nil {
		return fmt.Sprintf("(no line diff: %v)", err)
	}
	lines := strings.SplitAfter(text, "\n")
	if len(lines) > MaxDiffLines {
		text = strings.Join(lines[:MaxDiffLines], "") + fmt.Sprintf("… %d more lines of diff\n", len(lines)-MaxDiffLines)
	}
	return text
}

// wholeRunes drops an incomplete UTF-8 sequence that a cut left at the end.
func wholeRunes(b []byte) []byte {
	for i := 1; i <= utf8.UTFMax && i <= len(b); i++ {
		if utf8.RuneStart(b[len(b)-i]) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return b[:len(b)-i]
			}
			break
		}
	}
	return b
}

func largestChanges(pairs []Pair, n int) []Pair {
	out := make([]Pair, 0, n)
	for _, p := range pairs {
		out = append(out, p)
		for i := len(out) - 1; i > 0 && abs(out[i].DurationMS) > abs(out[i-1].DurationMS); i-- {
			out[i], out[i-1] = out[i-1], out[i]
		}
		if len(out) > n {
			out = out[:n]
		}
	}
	return out
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

func head(c *review.Command) string {
	if !c.PayloadKnown {
		return "(command file unknown: " + c.Name + ")"
	}
	return clip(c.PayloadHead, 120)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

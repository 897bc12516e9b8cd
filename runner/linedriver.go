package runner

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"regexp"
	"regexp/syntax"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/skillpilot/skillpilot/protocol"
)

// DriverSpec says how to drive a line-oriented shell that speaks neither
// Tcl nor sh (PROTOCOL.md 11.1): the command that prints one line, the
// command that runs a file, what an error line looks like and what the
// tool prints between commands. The presets (yosys, ngspice) are such
// files built into the binary; `runner --driver FILE` reads one.
type DriverSpec struct {
	// Kind is the name commands carry in their kind field.
	Kind string `json:"kind"`
	// Argv is the tool's command line when the runner is given none.
	Argv []string `json:"argv,omitempty"`
	// Print is the tool's command that prints one line; {} stands for
	// the text (a marker: letters, digits, '_', '-', '.', '=' and spaces).
	Print string `json:"print"`
	// Source, if set, is the command that runs a file; {} stands for its
	// path, quoted by Quote. Without it a payload is typed line by line
	// (at most lineTypedMax bytes in all).
	Source string `json:"source,omitempty"`
	// Quote is how the path typed for {} in Source is quoted for the
	// tool's language: "sh" (single quotes), "tcl" (a Tcl word), "c"
	// (double quotes, backslash before " and \: C, Python, JSON), or
	// "none" (the default: as it is). With "none" a path holding anything
	// but letters, digits and /._+,@%=:- is never typed: the runner types
	// another path to the same file that holds none (through its own open
	// descriptor of the session directory, /proc/PID/fd/N/...).
	Quote string `json:"quote,omitempty"`
	// Error, if set, is a regular expression (RE2): an output line of a
	// command matching it makes the command's status error, with that
	// line as error.message (but see StopsAtError).
	Error string `json:"error,omitempty"`
	// StopsAtError says the tool's Source stops at the first command that
	// fails (Yosys's script does): a payload file that ran to its end is
	// ok whatever its lines say (an ERROR: a payload logged itself), and
	// one that stopped before its end is an error, with the first line
	// matching Error as error.message.
	StopsAtError bool `json:"stops_at_error,omitempty"`
	// Prompt, if set, is a regular expression (RE2) for what the tool
	// prints between commands (its prompt, a banner of its file command):
	// wherever it begins a line it is left out of commands' output. The
	// runner also learns the prompt from what precedes its markers.
	Prompt string `json:"prompt,omitempty"`
	// BlankLine: an empty line is typed after a payload typed line by
	// line (a Python REPL runs an indented block only after one).
	BlankLine bool `json:"blank_line,omitempty"`
}

// lineTypedMax bounds a payload typed line by line (a driver without
// Source): with the marker lines it stays under the terminal's 4096-byte
// input queue.
const lineTypedMax = 3072

// Bounds of a driver file and of its templates and patterns.
const (
	maxDriverFile     = 64 << 10
	maxDriverTemplate = 256
	maxDriverPattern  = 1024
)

// endWord starts the line a line driver's payload prints when it has run
// to its end (PROTOCOL.md 11.1).
const endWord = "__SP_END__"

//go:embed drivers/*.json
var presetFiles embed.FS

// Preset returns the built-in driver for kind, if there is one.
func Preset(kind string) (*DriverSpec, bool) {
	b, err := presetFiles.ReadFile("drivers/" + kind + ".json")
	if err != nil {
		return nil, false
	}
	d, err := ParseDriver(b)
	if err != nil {
		panic("runner: preset driver " + kind + ": " + err.Error())
	}
	return d, true
}

// Presets lists the built-in drivers' kinds.
func Presets() []string {
	var k []string
	ents, _ := fs.ReadDir(presetFiles, "drivers")
	for _, e := range ents {
		k = append(k, strings.TrimSuffix(e.Name(), ".json"))
	}
	sort.Strings(k)
	return k
}

// ErrDriver is wrapped by every error ParseDriver returns.
var ErrDriver = errors.New("runner: invalid driver")

// markerSamples are lines the runner's markers make, for checking a
// driver's patterns against them.
var markerSamples = []string{
	protocol.DefaultMarkerPrefix + " 01a24c4e-2348-73c9-a36a-c07d954493b9 rc=0",
	protocol.DefaultMarkerPrefix + " sync-1b2c3d4e-1 rc=0",
	beginWord + " 01a24c4e-2348-73c9-a36a-c07d954493b9",
	endWord + " 01a24c4e-2348-73c9-a36a-c07d954493b9",
}

// ParseDriver reads and checks a driver file's JSON, whole: exactly one
// object, no unknown field (a misspelt "promt" must not pass silently),
// templates of one line without control characters, patterns that
// compile and leave the runner's own marker lines alone, sizes bounded.
func ParseDriver(b []byte) (*DriverSpec, error) {
	bad := func(format string, a ...any) (*DriverSpec, error) {
		return nil, fmt.Errorf("%w: "+format, append([]any{ErrDriver}, a...)...)
	}
	if len(b) > maxDriverFile {
		return bad("the file is %d bytes (at most %d)", len(b), maxDriverFile)
	}
	var d DriverSpec
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return bad("%v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return bad("the file holds more than one JSON object (something follows the first at byte %d)", dec.InputOffset())
	}
	switch {
	case !protocol.ValidKind(protocol.Kind(d.Kind)):
		return bad("kind %q is not 1-32 characters of [a-z0-9_-] starting with a letter", d.Kind)
	case d.Kind == string(protocol.KindTcl) || d.Kind == string(protocol.KindSh):
		return bad("kind %q is built in; a driver file names another kind", d.Kind)
	case strings.Count(d.Print, "{}") != 1:
		return bad(`print must hold {} once (the text to print), got %q`, d.Print)
	case d.Source != "" && strings.Count(d.Source, "{}") != 1:
		return bad(`source must hold {} once (the file's path), got %q`, d.Source)
	case d.StopsAtError && d.Source == "":
		return bad("stops_at_error says how the tool's source runs a file: it needs source")
	}
	for _, t := range []struct{ name, text string }{{"print", d.Print}, {"source", d.Source}} {
		if len(t.text) > maxDriverTemplate {
			return bad("%s is %d bytes (at most %d)", t.name, len(t.text), maxDriverTemplate)
		}
		if i := strings.IndexFunc(t.text, isControl); i >= 0 {
			return bad("%s holds the control character %s at byte %d (a template is typed into the tool's terminal, where it would act)", t.name, byteName(t.text[i]), i)
		}
	}
	switch d.Quote {
	case "", "none", "sh", "tcl", "c":
	default:
		return bad(`quote %q: want "none", "sh", "tcl" or "c"`, d.Quote)
	}
	for _, a := range d.Argv {
		if strings.IndexByte(a, 0) >= 0 {
			return bad("argv holds a NUL byte")
		}
	}
	for _, re := range []struct{ name, expr string }{{"error", d.Error}, {"prompt", d.Prompt}} {
		if re.expr == "" {
			continue
		}
		if len(re.expr) > maxDriverPattern {
			return bad("%s is %d bytes (at most %d)", re.name, len(re.expr), maxDriverPattern)
		}
		x, err := regexp.Compile(re.expr)
		if err != nil {
			return bad("%s: %v", re.name, err)
		}
		if x.MatchString("") {
			return bad("%s %q matches an empty line, so it would match everywhere", re.name, re.expr)
		}
		start := regexp.MustCompile(`^(?:` + re.expr + `)`)
		for _, m := range markerSamples {
			if (re.name == "prompt" && start.MatchString(m)) || (re.name == "error" && x.MatchString(m)) {
				return bad("%s %q matches the runner's own marker line %q, which it would remove or take for an error", re.name, re.expr, m)
			}
		}
	}
	return &d, nil
}

// isControl reports whether r is a control character (C0 or DEL).
func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// byteName names a byte for a message: 0x1a (^Z).
func byteName(c byte) string {
	switch {
	case c == 0x7f:
		return "0x7f (DEL)"
	case c < 0x20:
		return fmt.Sprintf("0x%02x (^%c)", c, c+'@')
	}
	return fmt.Sprintf("0x%02x", c)
}

// lineDriver drives a tool described by a DriverSpec. It types, for a
// command, what makes the tool print the begin line, run the payload (the
// line that sources its file, or its own lines) and print the end and done
// lines; the tool runs them in order. There are no helpers to type at
// start, no value, no return code and no fence: the status comes from
// whether the payload ran to its end and from the error pattern
// (outcome).
type lineDriver struct {
	spec   DriverSpec
	errRe  *regexp.Regexp // nil: no error pattern
	prompt *regexp.Regexp // the prompt at the end of a text; nil: none
	// alias, for quote "none", turns a session path into one that holds
	// only safe characters (Runner sets it: its descriptor of the session).
	alias func(path string) string
	// passControl: a line-typed payload may hold control characters
	// (--pass-control-bytes).
	passControl bool
	// learned is the prompt the tool printed before the runner's last
	// done or sync line (promptShape), learnedText its text.
	learned     *regexp.Regexp
	learnedText string
}

// learn records p, the text the tool printed before a done or sync line
// at a line start: its prompt now (a payload may have changed it: ngspice
// "set prompt"). It reports whether that is news.
func (l *lineDriver) learn(p []byte) bool {
	if len(p) == 0 || string(p) == l.learnedText {
		return false
	}
	re := promptShape(p)
	if re == nil {
		return false
	}
	l.learned, l.learnedText = re, string(p)
	return true
}

func newLineDriver(d *DriverSpec) *lineDriver {
	l := &lineDriver{spec: *d}
	if d.Error != "" {
		l.errRe = regexp.MustCompile(d.Error)
	}
	if d.Prompt != "" {
		l.prompt = regexp.MustCompile(`(?:` + d.Prompt + `)$`)
	}
	return l
}

func (l *lineDriver) print(text string) string { return strings.Replace(l.spec.Print, "{}", text, 1) }

// echoGuard is the print command's text before its {}: a marker right
// after it is the echo of a typed print line (nil when {} ends nothing,
// e.g. print('{}'), whose echo cannot end a line with a marker).
func (l *lineDriver) echoGuard() []byte {
	before, after, _ := strings.Cut(l.spec.Print, "{}")
	if after != "" || before == "" {
		return nil
	}
	return []byte(before)
}

func (l *lineDriver) bootstrap() string { return "" }

// run: with a file command, the begin and end lines are printed by the
// file itself (payloadFile), so the tool runs two commands for a payload,
// and what the file command prints about itself comes before the begin
// line, outside the output. Without one, the payload's lines are typed
// between the prints of the begin and end lines. The end line says the
// payload ran to its end; the done line, typed after it, follows the tool's
// prompt, which the runner learns from it.
func (l *lineDriver) run(file, inline, prefix, token, _ string, wrap bool) string {
	var lines []string
	switch {
	case l.spec.Source != "":
		lines = append(lines, l.sourceLine(file))
	default:
		lines = append(lines, l.print(beginWord+" "+token))
		if inline != "" {
			inline = strings.ReplaceAll(inline, "\r\n", "\n")
			lines = append(lines, strings.Split(strings.TrimSuffix(inline, "\n"), "\n")...)
		}
		if l.spec.BlankLine {
			lines = append(lines, "")
		}
		if wrap {
			lines = append(lines, l.print(endWord+" "+token))
		}
	}
	if wrap {
		lines = append(lines, l.print(prefix+" "+token+" rc=0"))
	}
	return strings.Join(lines, "\n")
}

// sourceLine is the line that runs the file at path.
func (l *lineDriver) sourceLine(path string) string {
	return strings.Replace(l.spec.Source, "{}", l.quote(path), 1)
}

// quote quotes path for the tool's language (DriverSpec.Quote).
func (l *lineDriver) quote(path string) string {
	switch l.spec.Quote {
	case "sh":
		return shQuote(path)
	case "tcl":
		return tclQuote(path)
	case "c":
		return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(path) + `"`
	}
	if !plainPath(path) && l.alias != nil {
		return l.alias(path)
	}
	return path
}

// plainPath reports whether p holds only characters no shell language
// splits or interprets: letters, digits and /._+,@%=:-.
func plainPath(p string) bool {
	for i := 0; i < len(p); i++ {
		c := p[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("/._+,@%=:-", c) >= 0) {
			return false
		}
	}
	return p != ""
}

func (l *lineDriver) sync(prefix, token string) string {
	return l.print(prefix + " " + token + " rc=0")
}

func (l *lineDriver) fence(string) string { return "" }

// inlineMax: a driver with a file command always runs a file (0); one
// without types the payload.
func (l *lineDriver) line() *lineDriver { return l }

func (l *lineDriver) inlineMax() int {
	if l.spec.Source != "" {
		return 0
	}
	return lineTypedMax
}

// payloadFile: a driver with a file command prints the begin line first
// thing in the file, and the end line last.
func (l *lineDriver) payloadFile(payload, token string) string {
	if l.spec.Source == "" {
		return payload
	}
	if payload != "" && !strings.HasSuffix(payload, "\n") {
		payload += "\n"
	}
	return l.print(beginWord+" "+token) + "\n" + payload + l.print(endWord+" "+token) + "\n"
}

// check refuses a payload the driver cannot deliver whole and as it is: a
// payload typed line by line is bounded, and holds no control character
// but tab and newline (a ^Z typed into a terminal stops the tool, ^D ends
// it, ^C interrupts it) unless --pass-control-bytes; a \r right before a
// newline is dropped (a file saved with CRLF line ends).
func (l *lineDriver) check(payload string) error {
	if l.spec.Source != "" {
		return nil
	}
	if len(payload) > lineTypedMax {
		return fmt.Errorf("kind %s has no command that runs a file, so payloads are typed line by line, and this one is %d bytes (at most %d)",
			l.spec.Kind, len(payload), lineTypedMax)
	}
	if l.passControl {
		return nil
	}
	for i := 0; i < len(payload); i++ {
		c := payload[i]
		if c == '\r' && i+1 < len(payload) && payload[i+1] == '\n' {
			continue
		}
		if c != '\t' && c != '\n' && isControl(rune(c)) {
			return &controlByteError{kind: l.spec.Kind, c: c, off: i}
		}
	}
	return nil
}

// controlByteError is a line-typed payload holding a control character.
type controlByteError struct {
	kind string
	c    byte
	off  int
}

func (e *controlByteError) Error() string {
	return fmt.Sprintf("the payload holds the control character %s at byte %d; kind %s types payloads into the tool's terminal, where it would act on the tool (^Z stops it, ^D ends it, ^C interrupts it); remove it, or start the runner with --pass-control-bytes",
		byteName(e.c), e.off, e.kind)
}

// firstMatch is the first line of out that re matches ("" for none, or
// no re).
func firstMatch(re *regexp.Regexp, out []byte) string {
	if re == nil {
		return ""
	}
	for _, l := range bytes.Split(out, []byte{'\n'}) {
		if l = bytes.TrimRight(l, "\r"); re.Match(l) {
			return string(l)
		}
	}
	return ""
}

// stripPrompt returns text less the prompt at its end: the tool's current
// prompt as it printed it before the done line (learned, its digits any
// digits: numbered prompts), else what the driver's prompt pattern
// matches there.
func (l *lineDriver) stripPrompt(text []byte, learned *regexp.Regexp) []byte {
	for _, re := range []*regexp.Regexp{learned, l.prompt} {
		if re == nil {
			continue
		}
		if loc := re.FindIndex(text); loc != nil && loc[1] == len(text) {
			return text[:loc[0]]
		}
	}
	return text
}

// atPrompt reports whether tail, the last bytes the tool printed, ends
// with its prompt: the one learned, or what the prompt pattern matches.
func (l *lineDriver) atPrompt(tail []byte) bool {
	for _, re := range []*regexp.Regexp{l.learned, l.prompt} {
		if re != nil {
			if loc := re.FindIndex(tail); loc != nil && loc[1] == len(tail) {
				return true
			}
		}
	}
	return false
}

// promptShape is a pattern for a prompt the tool printed: the same text
// with any digits where it has digits (a numbered prompt, "innovus 12> "),
// anchored at the end of a text.
func promptShape(p []byte) *regexp.Regexp {
	expr := promptExpr(p)
	if expr == "" {
		return nil
	}
	return regexp.MustCompile(`(?:` + expr + `)$`)
}

// promptExpr is the pattern of promptShape, not anchored; "" for none.
func promptExpr(p []byte) string {
	// A prompt is learned only with a literal start (not digits): the
	// filter holds back what may still become one at every line start, and
	// a learned prompt starting with any digits would hold every number.
	if len(p) == 0 || len(p) > promptHold || (p[0] >= '0' && p[0] <= '9') || bytes.ContainsAny(p, "\n\r") {
		return ""
	}
	var b strings.Builder
	for i := 0; i < len(p); {
		if p[i] >= '0' && p[i] <= '9' {
			for i < len(p) && p[i] >= '0' && p[i] <= '9' {
				i++
			}
			b.WriteString("[0-9]+")
			continue
		}
		j := i
		for j < len(p) && !(p[j] >= '0' && p[j] <= '9') {
			j++
		}
		b.WriteString(regexp.QuoteMeta(string(p[i:j])))
		i = j
	}
	return b.String()
}

// promptHold bounds what promptFilter holds back at a line start.
const promptHold = 256

// promptFilter removes what a driver's prompt pattern matches at the
// start of a line from the tool's output before the framer sees it (the
// spool keeps every byte). At a line start it holds back bytes while they
// may still become a match (some match of a pattern starts with them:
// prefixOf), at most promptHold bytes; a line that cannot be a prompt
// passes through at once, so a question the tool asks without a newline
// is seen by an expect.
type promptFilter struct {
	pats    []promptPat
	held    []byte
	midLine bool
	out     []byte
}

// promptPat is one prompt pattern of a promptFilter: anchored at the
// start, and its compiled program, which tells whether bytes may still
// grow into a match (prefixOf).
type promptPat struct {
	re   *regexp.Regexp
	end  *regexp.Regexp // a match that ends where the text does
	prog *syntax.Prog
}

// newPromptPat compiles expr, which the driver's validation or the
// learned prompt's quoting has already accepted as RE2.
func newPromptPat(expr string) promptPat {
	re := regexp.MustCompile(`^(?:` + expr + `)`)
	parsed, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		panic(fmt.Sprintf("prompt %q: %v", expr, err)) // regexp.MustCompile accepted it.
	}
	prog, err := syntax.Compile(parsed.Simplify())
	if err != nil {
		panic(fmt.Sprintf("prompt %q: %v", expr, err))
	}
	return promptPat{re: re, end: regexp.MustCompile(`(?:` + expr + `)\z`), prog: prog}
}

// newPromptFilter filters the driver's prompt pattern (none when "").
func newPromptFilter(prompt string) *promptFilter {
	f := &promptFilter{}
	if prompt != "" {
		f.pats = append(f.pats, newPromptPat(prompt))
	}
	return f
}

// learn adds (or replaces) the prompt the runner learned from the tool
// (lineDriver.learn) beside the driver's own pattern.
func (p *promptFilter) learn(expr string, driverHas bool) {
	if driverHas && len(p.pats) > 0 {
		p.pats = append(p.pats[:1], newPromptPat(expr))
		return
	}
	p.pats = append(p.pats[:0], newPromptPat(expr))
}

// filter returns what of b (and of bytes held back before) is output. The
// returned slice is valid until the next call.
func (p *promptFilter) filter(b []byte) []byte {
	p.out = p.out[:0]
	for len(b) > 0 {
		if p.midLine {
			i := bytes.IndexByte(b, '\n')
			if i < 0 {
				p.out = append(p.out, b...)
				return p.out
			}
			p.out = append(p.out, b[:i+1]...)
			b = b[i+1:]
			p.midLine = false
			continue
		}
		p.held = append(p.held, b...)
		b = nil
		p.drain()
	}
	return p.out
}

// drain handles held bytes that start at a line start.
func (p *promptFilter) drain() {
	for len(p.held) > 0 {
		if n := p.match(p.held); n > 0 {
			p.held = p.held[n:]
			continue
		}
		if p.mayBecome(p.held) {
			return
		}
		i := bytes.IndexByte(p.held, '\n')
		if i < 0 {
			p.out = append(p.out, p.held...)
			p.held = p.held[:0]
			p.midLine = true
			return
		}
		p.out = append(p.out, p.held[:i+1]...)
		p.held = p.held[i+1:]
	}
	p.held = p.held[:0]
}

// match is the length of the longest prompt at the start of h (0: none).
func (p *promptFilter) match(h []byte) int {
	n := 0
	for _, pt := range p.pats {
		if loc := pt.re.FindIndex(h); loc != nil && loc[1] > n {
			n = loc[1]
		}
	}
	return n
}

// mayBecome reports whether h, at a line start, may still grow into a
// match of some pattern: it is short, and some match of the pattern starts
// with h. Yosys's prompt is an empty line and "yosys> ": after "\n(2) "
// (its nested shell's prompt, a question after an empty line) no more
// output can make one, so the line is output at once and an expect sees it.
func (p *promptFilter) mayBecome(h []byte) bool {
	if len(h) >= promptHold {
		return false
	}
	for _, pt := range p.pats {
		if prefixOf(pt.prog, h) {
			return true
		}
	}
	return false
}

// prefixOf reports whether some string that starts with h matches prog
// from h's start: prog's automaton, run over h, still has a thread that
// waits for more input. Zero-width assertions are taken as they hold
// inside h, and as holding at its end (what follows is not known yet).
// Bytes that are not (yet) whole UTF-8 at h's end may still become a
// rune: then h may grow into a match.
func prefixOf(prog *syntax.Prog, h []byte) bool {
	on := make([]bool, len(prog.Inst))
	// add puts pc on list, following the instructions that consume
	// nothing; a zero-width assertion holds when its flags are in ctx.
	var add func(list []uint32, pc uint32, ctx syntax.EmptyOp) []uint32
	add = func(list []uint32, pc uint32, ctx syntax.EmptyOp) []uint32 {
		if on[pc] {
			return list
		}
		on[pc] = true
		switch in := &prog.Inst[pc]; in.Op {
		case syntax.InstAlt, syntax.InstAltMatch:
			return add(add(list, in.Out, ctx), in.Arg, ctx)
		case syntax.InstCapture, syntax.InstNop:
			return add(list, in.Out, ctx)
		case syntax.InstEmptyWidth:
			if syntax.EmptyOp(in.Arg)&^ctx == 0 {
				return add(list, in.Out, ctx)
			}
		case syntax.InstRune, syntax.InstRune1, syntax.InstRuneAny, syntax.InstRuneAnyNotNL:
			return append(list, pc)
		}
		return list // A failed assertion, InstFail, or InstMatch (a match ending inside h is match's business).
	}
	// ctxAt is the zero-width context after the rune prev, before rest.
	ctxAt := func(prev rune, rest []byte) syntax.EmptyOp {
		if len(rest) == 0 || !utf8.FullRune(rest) {
			return ^syntax.EmptyOp(0) // What follows is not known yet.
		}
		r, _ := utf8.DecodeRune(rest)
		return syntax.EmptyOpContext(prev, r)
	}
	cur := add(nil, uint32(prog.Start), ctxAt(-1, h))
	var next []uint32
	for len(cur) > 0 && len(h) > 0 && utf8.FullRune(h) {
		r, n := utf8.DecodeRune(h)
		h = h[n:]
		ctx := ctxAt(r, h)
		clear(on)
		next = next[:0]
		for _, pc := range cur {
			in := &prog.Inst[pc]
			if in.Op == syntax.InstRuneAny || (in.Op == syntax.InstRuneAnyNotNL && r != '\n') ||
				((in.Op == syntax.InstRune || in.Op == syntax.InstRune1) && in.MatchRune(r)) {
				next = add(next, in.Out, ctx)
			}
		}
		cur, next = next, cur
	}
	return len(cur) > 0
}

// endsAt is where in b, the unfinished last line of a command's output, a
// prompt begins that ends where b does (len(b) if none): the tool printed
// its prompt after output without a newline, and the marker that will
// follow it on that line has not come yet. Only the last promptHold bytes
// are looked at.
func (p *promptFilter) endsAt(b []byte) int {
	off := max(len(b)-promptHold, 0)
	k := len(b)
	for _, pt := range p.pats {
		if loc := pt.end.FindIndex(b[off:]); loc != nil && loc[0] < loc[1] && off+loc[0] < k {
			k = off + loc[0]
		}
	}
	return k
}

// take returns and forgets what is held back (the tool ended; what it
// printed last is output, a prompt included).
func (p *promptFilter) take() []byte {
	h := bytes.Clone(p.held)
	p.held = p.held[:0]
	return h
}

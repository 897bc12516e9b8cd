package runner

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strings"

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
	// path. Without it a payload is typed line by line (at most
	// lineTypedMax bytes in all).
	Source string `json:"source,omitempty"`
	// Error, if set, is a regular expression (RE2): an output line of a
	// command matching it makes the command's status error, with that
	// line as error.message.
	Error string `json:"error,omitempty"`
	// Prompt, if set, is a regular expression (RE2) for what the tool
	// prints between commands (its prompt, a banner of its file command):
	// wherever it begins a line it is left out of commands' output.
	Prompt string `json:"prompt,omitempty"`
}

// lineTypedMax bounds a payload typed line by line (a driver without
// Source): with the two marker lines it stays under the terminal's
// 4096-byte input queue, so typing it never waits for the tool.
const lineTypedMax = 3072

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

// ParseDriver reads and checks a driver file's JSON. Unknown fields are
// refused: a misspelt "promt" must not pass silently.
func ParseDriver(b []byte) (*DriverSpec, error) {
	var d DriverSpec
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDriver, err)
	}
	bad := func(format string, a ...any) (*DriverSpec, error) {
		return nil, fmt.Errorf("%w: "+format, append([]any{ErrDriver}, a...)...)
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
	case strings.ContainsAny(d.Print+d.Source, "\n\r"):
		return bad("print and source are one line each")
	}
	for _, re := range []struct{ name, expr string }{{"error", d.Error}, {"prompt", d.Prompt}} {
		if re.expr == "" {
			continue
		}
		if _, err := regexp.Compile(re.expr); err != nil {
			return bad("%s: %v", re.name, err)
		}
	}
	return &d, nil
}

// lineDriver drives a tool described by a DriverSpec. It types, for a
// command, the line that prints the begin line, the payload (the line that
// sources its file, or its own lines) and the line that prints the done
// marker; the tool runs them in order. There are no helpers to type at
// start, no value, no return code and no fence: the status comes from the
// error pattern (running.scanError).
type lineDriver struct {
	spec  DriverSpec
	errRe *regexp.Regexp // nil: no error pattern
}

func newLineDriver(d *DriverSpec) *lineDriver {
	l := &lineDriver{spec: *d}
	if d.Error != "" {
		l.errRe = regexp.MustCompile(d.Error)
	}
	return l
}

func (l *lineDriver) print(text string) string { return strings.Replace(l.spec.Print, "{}", text, 1) }

func (l *lineDriver) bootstrap() string { return "" }

// run: with a file command, the begin line is printed by the file itself
// (payloadFile), so the tool runs two commands for a payload, not three,
// and what the file command prints about itself comes before the begin
// line, outside the output.
func (l *lineDriver) run(file, inline, prefix, token string, wrap bool) string {
	var lines []string
	switch {
	case l.spec.Source != "":
		lines = append(lines, strings.Replace(l.spec.Source, "{}", file, 1))
	default:
		lines = append(lines, l.print(beginWord+" "+token))
		if inline != "" {
			lines = append(lines, strings.Split(strings.TrimSuffix(inline, "\n"), "\n")...)
		}
	}
	if wrap {
		lines = append(lines, l.print(prefix+" "+token+" rc=0"))
	}
	return strings.Join(lines, "\n")
}

func (l *lineDriver) sync(prefix, token string) string {
	return l.print(prefix + " " + token + " rc=0")
}

func (l *lineDriver) fence(string) string { return "" }

// inlineMax: a driver with a file command always runs a file (0); one
// without types the payload.
func (l *lineDriver) inlineMax() int {
	if l.spec.Source != "" {
		return 0
	}
	return lineTypedMax
}

// payloadFile: a driver with a file command prints the begin line first
// thing in the file.
func (l *lineDriver) payloadFile(payload, token string) string {
	if l.spec.Source == "" {
		return payload
	}
	return l.print(beginWord+" "+token) + "\n" + payload
}

// check refuses a payload the driver cannot deliver whole.
func (l *lineDriver) check(payload string) error {
	if l.spec.Source == "" && len(payload) > lineTypedMax {
		return fmt.Errorf("kind %s has no command that runs a file, so payloads are typed line by line, and this one is %d bytes (at most %d)",
			l.spec.Kind, len(payload), lineTypedMax)
	}
	return nil
}

// promptHold bounds what promptFilter holds back at a line start.
const promptHold = 256

// promptFilter removes what a driver's prompt pattern matches at the
// start of a line from the tool's output before the framer sees it (the
// spool keeps every byte). At a line start it holds back bytes while they
// may still become a match (they start with, or are the start of, the
// pattern's literal prefix), at most promptHold bytes; a line that cannot
// be a prompt passes through at once, so a question the tool asks without
// a newline is seen by an expect.
type promptFilter struct {
	re      *regexp.Regexp // anchored at the start
	lit     []byte         // the pattern's literal prefix
	held    []byte
	midLine bool
	out     []byte
}

func newPromptFilter(prompt string) *promptFilter {
	lit, _ := regexp.MustCompile(prompt).LiteralPrefix()
	return &promptFilter{re: regexp.MustCompile(`^(?:` + prompt + `)`), lit: []byte(lit)}
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
		if loc := p.re.FindIndex(p.held); loc != nil && loc[1] > 0 {
			p.held = p.held[loc[1]:]
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

// mayBecome reports whether h, at a line start, may still grow into a
// match: it is short, agrees with the literal prefix, and the line after
// that prefix has not ended.
func (p *promptFilter) mayBecome(h []byte) bool {
	if len(h) >= promptHold {
		return false
	}
	if len(h) <= len(p.lit) {
		return bytes.HasPrefix(p.lit, h)
	}
	return bytes.HasPrefix(h, p.lit) && bytes.IndexByte(h[len(p.lit):], '\n') < 0
}

// take returns and forgets what is held back (the tool ended; what it
// printed last is output, a prompt included).
func (p *promptFilter) take() []byte {
	h := bytes.Clone(p.held)
	p.held = p.held[:0]
	return h
}

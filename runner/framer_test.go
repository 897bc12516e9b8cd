package runner

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/skillpilot/skillpilot/protocol"
)

// frameCommand feeds stream through a framer set up as the runner does for
// a runner_inject command: discard until the begin line, capture until the
// done line. It splits the stream at the given cut points.
func frameCommand(t testing.TB, stream []byte, token string, cuts []int) (out []byte, d done, found bool) {
	f := newFramer()
	f.discard(func(l []byte) bool { return isBegin(l, token) })
	begun := false
	var buf bytes.Buffer
	feed := func(b []byte) {
		for len(b) > 0 && !found {
			line, n := f.feed(b)
			b = b[n:]
			if line == nil {
				continue
			}
			if !begun {
				begun = true
				f.capture("__SP_DONE__", func(l []byte) bool {
					var ok bool
					d, ok = matchDone(l, "__SP_DONE__", token)
					return ok
				}, true, func(p []byte) { buf.Write(p) })
				continue
			}
			found = true
		}
	}
	prev := 0
	for _, c := range cuts {
		feed(stream[prev:c])
		prev = c
	}
	feed(stream[prev:])
	return buf.Bytes(), d, found
}

// wrapStream is what a tool prints around a command's output: a prompt and
// the begin line (tool line endings), then the output, then the newline
// the runner's helper prints before the done line. The helper prints with
// its own channel settings on a terminal without ONLCR, so that newline
// arrives as a bare "\n".
func wrapStream(output string) string {
	return "% \r\r\n__SP_BEGIN__ tok\r\r\n" + output + "\n__SP_DONE__ tok rc=0 v=NDI= vt=0\n% "
}

var framerCases = []struct {
	name, stream, want string
}{
	{"empty", wrapStream(""), ""},
	{"line", wrapStream("hello\r\r\n"), "hello\n"},
	{"no trailing newline", wrapStream("hello"), "hello"},
	{"blank lines kept", wrapStream("\r\n\r\na\r\n\r\n"), "\n\na\n\n"},
	{"lone CR kept", wrapStream("50%\r100%\r\n"), "50%\r100%\n"},
	{"other token is output", wrapStream("__SP_DONE__ other rc=0\r\n"), "__SP_DONE__ other rc=0\n"},
	{"indented marker is output", wrapStream("  __SP_DONE__ tok rc=0\r\n"), "  __SP_DONE__ tok rc=0\n"},
	{"prefix glued is output", wrapStream("__SP_DONE__tok rc=0\r\n"), "__SP_DONE__tok rc=0\n"},
	{"marker mid-line is output", wrapStream("x __SP_DONE__ tok rc=0\r\n"), "x __SP_DONE__ tok rc=0\n"},
	{"token prefix is output", wrapStream("__SP_DONE__ tok2 rc=0\r\n"), "__SP_DONE__ tok2 rc=0\n"},
	{"underscore start", wrapStream("_x\r\n__\r\n"), "_x\n__\n"},
	{"echo before begin ignored", "::__sp::src x __SP_DONE__ tok\r\n" + wrapStream("a\n"), "a\n"},
	{"prompt glued to begin", "% % \r\r\n__SP_BEGIN__ tok\r\r\nout\r\r\n\n__SP_DONE__ tok rc=0\n", "out\n"},
	{"trailing CR kept", wrapStream("abc\r"), "abc\r"},
	{"trailing CRs kept", wrapStream("abc\r\r"), "abc\r\r"},
	{"CRLF before the marker", wrapStream("abc\r\n"), "abc\n"},
	{"utf8", wrapStream("héllo → wörld\r\n"), "héllo → wörld\n"},
}

func TestFramer(t *testing.T) {
	t.Parallel()
	for _, tc := range framerCases {
		t.Run(tc.name, func(t *testing.T) {
			out, d, found := frameCommand(t, []byte(tc.stream), "tok", nil)
			if !found {
				t.Fatalf("marker not found in %q", tc.stream)
			}
			if string(out) != tc.want {
				t.Errorf("output = %q, want %q", out, tc.want)
			}
			if !d.hasRC || d.rc != 0 {
				t.Errorf("rc = %v %d, want 0", d.hasRC, d.rc)
			}
		})
	}
}

// Every way of splitting the stream into reads gives the same output.
func TestFramerSplitAnywhere(t *testing.T) {
	t.Parallel()
	for _, tc := range framerCases {
		s := []byte(tc.stream)
		for i := 0; i <= len(s); i++ {
			for _, j := range []int{i, min(i+1, len(s)), min(i+7, len(s)), len(s)} {
				out, _, found := frameCommand(t, s, "tok", []int{i, j})
				if !found || string(out) != tc.want {
					t.Fatalf("%s cut at %d,%d: found=%v out=%q want %q", tc.name, i, j, found, out, tc.want)
				}
			}
		}
	}
}

// A marker split over one-byte reads, after megabytes of output, is found,
// and the framer's held-back state stays small.
func TestFramerBoundedMemory(t *testing.T) {
	t.Parallel()
	body := strings.Repeat("0123456789abcdef_line\r\r\n", 200000) // ~4.8 MB
	stream := []byte(wrapStream(body))
	f := newFramer()
	f.discard(func(l []byte) bool { return isBegin(l, "tok") })
	var n int64
	found := false
	rng := rand.New(rand.NewPCG(1, 2))
	for b := stream; len(b) > 0 && !found; {
		k := min(len(b), 1+rng.IntN(5000))
		chunk := b[:k]
		b = b[k:]
		for len(chunk) > 0 && !found {
			line, used := f.feed(chunk)
			chunk = chunk[used:]
			if line == nil {
				continue
			}
			if isBegin(line, "tok") {
				f.capture("__SP_DONE__", func(l []byte) bool { _, ok := matchDone(l, "__SP_DONE__", "tok"); return ok },
					true, func(p []byte) { n += int64(len(p)) })
				continue
			}
			found = true
		}
		if cap(f.line) > maxMarkerLine+4096 {
			t.Fatalf("held-back line grew to %d bytes", cap(f.line))
		}
	}
	if !found {
		t.Fatal("marker not found")
	}
	if want := int64(len(strings.ReplaceAll(body, "\r", ""))); n != want {
		t.Fatalf("output %d bytes, want %d", n, want)
	}
}

func TestMatchDone(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		line string
		ok   bool
		rc   int
		val  string
	}{
		{"P tok", true, 0, ""},
		{"P tok rc=3", true, 3, ""},
		{"P tok rc=1 v=Ym9vbQ== vt=1", true, 1, "boom"},
		{"P tok rc=x", false, 0, ""},
		{"P tok v=!!", false, 0, ""},
		{"P tokx rc=0", false, 0, ""},
		{"Ptok rc=0", false, 0, ""},
		{"P  tok", false, 0, ""},
	} {
		d, ok := matchDone([]byte(tc.line), "P", "tok")
		if ok != tc.ok || (ok && (d.rc != tc.rc || string(d.value) != tc.val)) {
			t.Errorf("matchDone(%q) = %+v %v", tc.line, d, ok)
		}
	}
}

func FuzzFramer(f *testing.F) {
	for _, tc := range framerCases {
		f.Add([]byte(tc.stream), uint16(3))
	}
	f.Fuzz(func(t *testing.T, stream []byte, cut uint16) {
		c := int(cut) % (len(stream) + 1)
		whole, d1, f1 := frameCommand(t, stream, "tok", nil)
		split, d2, f2 := frameCommand(t, stream, "tok", []int{c})
		if f1 != f2 || !bytes.Equal(whole, split) || d1.rc != d2.rc {
			t.Fatalf("split at %d changed the result: %v %q / %v %q", c, f1, whole, f2, split)
		}
		if bytes.Contains(whole, []byte("__SP_BEGIN__ tok\n")) && f1 {
			// The begin line itself never reaches the output.
			if bytes.HasPrefix(whole, []byte("__SP_BEGIN__ tok\n")) {
				t.Fatalf("begin line leaked: %q", whole)
			}
		}
	})
}

// After an interrupt the framer holds the unfinished last line back: when
// the runner's sync marker follows, it was the tool's prompt and is
// dropped; when the command's own done marker follows, it was output.
func TestFramerHoldsPromptAfterInterrupt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, after, marker, want string
		drop                      bool
	}{
		{"prompt before sync", "ack\nbash-5.2# ", "__SP_DONE__ sync-1 rc=0", "line1\nPath 7: slack\n", true},
		{"output before done", "ack\npartial", "__SP_DONE__ tok rc=1", "line1\nPath 7: slack\npartial", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			f := newFramer()
			f.capture("__SP_DONE__", func(l []byte) bool {
				return string(l) == "__SP_DONE__ sync-1 rc=0" || string(l) == "__SP_DONE__ tok rc=1"
			}, true, func(p []byte) { out.Write(p) })
			f.feed([]byte("line1\nPath 7: sl"))
			f.hold = true
			stream := []byte(tc.after + "\n" + tc.marker + "\n")
			for len(stream) > 0 {
				line, n := f.feed(stream)
				stream = stream[n:]
				if line != nil {
					if tc.drop {
						f.held = f.held[:0]
					} else {
						f.releaseHeld()
					}
					f.finish()
					break
				}
			}
			if out.String() != tc.want {
				t.Fatalf("output %q, want %q", out.String(), tc.want)
			}
		})
	}
}

// A line driver's unfinished line is output at the flush (releasePartial),
// less what may still become a marker and less a prompt that ends it: a
// tool that printed "abc" and then its prompt, the end marker not yet
// come (a loaded host: ngspice once), must not have the prompt in the
// output. A question without a newline is output whole.
func TestReleasePartialKeepsPrompt(t *testing.T) {
	t.Parallel()
	ngspice, _ := Preset("ngspice")
	cases := []struct {
		name, learned string
		pieces        []string // each fed, then the flush
		want          string   // output after them
		quiet         string   // output once the tool was quiet for promptRelease
	}{
		{"output, then the prompt", "", []string{"abc", "ngspice 4 -> "}, "abc", "abcngspice 4 -> "},
		{"output and prompt in one piece", "", []string{"abcngspice 12 -> "}, "abc", "abcngspice 12 -> "},
		{"the prompt alone (the filter's, at a line start)", "", []string{"ngspice 4 -> "}, "", ""},
		{"a question", "", []string{"Overwrite? (y/n) "}, "Overwrite? (y/n) ", "Overwrite? (y/n) "},
		{"prompt text before more output", "", []string{"abcngspice 4 -> more"}, "abcngspice 4 -> more", "abcngspice 4 -> more"},
		{"a marker's start", "", []string{"50% __SP"}, "50% ", "50% "},
		{"the learned prompt", "innovus 7> ", []string{"x", "innovus 8> "}, "x", "xinnovus 8> "},
		{"a question ending with the prompt's text", "", []string{"Continue ngspice 4 -> "}, "Continue ", "Continue ngspice 4 -> "},
	}
	for _, c := range cases {
		f := newFramer()
		f.prompts = newPromptFilter(ngspice.Prompt)
		if c.learned != "" {
			f.prompts.learn(promptExpr([]byte(c.learned)), true)
		}
		f.anywhere = true
		f.markerStarts(protocol.DefaultMarkerPrefix)
		var out []byte
		f.capture(protocol.DefaultMarkerPrefix, func(l []byte) bool { return bytes.HasPrefix(l, []byte("__SP_DONE__ t ")) }, false,
			func(b []byte) { out = append(out, b...) })
		for _, p := range c.pieces {
			for b := f.unprompt([]byte(p)); len(b) > 0; {
				_, n := f.feed(b)
				b = b[n:]
			}
			f.releasePartial(true)
		}
		if string(out) != c.want {
			t.Errorf("%s: %q output at the flush, want %q", c.name, out, c.want)
		}
		// Quiet for promptRelease: the prompt's text is output too, so
		// that nothing waits for ever behind it.
		f.releasePartial(false)
		if string(out) != c.quiet {
			t.Errorf("%s: %q output once the tool was quiet, want %q", c.name, out, c.quiet)
		}
	}
}

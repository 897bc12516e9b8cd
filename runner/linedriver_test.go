package runner

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

// feedSplit runs in through a fresh filter of prompt in pieces of n bytes.
func feedSplit(prompt string, in []byte, n int) []byte {
	f := newPromptFilter(prompt)
	var out []byte
	for i := 0; i < len(in); i += n {
		out = append(out, f.filter(in[i:min(i+n, len(in))])...)
	}
	return append(out, f.take()...)
}

func TestPromptFilter(t *testing.T) {
	t.Parallel()
	yosys, _ := Preset("yosys")
	ngspice, _ := Preset("ngspice")
	cases := []struct {
		name, prompt, in, want string
	}{
		{"yosys command", yosys.Prompt,
			"__SP_BEGIN__ t\n\nyosys> \n-- Executing script file `/s/p' --\nhello\nxbad\n\nyosys> __SP_DONE__ t rc=0\n\nyosys> ",
			"__SP_BEGIN__ t\nhello\nxbad\n__SP_DONE__ t rc=0\n"},
		{"ngspice command", ngspice.Prompt,
			"__SP_BEGIN__ t\nngspice 12 -> hi\nngspice 13 -> __SP_DONE__ t rc=0\nngspice 14 -> ",
			"__SP_BEGIN__ t\nhi\n__SP_DONE__ t rc=0\n"},
		{"prompt text mid-line is output", ngspice.Prompt, "a ngspice 3 -> b\n", "a ngspice 3 -> b\n"},
		{"a question without newline passes", ngspice.Prompt, "Overwrite? (y/n) ", "Overwrite? (y/n) "},
		{"almost a prompt", ngspice.Prompt, "ngspice x -> y\n", "ngspice x -> y\n"},
		{"nothing to strip", "", "a\nb", "a\nb"},
	}
	for _, c := range cases {
		if c.prompt == "" {
			continue
		}
		for _, n := range []int{1, 2, 3, 7, 1 << 20} {
			if got := feedSplit(c.prompt, []byte(c.in), n); string(got) != c.want {
				t.Errorf("%s, pieces of %d: %q, want %q", c.name, n, got, c.want)
			}
		}
	}
	// A question is seen at once, before any newline.
	f := newPromptFilter(ngspice.Prompt)
	if got := f.filter([]byte("Continue? ")); string(got) != "Continue? " {
		t.Fatalf("a partial line that cannot be a prompt was held: %q", got)
	}
}

// FuzzPromptFilter: how output is cut into chunks never changes what the
// filter gives, and a stream without the prompt's text passes unchanged.
func FuzzPromptFilter(f *testing.F) {
	f.Add([]byte("ngspice 1 -> a\nb\nngspice 2 -> "), uint8(3))
	f.Add([]byte("\n\nyosys> x\n"), uint8(1))
	yosys, _ := Preset("yosys")
	ngspice, _ := Preset("ngspice")
	f.Fuzz(func(t *testing.T, in []byte, n uint8) {
		for _, p := range []string{yosys.Prompt, ngspice.Prompt} {
			whole := feedSplit(p, in, len(in)+1)
			if got := feedSplit(p, in, int(n%16)+1); !bytes.Equal(got, whole) {
				t.Fatalf("prompt %q, pieces of %d: %q, whole: %q", p, n%16+1, got, whole)
			}
		}
		if !bytes.Contains(in, []byte("ngspice")) {
			if got := feedSplit(ngspice.Prompt, in, int(n%16)+1); !bytes.Equal(got, in) {
				t.Fatalf("%q changed to %q", in, got)
			}
		}
	})
}

func TestParseDriver(t *testing.T) {
	t.Parallel()
	for _, k := range Presets() {
		if _, ok := Preset(k); !ok {
			t.Fatalf("preset %s does not load", k)
		}
	}
	bad := map[string]string{
		`{"kind":"x","print":"p {}","promt":"> "}`: "unknown field",
		`{"kind":"tcl","print":"p {}"}`:            "built in",
		`{"kind":"Bad Kind","print":"p {}"}`:       "not 1-32",
		`{"kind":"x","print":"p"}`:                 "print must hold {}",
		`{"kind":"x","print":"p {}","source":"s"}`: "source must hold {}",
		`{"kind":"x","print":"p {}","error":"("}`:  "error:",
		`{"kind":"x","print":"p {}\n{}"}`:          "print must hold {} once",
		`not json`:                                 "invalid",
	}
	for in, want := range bad {
		_, err := ParseDriver([]byte(in))
		if err == nil || !errors.Is(err, ErrDriver) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an ErrDriver saying %q", in, err, want)
		}
	}
	d, err := ParseDriver([]byte(`{"kind":"mytool","print":"say {}","source":"run {}"}`))
	if err != nil {
		t.Fatal(err)
	}
	l := newLineDriver(d)
	if got := l.run("/s/f", "", "__SP_DONE__", "tok", true); got != "run /s/f\nsay __SP_DONE__ tok rc=0" {
		t.Fatalf("run: %q", got)
	}
	if got := l.payloadFile("a\nb", "tok"); got != "say __SP_BEGIN__ tok\na\nb" {
		t.Fatalf("run: %q", got)
	}
	if l.bootstrap() != "" || l.fence("tok") != "" || l.inlineMax() != 0 || l.check(strings.Repeat("x", 1<<20)) != nil {
		t.Fatal("a driver with a file command types no helpers, no fence, and runs any payload from its file")
	}
	typed := newLineDriver(&DriverSpec{Kind: "t", Print: "say {}"})
	if got := typed.run("", "a\nb\n", "__SP_DONE__", "tok", true); got != "say __SP_BEGIN__ tok\na\nb\nsay __SP_DONE__ tok rc=0" {
		t.Fatalf("typed run: %q", got)
	}
	if typed.check(strings.Repeat("x", lineTypedMax+1)) == nil || typed.check(strings.Repeat("x", lineTypedMax)) != nil {
		t.Fatal("a typed payload is bounded by lineTypedMax")
	}
}

// TestBootWatch: the start-up verdicts on a fake clock.
func TestBootWatch(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }

	// Silent since its start: still starting, whatever the time.
	w := newBootWatch(t0)
	if v := w.verdict(at(time.Hour)); v != bootWait {
		t.Fatalf("silent tool: %v, want wait", v)
	}
	// Nothing to judge until it prints: no timer in the past (the owner
	// loop would wake at once, for ever: a busy loop that starved the
	// tool under load).
	if n := w.next(); !n.IsZero() {
		t.Fatalf("a silent tool's watch is due at %v, want never until it prints", n)
	}
	// A whole line, then silence: still starting.
	w.output([]byte("checking out a licence\n"), at(time.Second))
	if v := w.verdict(at(time.Hour)); v != bootWait {
		t.Fatalf("after a whole line: %v, want wait", v)
	}
	if n := w.next(); !n.IsZero() {
		t.Fatalf("after a whole line the watch is due at %v, want never until it prints", n)
	}
	// Progress without a newline after the typing: still starting.
	w = newBootWatch(t0)
	w.output([]byte("loading"), at(time.Second))
	w.output([]byte("."), at(2*time.Second))
	w.output([]byte("."), at(3*time.Second))
	if v := w.verdict(at(time.Hour)); v != bootWait {
		t.Fatalf("progress dots: %v, want wait", v)
	}

	// A prompt after the banner (Magic, which dropped the first typing):
	// typed again; then errors at the prompt, round after round, until
	// it counts as rejected.
	w = newBootWatch(t0)
	w.output([]byte("Magic 8.3\n% "), at(100*time.Millisecond))
	if v := w.verdict(at(100*time.Millisecond + bootQuiet - 1)); v != bootWait {
		t.Fatalf("before the quiet gap: %v, want wait", v)
	}
	now := at(100*time.Millisecond + bootQuiet)
	for round := 1; round < bootRounds; round++ {
		if v := w.verdict(now); v != bootRetype {
			t.Fatalf("round %d: %v, want retype", round, v)
		}
		w.typed(now)
		now = now.Add(10 * time.Millisecond)
		w.output([]byte("invalid command name \"::__sp::sync\"\n% "), now)
		now = now.Add(w.quietFor())
	}
	if v := w.verdict(now); v != bootRejected {
		t.Fatalf("after %d rounds: %v, want rejected", bootRounds, v)
	}
	if q := w.quote(); !strings.Contains(q, `invalid command name \"::__sp::sync\"`) && !strings.Contains(q, `invalid command name "::__sp::sync"`) {
		t.Fatalf("quote %q lacks the tool's line", q)
	}

	// Silent at its prompt after the typing: a round each quiet gap.
	w = newBootWatch(t0)
	w.output([]byte("> "), at(0))
	if v := w.verdict(at(bootQuiet)); v != bootRetype {
		t.Fatalf("silent at a prompt: %v, want retype", v)
	}
}

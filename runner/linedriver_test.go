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
		// Yosys's prompt is an empty line and "yosys> ": its nested shell's
		// "(2) yosys> " after an empty line is output, and so is a
		// question after one.
		{"yosys nested shell", yosys.Prompt, "before\n\n(2) yosys> ", "before\n\n(2) yosys> "},
		{"a question after an empty line", yosys.Prompt, "\nOverwrite? ", "\nOverwrite? "},
		// Yosys's prompt with a module selected (cd), and with a partial
		// selection: prompts too.
		{"yosys module prompt", yosys.Prompt, "a\n\nyosys [top]> b\n\nyosys [top]*> c\n\nyosys*> ", "a\nb\nc\n"},
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
	// A question is seen at once, before any newline, also after an empty
	// line where the prompt is an empty line and a word.
	for prompt, q := range map[string]string{ngspice.Prompt: "Continue? ", yosys.Prompt: "\n(2) yosys> "} {
		f := newPromptFilter(prompt)
		if got := f.filter([]byte(q)); string(got) != q {
			t.Fatalf("prompt %q: a partial line that cannot be a prompt was held: %q", prompt, got)
		}
	}
}

// prefixOf tells bytes that may still grow into a match of a prompt from
// bytes that cannot.
func TestPrefixOf(t *testing.T) {
	t.Parallel()
	yosys, _ := Preset("yosys")
	ngspice, _ := Preset("ngspice")
	cases := []struct {
		prompt, h string
		want      bool
	}{
		{yosys.Prompt, "", true},
		{yosys.Prompt, "\n", true},
		{yosys.Prompt, "\nyos", true},
		{yosys.Prompt, "\n-- Executing script file `/a b", true},
		{yosys.Prompt, "\n-- Executing script file `/a' --", true},
		{yosys.Prompt, "\n(", false},
		{yosys.Prompt, "\n(2) yosys> ", false},
		{yosys.Prompt, "\nyosys>x", false},
		{yosys.Prompt, "x", false},
		{ngspice.Prompt, "ngspice ", true},
		{ngspice.Prompt, "ngspice 12", true},
		{ngspice.Prompt, "ngspice 12 -", true},
		{ngspice.Prompt, "ngspice x", false},
		{ngspice.Prompt, "ngspice 1 -> ", false}, // A whole match: match takes it, nothing waits for more.
		{`(?i)innovus [0-9]+> `, "INNO", true},
		{`x\by`, "x", true}, // \b cannot hold between x and y, but what follows x is not known yet.
		{`x\by`, "xy", false},
		{`^> `, ">", true},
		{`é> `, "\xc3", true}, // The start of é.
		{`é> `, "\xc3\xa8", false},
		{`.*\$ `, "any text", true},
		{`.*\$ `, "a line\nand more", false},
	}
	for _, c := range cases {
		if got := prefixOf(newPromptPat(c.prompt).prog, []byte(c.h)); got != c.want {
			t.Errorf("prompt %q, %q: %v, want %v", c.prompt, c.h, got, c.want)
		}
	}
}

// FuzzPrefixOf: every prefix of a prompt the pattern matches may still
// become one (a prompt held back too little would leak into output).
func FuzzPrefixOf(f *testing.F) {
	yosys, _ := Preset("yosys")
	ngspice, _ := Preset("ngspice")
	pats := []string{yosys.Prompt, ngspice.Prompt, `(?i)innovus [0-9]+> `, `\w+ \d+> `, `[^\n]*% `, `(\(\d+\) )?yosys> `,
		`(?m)^\w+\b> `, `x\by`, `(?i)é+> `, `\B-+\$ `, `a$|b> `}
	f.Add([]byte("\nyosys> "), uint8(0))
	f.Add([]byte("ngspice 12 -> "), uint8(1))
	f.Add([]byte("Innovus 7> "), uint8(2))
	f.Add([]byte("ÉÉé> "), uint8(8))
	f.Add([]byte("x--$ "), uint8(9))
	f.Fuzz(func(t *testing.T, in []byte, k uint8) {
		pt := newPromptPat(pats[int(k)%len(pats)])
		m := pt.re.Find(in)
		if m == nil {
			return
		}
		for i := 0; i < len(m); i++ {
			if !prefixOf(pt.prog, m[:i]) {
				t.Fatalf("pattern %q matches %q, but its prefix %q is taken as unable to become a match", pats[int(k)%len(pats)], m, m[:i])
			}
		}
	})
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
		`{"kind":"x","print":"p {}","promt":"> "}`:                                 "unknown field",
		`{"kind":"tcl","print":"p {}"}`:                                            "built in",
		`{"kind":"Bad Kind","print":"p {}"}`:                                       "not 1-32",
		`{"kind":"x","print":"p"}`:                                                 "print must hold {}",
		`{"kind":"x","print":"p {}","source":"s"}`:                                 "source must hold {}",
		`{"kind":"x","print":"p {}","error":"("}`:                                  "error:",
		`{"kind":"x","print":"p {}\n{}"}`:                                          "print must hold {} once",
		`not json`:                                                                 "invalid",
		`{"kind":"x","print":"p {}"} trailing`:                                     "more than one JSON object",
		`{"kind":"x","print":"p {}"}{"kind":"y","print":"q {}"}`:                   "more than one JSON object",
		`{"kind":"x","print":"p {}\u0003"}`:                                        "control character 0x03 (^C)",
		`{"kind":"x","print":"p {}","source":"s {}\u001a"}`:                        "control character 0x1a (^Z)",
		`{"kind":"x","print":"p {}","prompt":".*"}`:                                "matches an empty line",
		`{"kind":"x","print":"p {}","prompt":"_+SP"}`:                              "matches the runner's own marker line",
		`{"kind":"x","print":"p {}","error":"__SP_"}`:                              "matches the runner's own marker line",
		`{"kind":"x","print":"p {}","error":"x*"}`:                                 "matches an empty line",
		`{"kind":"x","print":"p {}","quote":"perl"}`:                               "quote",
		`{"kind":"x","print":"p {}","stops_at_error":true}`:                        "needs source",
		`{"kind":"x","print":"` + strings.Repeat("x", 300) + ` {}"}`:               "at most 256",
		`{"kind":"x","print":"p {}","prompt":"` + strings.Repeat("a", 1100) + `"}`: "at most 1024",
	}
	for in, want := range bad {
		_, err := ParseDriver([]byte(in))
		if err == nil || !errors.Is(err, ErrDriver) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an ErrDriver saying %q", in, err, want)
		}
	}
	if _, err := ParseDriver(append([]byte(`{"kind":"x","print":"p {}"}`), make([]byte, maxDriverFile)...)); err == nil {
		t.Error("a driver file over the size bound was accepted")
	}
	d, err := ParseDriver([]byte(`{"kind":"mytool","print":"say {}","source":"run {}"}` + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	l := newLineDriver(d)
	if got := l.run("/s/f", "", "__SP_DONE__", "tok", "", true); got != "run /s/f\nsay __SP_DONE__ tok rc=0" {
		t.Fatalf("run: %q", got)
	}
	if got := l.payloadFile("a\nb", "tok"); got != "say __SP_BEGIN__ tok\na\nb\nsay __SP_END__ tok\n" {
		t.Fatalf("payload file: %q", got)
	}
	if l.bootstrap() != "" || l.fence("tok") != "" || l.inlineMax() != 0 || l.check(strings.Repeat("x\x1a", 1<<20)) != nil {
		t.Fatal("a driver with a file command types no helpers, no fence, and runs any payload from its file")
	}
	typed := newLineDriver(&DriverSpec{Kind: "t", Print: "say {}", BlankLine: true})
	if got := typed.run("", "a\r\nb\n", "__SP_DONE__", "tok", "", true); got != "say __SP_BEGIN__ tok\na\nb\n\nsay __SP_END__ tok\nsay __SP_DONE__ tok rc=0" {
		t.Fatalf("typed run: %q", got)
	}
	if typed.check(strings.Repeat("x", lineTypedMax+1)) == nil || typed.check(strings.Repeat("x", lineTypedMax)) != nil {
		t.Fatal("a typed payload is bounded by lineTypedMax")
	}
	for payload, want := range map[string]string{
		"tran 1n 1m\x1a\n": "0x1a (^Z) at byte 10",
		"a\x04":            "0x04 (^D) at byte 1",
		"a\rb":             "0x0d (^M) at byte 1",
		"\x7f":             "0x7f (DEL) at byte 0",
	} {
		if err := typed.check(payload); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("payload %q: %v, want a refusal naming %s", payload, err, want)
		}
	}
	if err := typed.check("a\tb\r\nc\n"); err != nil {
		t.Errorf("tabs and CRLF line ends are refused: %v", err)
	}
	typed.passControl = true
	if err := typed.check("a\x1a"); err != nil {
		t.Errorf("--pass-control-bytes: %v", err)
	}
}

// TestDriverQuote: the path typed for a driver's source is quoted by the
// rule it names, and with none, a path a shell language would split is
// never typed as it is.
func TestDriverQuote(t *testing.T) {
	t.Parallel()
	const path = "/p/s;touch X;x/it's \"a\" $b.payload"
	for quote, want := range map[string]string{
		"sh":  `run '/p/s;touch X;x/it'\''s "a" $b.payload'`,
		"tcl": `run "/p/s\;touch X\;x/it's \"a\" \$b.payload"`,
		"c":   `run "/p/s;touch X;x/it's \"a\" $b.payload"`,
		"":    `run /proc/1/fd/3/inflight/f.payload`,
	} {
		l := newLineDriver(&DriverSpec{Kind: "t", Print: "say {}", Source: "run {}", Quote: quote})
		l.alias = func(string) string { return "/proc/1/fd/3/inflight/f.payload" }
		if got, _, _ := strings.Cut(l.run(path, "", "__SP_DONE__", "tok", "", true), "\n"); got != want {
			t.Errorf("quote %q: %s, want %s", quote, got, want)
		}
	}
	l := newLineDriver(&DriverSpec{Kind: "t", Print: "say {}", Source: "run {}"})
	l.alias = func(string) string { t.Fatal("a plain path was aliased"); return "" }
	if got, _, _ := strings.Cut(l.run("/proj/run_1/sp/inflight/cmd_1_a.json.payload", "", "__SP_DONE__", "tok", "", true), "\n"); got != "run /proj/run_1/sp/inflight/cmd_1_a.json.payload" {
		t.Errorf("a plain path: %s", got)
	}
}

// TestBootWatch: the start-up verdicts on a fake clock, as PROTOCOL.md
// 11.1 states them. Each case is a script of what the tool prints
// ("out TEXT"), the runner typing the start-up again when the verdict says
// so, and the verdicts expected at the end of each quiet gap.
func TestBootWatch(t *testing.T) {
	t.Parallel()
	type step struct {
		out    string // printed, in writes separated by |, then a quiet gap
		typing bool   // the typist still holds typed lines
		want   bootVerdict
	}
	errs := "invalid command name \"::__sp::sync\"\n% "
	for _, c := range []struct {
		name  string
		steps []step
	}{
		{"silent since its start: still starting", []step{{"", false, bootWait}}},
		{"a whole line, then silence: still starting", []step{{"checking out a licence\n", false, bootWait}}},
		{"progress dots (one line, bit by bit): still starting", []step{{"loading|.|.", false, bootWait}}},
		{"Magic: a banner and a prompt after the typing: typed again, not a rejection",
			[]step{{"Magic 8.3\n% ", false, bootRetype}, {"% ", false, bootRetype}, {"% ", false, bootRetype}, {"% ", false, bootRetype}, {"% ", false, bootRetype}}},
		{"errors at the prompt, round after round: rejected",
			[]step{{errs, false, bootRetype}, {errs, false, bootRetype}, {errs, false, bootRetype}, {errs, false, bootRejected}}},
		{"a licence checkout without a newline, then silence: typed again once, then waits",
			[]step{{"Checking out license FAKE_EDA...", false, bootRetype}, {"", false, bootWait}, {"", false, bootWait}, {"", false, bootWait}, {"", false, bootWait}}},
		{"a licence, then the banner and a prompt: never a rejection",
			[]step{{"Checking out license FAKE_EDA...", false, bootRetype}, {" done\nFAKE_EDA 1.0\nfake> ", false, bootRetype}, {"fake> ", false, bootRetype}, {"fake> ", false, bootRetype}, {"fake> ", false, bootRetype}}},
		{"at a prompt while typed lines wait for the terminal: nothing typed", []step{{"% ", true, bootWait}}},
		{"lines that name no error, then a prompt: typed again, never rejected",
			[]step{{"hello\n> ", false, bootRetype}, {"hello\n> ", false, bootRetype}, {"hello\n> ", false, bootRetype}, {"hello\n> ", false, bootRetype}, {"hello\n> ", false, bootRetype}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			now := time.Unix(1000, 0)
			w := newBootWatch(now)
			for i, s := range c.steps {
				for _, o := range strings.Split(s.out, "|") {
					now = now.Add(10 * time.Millisecond)
					w.output([]byte(o), now)
				}
				if v := w.verdict(now.Add(w.quietFor()-time.Nanosecond), s.typing); v != bootWait {
					t.Fatalf("step %d before the quiet gap: %v, want wait", i, v)
				}
				now = now.Add(w.quietFor())
				v := w.verdict(now, s.typing)
				if v != s.want {
					t.Fatalf("step %d (%q): %v, want %v", i, s.out, v, s.want)
				}
				if v == bootWait {
					// Nothing to judge until it prints: no timer in the
					// past (the owner loop would wake at once, for ever:
					// a busy loop that starved the tool under load).
					if n := w.next(); !n.IsZero() {
						t.Fatalf("step %d: waiting, yet due at %v: want never until the tool prints", i, n)
					}
				}
				if v == bootRetype {
					w.typed(now)
				}
			}
		})
	}
	w := newBootWatch(time.Unix(1000, 0))
	w.output([]byte("invalid command name \"::__sp::sync\"\n"+strings.Repeat(" ", 500)+"^\n% "), time.Unix(1000, 0))
	if q := w.quote(); !strings.Contains(q, `invalid command name "::__sp::sync" | ^ | %`) {
		t.Fatalf("quote %q: want the tool's lines, a run of spaces made one", q)
	}
}

// TestLocaleUTF8: the locale the runner gives the tool, read as a C
// library reads it (LC_ALL, then LC_CTYPE, then LANG; the first set wins).
func TestLocaleUTF8(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		env  []string
		want bool
	}{
		{[]string{"LANG=C.UTF-8"}, true},
		{[]string{"LANG=en_US.utf8"}, true},
		{[]string{"LANG=C.UTF-8", "LC_CTYPE=C"}, false},
		{[]string{"LANG=C", "LC_CTYPE=de_DE.UTF-8"}, true},
		{[]string{"LC_ALL=C", "LC_CTYPE=de_DE.UTF-8", "LANG=C.UTF-8"}, false},
		{[]string{"LC_ALL=", "LANG=C.UTF-8"}, true},
		{[]string{"LANG=C"}, false},
		{nil, false},
	} {
		if got := localeUTF8(c.env); got != c.want {
			t.Errorf("%q: %v, want %v", c.env, got, c.want)
		}
	}
}

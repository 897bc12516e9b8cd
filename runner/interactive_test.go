package runner

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/skillpilot/skillpilot/protocol"
)

// Answering prompts on real tools and real PTYs: tclsh, bash and the Expect-based
// fake EDA tool answer their prompts through send requests.

// Tcl `gets stdin` in a payload is answered by a send.
func TestInteractiveTclGets(t *testing.T) {
	t.Parallel()
	h := newHarness(t).start()
	a := h.submit(`puts -nonewline "name? "; flush stdout; gets stdin x; puts "hello $x"; set x`)
	r := h.reply(h.send(1, "c1", "world\n", map[string]any{"expect": `name\? $`}))
	if r.Outcome != protocol.OutcomeDelivered || *r.MatchStart != 0 || *r.MatchEnd != 6 || *r.OutputOffset != 6 {
		t.Fatalf("%+v", r)
	}
	res := h.result(a)
	if res.Status != protocol.StatusOK || *res.Value != "world" || h.output(a) != "name? hello world\n" {
		t.Fatalf("%+v %q", res, h.output(a))
	}
}

// "Overwrite? (y/n) " answered by send --expect, and a tool that asks
// twice: each answer waits for its own prompt (the expect cursor moves
// past the first match).
func TestInteractiveOverwriteAskedTwice(t *testing.T) {
	t.Parallel()
	h := newHarness(t).start()
	a := h.submit(`foreach f {a.v b.v} {puts -nonewline "File $f exists. Overwrite? (y/n) "; flush stdout; gets stdin ans; puts "$f: $ans"}`)
	var replies []protocol.ControlReply
	for i, ans := range []string{"y\n", "n\n"} {
		replies = append(replies, h.reply(h.send(int64(i+1), "c1", ans, map[string]any{"expect": `Overwrite\? \(y/n\) `})))
	}
	h.result(a)
	want := "File a.v exists. Overwrite? (y/n) a.v: y\nFile b.v exists. Overwrite? (y/n) b.v: n\n"
	if got := h.output(a); got != want {
		t.Fatalf("output %q, want %q", got, want)
	}
	second := int64(strings.Index(want, "File b.v"))
	if *replies[0].MatchEnd > second || *replies[1].MatchStart < second {
		t.Errorf("matches %d-%d and %d-%d: the second send must answer the second prompt",
			*replies[0].MatchStart, *replies[0].MatchEnd, *replies[1].MatchStart, *replies[1].MatchEnd)
	}
}

// A password prompt with echo off (`stty -echo; read`, kind sh) answered
// with a secret: afterwards nothing of the secret — its bytes, its base64,
// its sha256 — is in any file of the session.
func TestInteractiveSecretLeavesNoTrace(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.Kind = protocol.KindSh }).start()
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	secret := "Pw-" + hex.EncodeToString(rnd[:])
	a := h.submit(`printf 'Password: '; stty -echo; IFS= read -r pw; echo; echo "got ${#pw} characters"; case $pw in Pw-*) echo "looks right";; esac`)
	r := h.reply(h.send(1, "c1", secret+"\n", map[string]any{"secret": true, "expect": "Password: "}))
	if r.Outcome != protocol.OutcomeDelivered || r.SHA256 != "" || *r.Bytes != int64(len(secret)+1) {
		t.Fatalf("%+v", r)
	}
	h.result(a)
	if got, want := h.output(a), fmt.Sprintf("Password: \ngot %d characters\nlooks right\n", len(secret)); got != want {
		t.Fatalf("output %q, want %q", got, want)
	}
	h.stop(protocol.StopGraceful)
	sum := sha256.Sum256([]byte(secret + "\n"))
	sum2 := sha256.Sum256([]byte(secret))
	needles := [][]byte{[]byte(secret), []byte(base64.StdEncoding.EncodeToString([]byte(secret + "\n"))),
		[]byte(hex.EncodeToString(sum[:])), []byte(hex.EncodeToString(sum2[:])), []byte(secret[3:11])}
	grepSession(t, h.dir, needles)
}

// grepSession fails if any file under dir contains one of needles.
func grepSession(t *testing.T, dir string, needles [][]byte) {
	t.Helper()
	files := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // A temporary file the runner renamed meanwhile.
		}
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		files++
		b, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, n := range needles {
			if bytes.Contains(b, n) {
				t.Errorf("%s contains %q", p, n)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 5 {
		t.Fatalf("only %d files searched", files)
	}
}

// A secret is refused while the payload has turned the terminal's echo on.
func TestInteractiveSecretRefusedWhileEchoOn(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.Kind = protocol.KindSh }).start()
	a := h.submit(`stty echo; printf 'Password: '; IFS= read -r pw; stty -echo; echo "read ${#pw}"`)
	r := h.reply(h.send(1, "c1", "S3cret-on-screen\n", map[string]any{"secret": true, "expect": "Password: "}))
	if r.Outcome != protocol.OutcomeRefusedEcho {
		t.Fatalf("%+v", r)
	}
	h.reply(h.send(2, "c1", "plain\n", nil))
	h.result(a)
	grepSession(t, h.dir, [][]byte{[]byte("S3cret-on-screen")})
}

// The terminal's echo of typed input (a payload turned echo on) is left
// out of the command's output and kept in the spool.
func TestInteractiveEchoOnOutput(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.Kind = protocol.KindSh }).start()
	a := h.submit(`stty echo; printf 'name: '; IFS= read -r n; stty -echo; echo "hi $n"`)
	h.reply(h.send(1, "c1", "bob\n", map[string]any{"expect": "name: "}))
	h.result(a)
	if got := h.output(a); got != "name: hi bob\n" {
		t.Errorf("output %q, want the echo left out", got)
	}
	spool, _ := os.ReadFile(filepath.Join(h.dir, protocol.FileSpool))
	if !bytes.Contains(spool, []byte("name: bob\r\n")) && !bytes.Contains(spool, []byte("name: bob\n")) {
		t.Errorf("the spool lacks the echo: %q", spool)
	}
}

// Sends racing the end of their command are either delivered to it or
// refused; input it did not read is dropped at its fence: nothing ever
// reaches the next command or the tool's prompt. Input for an unknown id
// (a prefix of every cmd_id) and input written before the command existed
// are refused.
func TestInteractiveRacesNeverLeak(t *testing.T) {
	t.Parallel()
	h := newHarness(t).start()
	if r := h.reply(h.send(1, "c1", "EARLY\n", nil)); r.Outcome != protocol.OutcomeNotRunning || r.CmdState != "unknown" {
		t.Fatalf("send before the command exists: %+v", r)
	}
	if r := h.reply(h.send(2, "c", "PREFIX\n", nil)); r.Outcome != protocol.OutcomeNotRunning || r.CmdState != "unknown" {
		t.Fatalf("unknown id: %+v", r)
	}
	// Each round: A ends by itself without reading its input, while sends
	// to it follow each other until one is refused as finished; B then
	// reads whatever input is waiting (non-blocking) and prints it.
	const rounds = 12
	probe := `fconfigure stdin -blocking 0; after 20; set got [read stdin]; fconfigure stdin -blocking 1; puts "B saw <$got>"`
	seq, delivered := int64(10), 0
	var names []string
	for i := 0; i < rounds; i++ {
		a := h.submit(fmt.Sprintf(`after %d; puts A%d`, 5*(i%4), i))
		b := h.submit(probe)
		names = append(names, a, b)
		_, id, _ := protocol.ParseCommandName(a)
		for k := 0; ; k++ {
			seq++
			r := h.reply(h.send(seq, id, fmt.Sprintf("LEAK-%d-%d\n", i, k), nil))
			if r.Outcome == protocol.OutcomeDelivered {
				delivered++
			} else if r.Outcome != protocol.OutcomeNotRunning {
				t.Fatalf("%+v", r)
			}
			if r.CmdState == "finished" {
				break
			}
			if k > 10000 {
				t.Fatal("the command never finished")
			}
		}
	}
	for _, n := range names {
		if res := h.result(n); res.Status != protocol.StatusOK {
			t.Errorf("%s: %+v", n, res)
		}
		if out := h.output(n); strings.Contains(out, "LEAK") || strings.Contains(out, "EARLY") || strings.Contains(out, "PREFIX") {
			t.Errorf("input leaked into %s: %q", n, out)
		}
	}
	if spool := readSpool(h); bytes.Contains(spool, []byte("LEAK")) || bytes.Contains(spool, []byte("EARLY")) {
		t.Errorf("input reached the tool's prompt (the spool shows it): %q", spool)
	}
	if delivered == 0 {
		t.Error("no send reached a running command; the test raced nothing")
	}
	t.Logf("%d racing sends were delivered, %d rounds", delivered, rounds)
}

// A send to a queued command is refused with cmd_state queued and never
// reaches it when it runs.
func TestInteractiveQueuedRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t).start()
	a := h.submit(`puts -nonewline "first? "; flush stdout; gets stdin x; puts "first got $x"`)
	b := h.submit(`fconfigure stdin -blocking 0; after 50; set got [read stdin]; fconfigure stdin -blocking 1; puts "second saw <$got>"`)
	r := h.reply(h.send(1, "c2", "for-the-second\n", nil))
	if r.Outcome != protocol.OutcomeNotRunning || r.CmdState != "queued" {
		t.Fatalf("%+v", r)
	}
	h.reply(h.send(2, "c1", "ok\n", map[string]any{"expect": `first\? `}))
	h.result(a)
	h.result(b)
	if got := h.output(b); got != "second saw <>\n" {
		t.Errorf("the queued command got input: %q", got)
	}
}

// A signal to a tool that traps USR1 and prints (the fake EDA tool dumps
// its status): delivered to the foreground process group, and the command
// goes on to its end (no cancel semantics).
func TestInteractiveSignalUSR1FakeEDA(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.Tool = fakeEDA(t) }).start()
	a := h.submit(`load_design top; report_timing 40 50; puts -nonewline "continue? "; flush stdout; gets stdin x; set x`)
	h.waitFor("the report", func() bool { return bytes.Contains(readSpool(h), []byte("Path 2: slack")) })
	r := h.reply(h.request(2, "g1", protocol.OpSignal, map[string]any{"cmd_id": "c1", "signal": "USR1"}))
	if r.Outcome != protocol.OutcomeDelivered {
		t.Fatalf("%+v", r)
	}
	h.waitFor("the status line", func() bool {
		return bytes.Contains(readSpool(h), []byte("fake_eda status: design 'top'"))
	})
	h.reply(h.send(3, "c1", "yes\n", map[string]any{"expect": `continue\? `}))
	res := h.result(a)
	if res.Status != protocol.StatusOK || *res.Value != "yes" {
		t.Fatalf("the signalled command: %+v %q", res, h.output(a))
	}
	out := h.output(a)
	if !strings.Contains(out, "fake_eda status: design 'top'") || !strings.Contains(out, "Path 40: slack") {
		t.Errorf("output %q", out)
	}
}

func readSpool(h *harness) []byte {
	b, _ := os.ReadFile(filepath.Join(h.dir, protocol.FileSpool))
	return b
}

// The fake EDA tool's own prompt ("File … exists. Overwrite? (y/n) ")
// answered with send --expect, and its sign-off password with a secret.
func TestInteractiveFakeEDAPrompts(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.Tool = fakeEDA(t) }).start()
	file := filepath.Join(t.TempDir(), "top.v")
	if err := os.WriteFile(file, []byte("old\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := h.submit(fmt.Sprintf(`load_design top; write_design %s`, tclQuote(file)))
	r := h.reply(h.send(1, "c1", "y\n", map[string]any{"expect": `Overwrite\? \(y/n\) $`}))
	if r.Outcome != protocol.OutcomeDelivered {
		t.Fatalf("%+v", r)
	}
	if res := h.result(a); res.Status != protocol.StatusOK {
		t.Fatalf("%+v %q", res, h.output(a))
	}
	if b, _ := os.ReadFile(file); string(b) != "design top\n" {
		t.Errorf("the file holds %q", b)
	}
	if !strings.Contains(h.output(a), "Overwrite? (y/n) Wrote ") {
		t.Errorf("output %q", h.output(a))
	}
	b := h.submit(`ask_password`)
	r = h.reply(h.send(2, "c2", "eda-Secret-42\n", map[string]any{"expect": "password: ", "secret": true}))
	if r.Outcome != protocol.OutcomeDelivered {
		t.Fatalf("%+v", r)
	}
	if res := h.result(b); *res.Value != "13 characters" {
		t.Fatalf("%+v", res)
	}
	h.stop(protocol.StopGraceful)
	grepSession(t, h.dir, [][]byte{[]byte("eda-Secret-42")})
}

// resize is seen by the tool: `stty size` before and after.
func TestInteractiveResize(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.Kind = protocol.KindSh }).start()
	a := h.submit(`stty size; printf 'resized? '; read -r x; stty size`)
	h.waitFor("the prompt", func() bool { return bytes.Contains(readSpool(h), []byte("resized? ")) })
	if r := h.reply(h.request(1, "z1", protocol.OpResize, map[string]any{"cols": 100, "rows": 30})); r.Outcome != protocol.OutcomeDelivered {
		t.Fatalf("%+v", r)
	}
	h.reply(h.send(2, "c1", "y\n", nil))
	h.result(a)
	if got := h.output(a); got != "50 512\nresized? 30 100\n" {
		t.Errorf("output %q", got)
	}
}

// A command that turns the terminal's modes back on (`stty sane`: echo and
// ONLCR) changes only its own output: the runner restores its modes before
// the next command, so later outputs are exact and nothing typed shows up,
// and a warning event says what was turned off.
func TestTerminalModesRestoredBeforeEachCommand(t *testing.T) {
	t.Parallel()
	h := newHarness(t).start()
	a := h.submit(`exec stty sane <@stdin; puts -nonewline s`)
	b := h.submit(`set x 1`)
	c := h.submit("puts hello\nputs world")
	h.result(a)
	for _, r := range []protocol.Result{h.result(b), h.result(c)} {
		if r.Status != protocol.StatusOK {
			t.Fatalf("%+v", r)
		}
	}
	if got := h.output(b); got != "" {
		t.Errorf("output of the next command %q, want \"\"", got)
	}
	if got := h.output(c); got != "hello\nworld\n" {
		t.Errorf("output %q, want %q", got, "hello\nworld\n")
	}
	restored := false
	for _, e := range h.events() {
		if e.Event == protocol.EvWarning && e.CmdID != "" {
			if m, _ := e.Detail["terminal_modes_restored"].(string); strings.Contains(m, "echo") && strings.Contains(m, "onlcr") {
				restored = true
			}
		}
	}
	if !restored {
		t.Errorf("no warning event names the restored modes: %v", h.events())
	}
	h.stop(protocol.StopGraceful)
	invariants(t, h.dir, a, b, c)
}

// A command that sets a terminal special character to a byte the runner
// types (`stty kill _`: every later typed line, full of `_`, would be
// erased; `stty eof a`, `stty intr ^J`) leaves later commands unharmed:
// the runner puts the defaults back before each command, and a warning
// event names them. Before, the next command never began.
func TestTerminalSpecialCharsRestored(t *testing.T) {
	t.Parallel()
	h := newHarness(t).start()
	a := h.submit(`exec stty kill _ eof a werase p <@stdin`)
	b := h.submit(`set x 41; incr x`)
	c := h.submit("puts {__a_b_c__}")
	if r := h.result(a); r.Status != protocol.StatusOK {
		t.Fatalf("stty: %+v", r)
	}
	if r := h.result(b); r.Status != protocol.StatusOK || r.Value == nil || *r.Value != "42" {
		t.Fatalf("the next command: %+v", r)
	}
	h.result(c)
	if got := h.output(c); got != "__a_b_c__\n" {
		t.Errorf("output %q", got)
	}
	var named string // The first warning's: it comes before the next command.
	for _, e := range h.events() {
		if m, _ := e.Detail["terminal_modes_restored"].(string); e.Event == protocol.EvWarning && named == "" {
			named = m
		}
	}
	for _, want := range []string{`kill='_'`, `eof='a'`, `werase='p'`} {
		if !strings.Contains(named, want) {
			t.Errorf("terminal_modes_restored %q does not name %s", named, want)
		}
	}
	h.stop(protocol.StopGraceful)
}

func TestSpecialCharsRule(t *testing.T) {
	t.Parallel()
	var tio unix.Termios
	for _, c := range specialChars {
		tio.Cc[c.index] = c.def
	}
	if got := modesChanged(&tio); got != "" {
		t.Fatalf("the defaults are reported as changed: %q", got)
	}
	tio.Cc[unix.VKILL], tio.Cc[unix.VINTR], tio.Cc[unix.VERASE], tio.Cc[unix.VEOL] = '_', '\n', 0x08, 0
	if got, want := modesChanged(&tio), `intr='\n',kill='_'`; got != want {
		t.Errorf("modesChanged = %q, want %q (^H for erase and a disabled eol are harmless)", got, want)
	}
	clearModes(&tio)
	if tio.Cc[unix.VKILL] != 0x15 || tio.Cc[unix.VINTR] != 0x03 || tio.Cc[unix.VERASE] != 0x08 {
		t.Errorf("after clearModes: kill %#x intr %#x erase %#x", tio.Cc[unix.VKILL], tio.Cc[unix.VINTR], tio.Cc[unix.VERASE])
	}
}

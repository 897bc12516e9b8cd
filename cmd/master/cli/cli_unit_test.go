package cli

import (
	"context"
	"os"
	"path/filepath"
	"regexp"

	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
)

// The clean view keeps exactly what commands printed, whatever the chunking
// of the raw spool: prompts, markers, sync lines and init output go, the
// runner's injected newline goes, "\r\r\n" becomes "\n", a lone "\r" stays.
func TestCleanView(t *testing.T) {
	spool := "% % \r\r\n__SP_DONE__ sync-ab-1 rc=0\r\r\ninit noise\r\r\n% \r\r\n__SP_BEGIN__ a\r\r\nalpha\r\r\nno newline\r\r\n__SP_DONE__ a rc=0 v= vt=0\r\r\n" +
		"% \r\r\n__SP_BEGIN__ b\r\r\nbe\rta\r\r\n\r\r\n\r\r\n__SP_DONE__ b rc=0 v=NDI= vt=0\r\r\n% " +
		"\r\n__SP_BEGIN__ c\r\nkilled mid-line" + // c's tool died: no marker
		"\r\n__SP_BEGIN__ d\r\nd out\r\n\r\nMY_PREFIX d rc=0\r\n% "
	// The carriage returns right before the newline the runner injects
	// are the payload's: the runner's framer keeps them in the output
	// file, and so does the clean view.
	want := "alpha\nno newline\r\r" + "be\rta\n\n\r\r" + "killed mid-line" + "d out\n\r"
	for _, step := range []int{1, 2, 3, 7, len(spool)} {
		var out bytes.Buffer
		cw := &cleanWriter{w: &out}
		for i := 0; i < len(spool); i += step {
			cw.Write([]byte(spool[i:min(i+step, len(spool))]))
		}
		if out.String() != want {
			t.Errorf("chunks of %d: %q, want %q", step, out.String(), want)
		}
	}
}

// JSON Lines never split a UTF-8 sequence, and carry exact offsets.
func TestJSONLinesUTF8(t *testing.T) {
	var out bytes.Buffer
	c := &cli{stdout: &trackWriter{w: &out}}
	j := &jsonLines{c: c, off: 10, offsets: true}
	data := []byte("héllo wörld ✓\xff")
	for i := range data {
		j.Write(data[i : i+1])
	}
	j.flush()
	var text strings.Builder
	next := int64(10)
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var d struct {
			Offset int64  `json:"offset"`
			Text   string `json:"text"`
			B64    string `json:"data_b64"`
		}
		if err := json.Unmarshal([]byte(line), &d); err != nil {
			t.Fatal(err)
		}
		if d.Offset != next {
			t.Fatalf("offset %d, want %d", d.Offset, next)
		}
		if d.B64 != "" {
			raw, _ := base64.StdEncoding.DecodeString(d.B64)
			next += int64(len(raw))
		} else {
			next += int64(len(d.Text))
		}
		if d.B64 == "" && strings.ContainsRune(d.Text, '\uFFFD') {
			t.Errorf("a split rune in %q", line)
		}
		text.WriteString(d.Text)
	}
	if next != 10+int64(len(data)) || !strings.HasPrefix(text.String(), "héllo wörld ✓") {
		t.Errorf("%q up to %d", text.String(), next)
	}
}

func TestDurationFlag(t *testing.T) {
	for in, want := range map[string]time.Duration{"1": time.Second, "0.25": 250 * time.Millisecond, ".5": 500 * time.Millisecond, "5.": 5 * time.Second, "2m": 2 * time.Minute, "1h30m": 90 * time.Minute} {
		var d durationFlag
		if err := d.Set(in); err != nil || time.Duration(d) != want {
			t.Errorf("%s: %v %v", in, time.Duration(d), err)
		}
	}
	for _, bad := range []string{"1x", "-1", "soon", "1e12", "NaN", "nan", "Inf", "-Inf", "1e999", "0x10", "true", "010", "00.5"} {
		var d durationFlag
		if err := d.Set(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

// A number flag written into a file is decimal: the flag
// package's Int64 reads 0x10 as 16 and 010 as 8.
func TestDecimalFlag(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "4096": 4096, "+7": 7, "-1": -1} {
		var d decimalFlag
		if err := d.Set(in); err != nil || int64(d) != want {
			t.Errorf("%s: %d %v", in, d, err)
		}
	}
	for _, bad := range []string{"0x10", "010", "-07", "1.5", "1e3", "true", "", "99999999999999999999"} {
		var d decimalFlag
		if err := d.Set(bad); err == nil {
			t.Errorf("%s accepted as %d", bad, d)
		}
	}
}

// Flags may follow arguments; "--" ends the flags.
func TestInterspersedFlags(t *testing.T) {
	c := &cli{stdout: &trackWriter{w: &bytes.Buffer{}}, verb: "x"}
	cmd := c.newCommand("", "", true)
	n := cmd.Int("n", 0, "")
	pos, err := cmd.parse([]string{"a", "--n", "3", "b", "--json", "--", "--n", "-x"})
	if err != nil || *n != 3 || !c.json || strings.Join(pos, " ") != "a b --n -x" {
		t.Fatalf("%v %d %v %q", err, *n, c.json, pos)
	}
}

// notCounted names only the non-zero counts, apart from commands_done.
func TestNotCounted(t *testing.T) {
	for _, c := range []struct {
		skipped, rejected int64
		want              string
	}{
		{0, 0, ""},
		{0, 4, " (not counting 4 rejected as invalid)"},
		{1, 0, " (not counting 1 skipped as already done)"},
		{1, 2, " (not counting 1 skipped as already done, 2 rejected as invalid)"},
	} {
		if got := notCounted(c.skipped, c.rejected); got != c.want {
			t.Errorf("notCounted(%d, %d) = %q, want %q", c.skipped, c.rejected, got, c.want)
		}
	}
}

// Interrupted, a wait on a session whose directory was deleted says the
// command gets no result, never "still queued" with a cancel command for
// the gone directory.
func TestInterruptedGoneSession(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s")
	for _, d := range protocol.Dirs {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	s, err := master.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	cmd, err := s.Submit(context.Background(), "expr 1", master.SubmitOptions{CmdID: "g1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	var errb bytes.Buffer
	c := &cli{stdout: &trackWriter{w: &bytes.Buffer{}}, stderr: &errb}
	c.interrupted(s, cmd, false)
	if got := errb.String(); !strings.Contains(got, "g1 gets no result: its session "+dir+" is gone") || strings.Contains(got, "master cancel") || strings.Contains(got, "queued") {
		t.Errorf("stderr %q", got)
	}
}

// pool status shows a dead session's phase in parentheses (as the runner
// that is gone last wrote it, not "busy" as if it were) and says what
// DONE counts.
func TestPoolStatusDeadPhase(t *testing.T) {
	pool := t.TempDir()
	if err := os.WriteFile(filepath.Join(pool, "pool.json"), []byte(`{"protocol_version":1,"size":1,"via":"local"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(pool, "s00")
	for _, d := range protocol.Dirs {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	st, _ := json.Marshal(protocol.State{ProtocolVersion: 1, Phase: protocol.PhaseBusy, SessionID: "session_x", CommandsDone: 3})
	hb, _ := json.Marshal(protocol.Heartbeat{ProtocolVersion: 1, Counter: 1, IntervalMS: 1000, Phase: protocol.PhaseBusy, SessionID: "session_x"})
	os.WriteFile(filepath.Join(dir, protocol.FileState), st, 0o600)
	os.WriteFile(filepath.Join(dir, protocol.FileHeartbeat), hb, 0o600)
	var out, errb bytes.Buffer
	if rc := Main([]string{"pool", "status", "--pool", pool}, strings.NewReader(""), &out, &errb); rc != 5 {
		t.Fatalf("exit %d: %s", rc, errb.String())
	}
	if !strings.Contains(out.String(), ": 1 session, 0 serving") || !regexp.MustCompile(`(?m)^s00 +dead +\(busy\) `).MatchString(out.String()) || !strings.Contains(out.String(), "DONE counts commands since each session's runner started") {
		t.Errorf("stdout:\n%s", out.String())
	}
}

// With --json anywhere, a usage error is a JSON document on stdout, also
// when a bad flag comes before --json (the flag parser stops there).
func TestUsageErrorJSONAnywhere(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"wait", "--bogus", "--json", "--session", dir},
		{"wait", "x", "--wait-timeout", "abc", "--json", "--session", dir},
		{"pool", "status", "--bogus", "--json"},
	} {
		var out, errb bytes.Buffer
		rc := Main(args, strings.NewReader(""), &out, &errb)
		var doc struct {
			Error struct {
				Code    string         `json:"code"`
				Context map[string]any `json:"context"`
			} `json:"error"`
		}
		if err := json.Unmarshal(out.Bytes(), &doc); rc != 2 || err != nil || doc.Error.Code != "usage" || doc.Error.Context["command"] == nil {
			t.Errorf("%q: exit %d, stdout %q (%v)", args, rc, out.String(), err)
		}
	}
}

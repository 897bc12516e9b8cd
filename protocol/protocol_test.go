package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"
)

func TestCommandNames(t *testing.T) {
	for _, tc := range []struct {
		name string
		seq  int64
		id   string
		err  error
	}{
		{"cmd_0000000001_abc.json", 1, "abc", nil},
		{"cmd_1_550e8400-e29b-41d4-a716-446655440000.json", 1, "550e8400-e29b-41d4-a716-446655440000", nil},
		{"cmd_42_a_b.c-d.json", 42, "a_b.c-d", nil},
		{"cmd_7_a b.json", 7, "a b", ErrBadCmdID},
		{"cmd_1_abc.json.tmp", 0, "", ErrBadName},
		{".cmd_1_abc.json", 0, "", ErrBadName},
		{"cmd__abc.json", 0, "", ErrBadName},
		{"cmd_x_abc.json", 0, "", ErrBadName},
		{"cmd_1_.json", 0, "", ErrBadName},
		{"cmd_1_abc", 0, "", ErrBadName},
		{"cmd_-1_abc.json", 0, "", ErrBadName},
		{"cmd_1234567890123456789_a.json", 0, "", ErrBadName},
		{"cmd_1_...json", 1, "..", ErrBadCmdID},
	} {
		seq, id, err := ParseCommandName(tc.name)
		if !errors.Is(err, tc.err) || (tc.err != ErrBadName && (seq != tc.seq || id != tc.id)) {
			t.Errorf("ParseCommandName(%q) = %d %q %v", tc.name, seq, id, err)
		}
	}
	// Formatting round-trips and sorts numerically.
	a, b := CommandName(9, "x"), CommandName(10, "x")
	if a >= b {
		t.Errorf("%s sorts after %s", a, b)
	}
	if seq, id, err := ParseCommandName(b); err != nil || seq != 10 || id != "x" {
		t.Errorf("round trip: %d %s %v", seq, id, err)
	}
	if OutputName(a) != "cmd_0000000009_x.out" {
		t.Errorf("OutputName %s", OutputName(a))
	}
}

var commandCases = []struct {
	name, file, body, err string
}{
	{"ok", "cmd_1_a.json", `{"cmd_id":"a","seq":1,"kind":"tcl","payload":"puts 1"}`, ""},
	{"seed example", "cmd_1_550e8400-e29b-41d4-a716-446655440000.json", `{"cmd_id":"550e8400-e29b-41d4-a716-446655440000","seq":1,"kind":"tcl","payload":"puts 'Hello World'\n","timeout_s":60,"cancel_policy":"ctrl_c","marker":{"prefix":"__SP_DONE__","token":"550e8400-e29b-41d4-a716-446655440000","mode":"runner_inject"}}`, ""},
	{"sh", "cmd_2_b.json", `{"cmd_id":"b","seq":2,"kind":"sh","payload":"ls"}`, ""},
	{"version 1", "cmd_1_a.json", `{"protocol_version":1,"cmd_id":"a","seq":1,"kind":"tcl","payload":"x"}`, ""},
	{"version null", "cmd_1_a.json", `{"protocol_version":null,"cmd_id":"a","seq":1,"kind":"tcl","payload":"x"}`, ""},
	{"version 99", "cmd_1_a.json", `{"protocol_version":99,"cmd_id":"a","seq":1,"kind":"tcl","payload":"x"}`, "protocol_version: is 99; this runner speaks version 1"},
	{"version 0", "cmd_1_a.json", `{"protocol_version":0,"cmd_id":"a","seq":1,"kind":"tcl","payload":"x"}`, "protocol_version: is 0; this runner speaks version 1"},
	{"version a string", "cmd_1_a.json", `{"protocol_version":"1","cmd_id":"a","seq":1,"kind":"tcl","payload":"x"}`, "protocol_version: has the wrong type (string): want an integer"},
	{"missing kind", "cmd_1_a.json", `{"cmd_id":"a","seq":1,"payload":"x"}`, "kind: required"},
	{"timeout out of range", "cmd_1_a.json", `{"cmd_id":"a","seq":1,"kind":"tcl","payload":"x","timeout_s":1e400}`, "timeout_s: is 1e400, out of range for a number"},
	{"seq with a fraction", "cmd_1_a.json", `{"cmd_id":"a","seq":1.5,"kind":"tcl","payload":"x"}`, "seq: is 1.5: want an integer"},
	{"seq a string", "cmd_1_a.json", `{"cmd_id":"a","seq":"1","kind":"tcl","payload":"x"}`, "seq: has the wrong type (string): want an integer"},
	{"trailing junk", "cmd_1_a.json", `{"cmd_id":"a","seq":1,"kind":"tcl","payload":"x"} xyz`, "a complete JSON value is followed by 3 more bytes (from byte 50)"},
	{"one junk byte", "cmd_1_a.json", `{"cmd_id":"a","seq":1,"kind":"tcl","payload":"x"}x`, "followed by 1 more byte (from byte 49)"},
	{"byte order mark", "cmd_1_a.json", "\xef\xbb\xbf" + `{"cmd_id":"a","seq":1,"kind":"tcl","payload":"x"}`, "byte order mark"},
	{"NaN", "cmd_1_a.json", `{"cmd_id":"a","seq":1,"kind":"tcl","payload":"x","timeout_s":NaN}`, "not valid JSON at byte 62: invalid character 'N'"},
	{"cut short", "cmd_1_a.json", `{"cmd_id":"a","seq":1,"kind":"tc`, "it ends early (write to a temporary name"},
	{"not object", "cmd_1_a.json", `[1,2]`, "must be a JSON object"},
	{"truncated", "cmd_1_a.json", `{"cmd_id":"a","se`, "not valid JSON"},
	{"negative timeout", "cmd_1_a.json", `{"cmd_id":"a","seq":1,"kind":"tcl","payload":"x","timeout_s":-1}`, "timeout_s"},
	{"bad marker mode", "cmd_1_a.json", `{"cmd_id":"a","seq":1,"kind":"tcl","payload":"x","marker":{"mode":"guess"}}`, "marker.mode"},
	{"bad token", "cmd_1_a.json", `{"cmd_id":"a","seq":1,"kind":"tcl","payload":"x","marker":{"token":"a b"}}`, "marker.token"},
	{"name mismatch", "cmd_2_a.json", `{"cmd_id":"a","seq":1,"kind":"tcl","payload":"x"}`, "seq: is 1"},
	// A required field that is null is missing, not "" (a null payload ran as an empty one).
	{"null payload", "cmd_1_a.json", `{"cmd_id":"a","seq":1,"kind":"tcl","payload":null}`, "payload: required field is null"},
	{"null seq", "cmd_1_a.json", `{"cmd_id":"a","seq":null,"kind":"tcl","payload":"x"}`, "seq: required field is null"},
	{"empty payload", "cmd_1_a.json", `{"cmd_id":"a","seq":1,"kind":"tcl","payload":""}`, ""},
}

func TestParseCommand(t *testing.T) {
	for _, tc := range commandCases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseCommand(tc.file, []byte(tc.body))
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				if c.CancelPolicy == "" || c.Marker == nil || c.Marker.Token == "" || c.Marker.Prefix != DefaultMarkerPrefix {
					t.Errorf("defaults not filled: %+v %+v", c, c.Marker)
				}
				return
			}
			var ve *ValidationError
			if !errors.As(err, &ve) || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("err = %v, want %q", err, tc.err)
			}
		})
	}
	_, err := ParseCommand("cmd_1_a.json", []byte(`{"cmd_id":"a"`))
	if !errors.Is(err, ErrIncomplete) {
		t.Errorf("truncated JSON must be ErrIncomplete: %v", err)
	}
}

func FuzzParseCommand(f *testing.F) {
	for _, tc := range commandCases {
		f.Add(tc.file, []byte(tc.body))
	}
	f.Fuzz(func(t *testing.T, name string, body []byte) {
		c, err := ParseCommand(name, body)
		if err != nil {
			var ve *ValidationError
			if !errors.As(err, &ve) || ve.Error() == "" {
				t.Fatalf("error is not a ValidationError with a message: %v", err)
			}
			return
		}
		// Whatever parses must be a valid command whose name round-trips.
		if err := c.Validate(); err != nil {
			t.Fatalf("parsed command fails validation: %v", err)
		}
		seq, id, err := ParseCommandName(name)
		if err != nil || seq != c.Seq || id != c.CmdID {
			t.Fatalf("name %q does not match %d %q", name, c.Seq, c.CmdID)
		}
		if _, err := json.Marshal(c); err != nil {
			t.Fatal(err)
		}
	})
}

func FuzzParseCommandName(f *testing.F) {
	f.Add("cmd_1_a.json")
	f.Add("cmd_0000000001_x-y.json")
	f.Fuzz(func(t *testing.T, name string) {
		seq, id, err := ParseCommandName(name)
		if err != nil {
			return
		}
		if !ValidCmdID(id) || seq < 0 {
			t.Fatalf("%q parsed to %d %q", name, seq, id)
		}
		if s2, id2, err := ParseCommandName(CommandName(seq, id)); err != nil || s2 != seq || id2 != id {
			t.Fatalf("round trip of %q failed", name)
		}
	})
}

func TestTime(t *testing.T) {
	for _, in := range []string{`"1707221123456"`, `1707221123456`, `"2024-02-06T12:05:23.456Z"`, `"2024-02-06T13:05:23.456+01:00"`} {
		var tm Time
		if err := json.Unmarshal([]byte(in), &tm); err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if tm.UnixMilli() != 1707221123456 {
			t.Errorf("%s = %v", in, tm.UnixMilli())
		}
	}
	var tm Time
	if err := json.Unmarshal([]byte(`"yesterday"`), &tm); err == nil {
		t.Error("accepted garbage")
	}
	b, _ := json.Marshal(Time{time.UnixMilli(1707221123456)})
	if string(b) != `"2024-02-06T12:05:23.456Z"` {
		t.Errorf("marshal %s", b)
	}
	b, _ = json.Marshal(Time{})
	if string(b) != "null" {
		t.Errorf("zero %s", b)
	}
}

func TestControlFiles(t *testing.T) {
	if c, err := ParseCancel(nil); err != nil || c.Scope != ScopeCurrent {
		t.Errorf("empty cancel: %+v %v", c, err)
	}
	if c, err := ParseCancel([]byte("garbage")); err == nil || c.Scope != "" {
		t.Errorf("garbage cancel: %+v %v", c, err)
	}
	if c, _ := ParseCancel([]byte(`{"cmd_id":"x"}`)); c.Scope != ScopeCmdID {
		t.Errorf("cmd_id without scope: %+v", c)
	}
	if c, _ := ParseCancel([]byte(`{"scope":"current","cmd_id":null,"ts":"1707221123456"}`)); c.Scope != ScopeCurrent {
		t.Errorf("seed example: %+v", c)
	}
	if s, err := ParseStop([]byte("\n")); err != nil || s.Mode != StopGraceful {
		t.Errorf("empty stop: %+v %v", s, err)
	}
	if s, _ := ParseStop([]byte(`{"mode":"force"}`)); s.Mode != StopForce {
		t.Errorf("force: %+v", s)
	}
	if _, err := ParseLease([]byte(`{"lease_id":"x"}`)); err == nil {
		t.Error("lease without expiry accepted")
	}
	if l, err := ParseLease([]byte(`{"lease_id":"x","expires_at":"1707221123456","owner":"m"}`)); err != nil || l.ExpiresAt.UnixMilli() != 1707221123456 {
		t.Errorf("seed lease: %+v %v", l, err)
	}
}

// Timestamps: ISO 8601 with or without an offset (none means UTC), epoch
// milliseconds as strings or numbers; out-of-range epochs are errors, never
// "long ago" or "never".
func TestTimeForms(t *testing.T) {
	const want = 1707221123456
	for _, in := range []string{
		`"2024-02-06T12:05:23.456"`, `"2024-02-06 12:05:23.456"`, `"2024-02-06T13:05:23.456+0100"`,
		`"2024-02-06 13:05:23.456+01:00"`, `1.707221123456e12`, `"1707221123456.0"`,
	} {
		var tm Time
		if err := json.Unmarshal([]byte(in), &tm); err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		if tm.UnixMilli() != want {
			t.Errorf("%s = %d, want %d", in, tm.UnixMilli(), int64(want))
		}
	}
	for _, in := range []string{`1e20`, `"1e20"`, `-5`, `"-5"`, `9223372036854775807`, `"2024-13-45T99:00:00Z"`, `"NaN"`} {
		var tm Time
		if err := json.Unmarshal([]byte(in), &tm); err == nil {
			t.Errorf("%s accepted as %v", in, tm.Time)
		}
	}
}

// Out-of-range durations are clamped, and say so.
func TestDurationClamps(t *testing.T) {
	for _, tc := range []struct {
		s       float64
		want    time.Duration
		clamped bool
	}{
		{0, time.Hour, false}, // the default
		{1e-12, MinTimeout, true},
		{0.5, 500 * time.Millisecond, false},
		{1e300, MaxTimeout, true},
	} {
		c := Command{TimeoutS: tc.s}
		if d, cl := c.Timeout(time.Hour); d != tc.want || cl != tc.clamped {
			t.Errorf("timeout_s %g: %v %v, want %v %v", tc.s, d, cl, tc.want, tc.clamped)
		}
	}
	if d, cl := (Lease{TTLMS: 1<<63 - 1}).TTL(); d != MaxLeaseTTL || !cl {
		t.Errorf("ttl_ms max int64: %v %v", d, cl)
	}
	if d, cl := (Lease{TTLMS: 1500}).TTL(); d != 1500*time.Millisecond || cl {
		t.Errorf("ttl_ms 1500: %v %v", d, cl)
	}
	if _, err := ParseLease([]byte(`{"lease_id":"L","ttl_ms":1e13}`)); err == nil || !strings.Contains(err.Error(), "ttl_ms") {
		t.Errorf("ttl_ms 1e13: %v", err)
	}
	if _, err := ParseLease([]byte(`{"lease_id":"L","expires_at":1e20}`)); err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Errorf("expires_at 1e20: %v", err)
	}
}

// Names in queue/: which are meant as commands, the rule a misnamed one
// breaks, and the cmd_id its result carries.
func TestQueueNames(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
		rule string // substring; "" for a good name
		id   string // derived cmd_id; "" for none
		seq  int64
	}{
		{"cmd_1_a.json", true, "", "a", 1},
		{"cmd_0000000007_x.y-z.json", true, "", "x.y-z", 7},
		{"cmd_6_a b.json", true, "", "a b", 6},
		{"cmd_w6.json", true, "no seq", "w6", 0},
		{"mycmd.json", true, "is not cmd_", "", 0},
		{"cmd_14_w2.JSON", true, "lower case", "w2", 14},
		{"cmd_9223372036854775807_x.json", true, "19 digits", "x", 0},
		{"notes.txt", false, "", "", 0},
		{"cmd_1_x.json.tmp", false, "", "", 0},
		{".cmd_1_x.json", false, "", "", 0},
		{"cmd_1_x.json~", false, "", "", 0},
	} {
		seq, rule, ok := CheckQueueName(tc.name)
		if ok != tc.ok || (tc.rule == "" && rule != "") || !strings.Contains(rule, tc.rule) {
			t.Errorf("CheckQueueName(%q) = %d %q %v", tc.name, seq, rule, ok)
		}
		if !ok {
			continue
		}
		id, dseq, derived := DeriveCmdID(tc.name)
		if derived != (tc.id != "") || id != tc.id || dseq != tc.seq {
			t.Errorf("DeriveCmdID(%q) = %q %d %v, want %q %d", tc.name, id, dseq, derived, tc.id, tc.seq)
		}
	}
}

// A timeout that underflows to 0 (1e-400) is not "no timeout": it stays a
// tiny positive one, which the runner clamps with a warning.
func TestTimeoutUnderflow(t *testing.T) {
	for body, want := range map[string]bool{
		`{"cmd_id":"a","seq":1,"kind":"tcl","payload":"x","timeout_s":1e-400}`: true,
		`{"cmd_id":"a","seq":1,"kind":"tcl","payload":"x","timeout_s":0}`:      false,
		`{"cmd_id":"a","seq":1,"kind":"tcl","payload":"x","timeout_s":0.0e7}`:  false,
	} {
		c, err := ParseCommand("cmd_1_a.json", []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		if got := c.TimeoutS > 0; got != want {
			t.Errorf("%s: timeout_s %g", body, c.TimeoutS)
		}
	}
}

// TestValidateCorrelation: the bounds of trace_id and labels (PROTOCOL.md
// section 4, Correlation), checked by ParseCommand for every command.
func TestValidateCorrelation(t *testing.T) {
	long := strings.Repeat("x", MaxTraceIDLen)
	sixteen := map[string]string{}
	for i := range MaxLabels {
		sixteen[fmt.Sprintf("k%d", i)] = strings.Repeat("é", MaxLabelValueLen/2)
	}
	ok := []struct {
		id string
		l  map[string]string
	}{
		{"", nil}, {"flow-42/place:3", nil}, {long, nil}, {"4bf92f3577b34da6a3ce929d0e0e4736", sixteen},
		{"", map[string]string{"_x": "", "a9": "with spaces and ünïcode"}},
	}
	for _, c := range ok {
		if err := ValidateCorrelation(c.id, c.l); err != nil {
			t.Errorf("ValidateCorrelation(%q, %v) = %v, want nil", c.id, c.l, err)
		}
	}
	seventeen := maps.Clone(sixteen)
	seventeen["one_more"] = ""
	bad := []struct {
		id    string
		l     map[string]string
		field string
	}{
		{long + "x", nil, "trace_id"}, {"a b", nil, "trace_id"}, {"tab\there", nil, "trace_id"}, {"ü", nil, "trace_id"},
		{"", seventeen, "labels"}, {"", map[string]string{"": "x"}, "labels"}, {"", map[string]string{"9a": "x"}, "labels"},
		{"", map[string]string{"Upper": "x"}, "labels"}, {"", map[string]string{"a-b": "x"}, "labels"},
		{"", map[string]string{strings.Repeat("k", MaxLabelKeyLen+1): "x"}, "labels"},
		{"", map[string]string{"k": strings.Repeat("v", MaxLabelValueLen+1)}, "labels.k"},
		{"", map[string]string{"k": "a\x00b"}, "labels.k"}, {"", map[string]string{"k": "\x7f"}, "labels.k"},
		{"", map[string]string{"k": "\xff"}, "labels.k"},
	}
	for _, c := range bad {
		err := ValidateCorrelation(c.id, c.l)
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != c.field {
			t.Errorf("ValidateCorrelation(%q, %v) = %v, want a %s error", c.id, c.l, err, c.field)
		}
	}
	_, err := ParseCommand("cmd_1_a.json", []byte(`{"cmd_id":"a","seq":1,"kind":"tcl","payload":"","labels":{"Bad":"x"}}`))
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Field != "labels" {
		t.Fatalf("ParseCommand with a bad label key: %v", err)
	}
}

// TestLabelValueNull: a label value null is refused, not
// recorded as "" the way json.Unmarshal would leave it.
func TestLabelValueNull(t *testing.T) {
	for _, labels := range []string{`{"k":null}`, `{"a":"x","k":null}`} {
		_, err := ParseCommand("cmd_1_a.json", []byte(`{"cmd_id":"a","seq":1,"kind":"tcl","payload":"","labels":`+labels+`}`))
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != "labels.k" {
			t.Errorf("ParseCommand with labels %s: %v, want an invalid labels.k", labels, err)
		}
	}
	if _, err := ParseCommand("cmd_1_a.json", []byte(`{"cmd_id":"a","seq":1,"kind":"tcl","payload":"","labels":null}`)); err != nil {
		t.Errorf("labels null (no labels): %v", err)
	}
}

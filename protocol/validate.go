package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

// MaxCommandSize is the largest command file the runner accepts.
const MaxCommandSize = 16 << 20

// ValidationError reports the first problem found in a request file. Its
// message is what lands in an invalid_request result, so it says what to fix.
type ValidationError struct {
	Field string // JSON field name, or "" for the file as a whole
	Msg   string
	// Incomplete: the file is not (yet) valid JSON; errors.Is(err,
	// ErrIncomplete) reports it.
	Incomplete bool
}

// Is makes an incomplete file's error match ErrIncomplete.
func (e *ValidationError) Is(target error) bool { return e.Incomplete && target == ErrIncomplete }

// incomplete is a ValidationError for a file that is not valid JSON.
func incomplete(format string, args ...any) error {
	return &ValidationError{Msg: fmt.Sprintf(format, args...), Incomplete: true}
}

func (e *ValidationError) Error() string {
	if e.Field == "" {
		return e.Msg
	}
	return e.Field + ": " + e.Msg
}

// ErrIncomplete marks a command file that is not (yet) valid JSON. A reader
// may wait for a writer still writing before treating it as invalid.
var ErrIncomplete = errors.New("protocol: file is empty or not complete JSON")

func invalid(field, format string, args ...any) error {
	return &ValidationError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// ParseCommand decodes and validates a command file named name. Defaults are
// filled in (see Command). Errors are *ValidationError; those that wrap
// ErrIncomplete may mean the writer has not finished.
func ParseCommand(name string, data []byte) (*Command, error) {
	seq, id, err := ParseCommandName(name)
	if errors.Is(err, ErrBadCmdID) {
		return nil, invalid("cmd_id", "%q in the file name is not 1-%d characters of [A-Za-z0-9._-]", id, MaxCmdIDLen)
	}
	if err != nil {
		return nil, invalid("", "file name %q is not cmd_<seq>_<cmd_id>.json", name)
	}
	if len(data) > MaxCommandSize {
		return nil, invalid("", "file is %d bytes, the limit is %d", len(data), MaxCommandSize)
	}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || !json.Valid(trimmed) {
		return nil, incomplete("%s", jsonProblem(trimmed, "queue/"))
	}
	if !utf8.Valid(trimmed) {
		return nil, invalid("", "not valid UTF-8")
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &raw); err != nil {
		return nil, invalid("", "must be a JSON object: %v", err)
	}
	for _, f := range []string{"cmd_id", "seq", "kind", "payload"} {
		v, ok := raw[f]
		if !ok {
			return nil, invalid(f, "required field is missing")
		}
		if string(v) == "null" { // json.Unmarshal would leave the zero value: a null payload would run as "".
			return nil, invalid(f, "required field is null")
		}
	}
	if err := checkVersion(raw["protocol_version"]); err != nil {
		return nil, err
	}
	if err := checkLabelsNotNull(raw["labels"]); err != nil {
		return nil, err
	}
	var c Command
	if err := json.Unmarshal(trimmed, &c); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, typeError(te)
		}
		return nil, invalid("", "%v", err)
	}
	if c.TimeoutS == 0 && nonzeroLiteral(raw["timeout_s"]) {
		// 1e-400 reads as 0, which would mean no timeout at all: keep it
		// a tiny timeout, which Timeout clamps (with a warning event).
		c.TimeoutS = math.SmallestNonzeroFloat64
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.Seq != seq {
		return nil, invalid("seq", "is %d but the file name says %d", c.Seq, seq)
	}
	if c.CmdID != id {
		return nil, invalid("cmd_id", "is %q but the file name says %q", c.CmdID, id)
	}
	return &c, nil
}

// Validate checks c and fills in defaults.
func (c *Command) Validate() error {
	if !ValidCmdID(c.CmdID) {
		return invalid("cmd_id", "%q is not 1-%d characters of [A-Za-z0-9._-]", c.CmdID, MaxCmdIDLen)
	}
	if c.Seq < 0 {
		return invalid("seq", "must not be negative")
	}
	if !ValidKind(c.Kind) {
		return invalid("kind", "%q is not a kind (tcl, sh, or a driver's name: 1-%d characters of [a-z0-9_-])", c.Kind, MaxKindLen)
	}
	if c.TimeoutS < 0 {
		return invalid("timeout_s", "must not be negative")
	}
	if c.MaxOutputBytes < 0 {
		return invalid("max_output_bytes", "must not be negative (0 or absent: the runner's --max-output-bytes)")
	}
	switch c.CancelPolicy {
	case "":
		c.CancelPolicy = PolicyCtrlC
	case PolicyCtrlC, PolicyTerminateTool, PolicyTerminateSession:
	default:
		return invalid("cancel_policy", "unknown policy %q (want ctrl_c, terminate_tool or terminate_session)", c.CancelPolicy)
	}
	if c.Marker == nil {
		c.Marker = &Marker{}
	}
	m := c.Marker
	if m.Prefix == "" {
		m.Prefix = DefaultMarkerPrefix
	}
	if m.Token == "" {
		m.Token = c.CmdID
	}
	if m.Mode == "" {
		m.Mode = MarkerRunnerInject
	}
	if m.Mode != MarkerRunnerInject && m.Mode != MarkerPayloadContains {
		return invalid("marker.mode", "unknown mode %q (want runner_inject or payload_contains)", m.Mode)
	}
	if !markerWord(m.Prefix) {
		return invalid("marker.prefix", "must be 1-128 characters of [A-Za-z0-9._-]")
	}
	if !markerWord(m.Token) {
		return invalid("marker.token", "must be 1-128 characters of [A-Za-z0-9._-]")
	}
	return ValidateCorrelation(c.TraceID, c.Labels)
}

// Bounds of a command's correlation fields (PROTOCOL.md section 4).
const (
	MaxTraceIDLen    = 128
	MaxLabels        = 16
	MaxLabelKeyLen   = 63
	MaxLabelValueLen = 256
)

// ValidateCorrelation checks a command's trace_id and labels: a trace_id is
// 1-128 printable ASCII characters without spaces (a W3C trace id, a UUID,
// a flow's own step name all fit); labels are at most 16, each key 1-63
// characters of [a-z0-9_] starting with a letter or _ (a Prometheus label
// name), each value at most 256 bytes of UTF-8 without control characters.
// Masters call it before writing, so a bad field fails at submit.
func ValidateCorrelation(traceID string, labels map[string]string) error {
	if traceID != "" {
		if len(traceID) > MaxTraceIDLen {
			return invalid("trace_id", "is %d characters, the limit is %d", len(traceID), MaxTraceIDLen)
		}
		for i := 0; i < len(traceID); i++ {
			if c := traceID[i]; c <= ' ' || c >= 0x7f {
				return invalid("trace_id", "must be printable ASCII without spaces (byte %d is %#x)", i, c)
			}
		}
	}
	if len(labels) > MaxLabels {
		return invalid("labels", "has %d entries, the limit is %d", len(labels), MaxLabels)
	}
	for k, v := range labels {
		if !labelKey(k) {
			return invalid("labels", "key %q must be 1-%d characters of [a-z0-9_], not starting with a digit", k, MaxLabelKeyLen)
		}
		if len(v) > MaxLabelValueLen {
			return invalid("labels."+k, "is %d bytes, the limit is %d", len(v), MaxLabelValueLen)
		}
		if !utf8.ValidString(v) {
			return invalid("labels."+k, "is not valid UTF-8")
		}
		for _, r := range v {
			if r < ' ' || r == 0x7f || r >= 0x80 && r < 0xa0 {
				return invalid("labels."+k, "must not contain control characters")
			}
		}
	}
	return nil
}

// checkLabelsNotNull refuses a label whose value is JSON null:
// json.Unmarshal would leave it "", a value nobody wrote. Other
// wrong types fail the unmarshal itself; labels null as a whole means none.
func checkLabelsNotNull(raw json.RawMessage) error {
	var labels map[string]json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &labels) != nil {
		return nil
	}
	keys := make([]string, 0, len(labels))
	for k, v := range labels {
		if string(v) == "null" {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	sort.Strings(keys) // The first in order, whatever the map's.
	return invalid("labels."+keys[0], "is null; a label value is a string")
}

func labelKey(k string) bool {
	if len(k) == 0 || len(k) > MaxLabelKeyLen || k[0] >= '0' && k[0] <= '9' {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

func markerWord(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// ParseCancel decodes the legacy ctl/cancel.json. Only empty or
// whitespace-only content means "cancel the current command". Otherwise the
// content must be one of {"cmd_id":"x"}, {"scope":"cmd_id","cmd_id":"x"} or
// {"scope":"current"} (cmd_id null or "" allowed there, as the seed writes
// it), with an optional ts in any accepted format. Anything else is an
// error and the zero CancelRequest: a malformed request never falls back to
// the current command.
func ParseCancel(data []byte) (CancelRequest, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return CancelRequest{Scope: ScopeCurrent}, nil
	}
	if !json.Valid(trimmed) {
		return CancelRequest{}, incomplete("cancel.json is neither empty nor valid JSON")
	}
	o, err := decodeObject(trimmed, "cancel.json")
	if err != nil {
		return CancelRequest{}, err
	}
	ts, err := o.time("ts")
	if err != nil {
		return CancelRequest{}, err
	}
	req, err := cancelFields(o)
	if err != nil {
		return CancelRequest{}, err
	}
	req.TS = ts
	return req, nil
}

// ParseStop decodes the legacy ctl/stop.json. Empty or whitespace-only
// content means graceful; otherwise {"mode":"graceful"|"force"} (mode
// absent: graceful) with an optional ts. Anything else is an error and the
// zero StopRequest: a malformed file never stops the runner.
func ParseStop(data []byte) (StopRequest, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return StopRequest{Mode: StopGraceful}, nil
	}
	if !json.Valid(trimmed) {
		return StopRequest{}, incomplete("stop.json is neither empty nor valid JSON")
	}
	o, err := decodeObject(trimmed, "stop.json")
	if err != nil {
		return StopRequest{}, err
	}
	ts, err := o.time("ts")
	if err != nil {
		return StopRequest{}, err
	}
	mode, err := stopMode(o)
	if err != nil {
		return StopRequest{}, err
	}
	return StopRequest{Mode: mode, TS: ts}, nil
}

// Bounds of durations read from files. A value outside them is clamped
// (and the reader says so): 1e-12 seconds never means "no timeout", and
// max int64 milliseconds never overflows into "already expired".
const (
	MinTimeout  = time.Millisecond
	MaxTimeout  = 365 * 24 * time.Hour
	MaxLeaseTTL = 365 * 24 * time.Hour
)

// OutputBudget returns the command's output budget in bytes:
// max_output_bytes if set, else def (the runner's --max-output-bytes; 0
// means none).
func (c *Command) OutputBudget(def int64) int64 {
	if c.MaxOutputBytes > 0 {
		return c.MaxOutputBytes
	}
	return def
}

// Timeout returns the command's timeout: timeout_s if set, else def (the
// runner's --default-timeout; 0 means none). A positive timeout_s is
// clamped to [MinTimeout, MaxTimeout]; clamped says it was.
func (c *Command) Timeout(def time.Duration) (d time.Duration, clamped bool) {
	if c.TimeoutS <= 0 {
		return def, false
	}
	return clampSeconds(c.TimeoutS, MinTimeout, MaxTimeout)
}

func clampSeconds(s float64, lo, hi time.Duration) (time.Duration, bool) {
	switch {
	case s < lo.Seconds():
		return lo, true
	case s > hi.Seconds():
		return hi, true
	}
	return time.Duration(s * float64(time.Second)), false
}

// TTL returns ttl_ms as a duration, clamped to [1 ms, MaxLeaseTTL];
// clamped says it was. Zero means the lease has no ttl_ms.
func (l Lease) TTL() (d time.Duration, clamped bool) {
	if l.TTLMS <= 0 {
		return 0, false
	}
	if l.TTLMS > MaxLeaseTTL.Milliseconds() {
		return MaxLeaseTTL, true
	}
	return time.Duration(l.TTLMS) * time.Millisecond, false
}

// ParseLease decodes state/lease.json.
func ParseLease(data []byte) (Lease, error) {
	var l Lease
	if err := json.Unmarshal(data, &l); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return Lease{}, invalid(te.Field, "must be an integer that fits in 64 bits (got %s)", te.Value)
		}
		return Lease{}, invalid("", "lease.json is not valid JSON or has a bad field: %v", err)
	}
	if l.TTLMS < 0 {
		return Lease{}, invalid("ttl_ms", "must not be negative")
	}
	if l.TTLMS == 0 && l.ExpiresAt.IsZero() {
		return Lease{}, invalid("expires_at", "a lease needs expires_at or ttl_ms")
	}
	return l, nil
}

// jsonProblem says what is wrong with b, which is not valid JSON, in words
// a flow author can act on; dir is where such files are renamed into.
func jsonProblem(b []byte, dir string) string {
	if bytes.HasPrefix(b, []byte("\xef\xbb\xbf")) {
		return "starts with a UTF-8 byte order mark (BOM): write the JSON without it"
	}
	if end := firstValueEnd(b); end > 0 {
		n := len(b) - end
		return fmt.Sprintf("not valid JSON: a complete JSON value is followed by %d more %s (from byte %d); a command file holds one object", n, plural(n, "byte", "bytes"), end)
	}
	var v any
	err := json.Unmarshal(b, &v)
	var se *json.SyntaxError
	if len(b) == 0 || errors.Is(err, io.ErrUnexpectedEOF) || (errors.As(err, &se) && se.Offset >= int64(len(b))) {
		return "not valid JSON: it ends early (write to a temporary name, then rename into " + dir + ")"
	}
	if errors.As(err, &se) {
		return fmt.Sprintf("not valid JSON at byte %d: %v", se.Offset, err)
	}
	return fmt.Sprintf("not valid JSON: %v", err)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// firstValueEnd returns where what follows a complete first JSON value in
// b starts (trailing junk; b is trimmed, so there is some), else 0.
func firstValueEnd(b []byte) int {
	dec := json.NewDecoder(bytes.NewReader(b))
	var v json.RawMessage
	if dec.Decode(&v) != nil {
		return 0
	}
	end := int(dec.InputOffset())
	return len(b) - len(bytes.TrimLeft(b[end:], " \t\r\n"))
}

// typeError says what was wrong with a field's value in words a flow
// author can act on: a number out of range is not "the wrong type".
func typeError(te *json.UnmarshalTypeError) error {
	want := "a string"
	switch te.Type.Kind() {
	case reflect.Float32, reflect.Float64:
		want = "a number"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		want = "an integer"
	case reflect.Bool:
		want = "true or false"
	case reflect.Map, reflect.Struct:
		want = "an object"
	case reflect.Slice, reflect.Array:
		want = "an array"
	}
	if num, ok := strings.CutPrefix(te.Value, "number "); ok {
		if want == "an integer" && strings.ContainsAny(num, ".eE") {
			return invalid(te.Field, "is %s: want an integer (no fraction or exponent), within range", num)
		}
		return invalid(te.Field, "is %s, out of range for %s", num, want)
	}
	return invalid(te.Field, "has the wrong type (%s): want %s", te.Value, want)
}

// nonzeroLiteral reports whether a JSON number's text has a non-zero digit
// in its mantissa (1e-400 does; 0, 0.0 and 0e5 do not).
func nonzeroLiteral(raw json.RawMessage) bool {
	for _, c := range raw {
		if c == 'e' || c == 'E' {
			return false
		}
		if c >= '1' && c <= '9' {
			return true
		}
	}
	return false
}

// checkVersion applies the one version rule of command files and control
// requests: protocol_version may be absent (or null), else it must be
// this runner's Version. A master of another version gets an
// invalid_request answer that says which version this runner speaks,
// instead of having its file run under rules it did not write for.
func checkVersion(raw json.RawMessage) error {
	if len(raw) == 0 || isNull(raw) {
		return nil
	}
	var v json.Number
	if err := json.Unmarshal(raw, &v); err != nil {
		return invalid("protocol_version", "must be an integer (this runner speaks version %d)", Version)
	}
	if n, err := v.Int64(); err != nil || n != Version {
		return invalid("protocol_version", "is %s; this runner speaks version %d", v, Version)
	}
	return nil
}

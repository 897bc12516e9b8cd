package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Time is a timestamp on the wire. It is written as an RFC 3339 string in UTC
// with millisecond precision ("2026-11-26T10:00:00.123Z"). When read it also
// accepts what the seed protocol allowed: epoch milliseconds as a string or a
// number. Null or "" is the zero Time.
type Time struct{ time.Time }

// Now returns the current time as a Time.
func Now() Time { return Time{time.Now()} }

const wireLayout = "2006-01-02T15:04:05.000Z07:00"

// MarshalJSON implements json.Marshaler.
func (t Time) MarshalJSON() ([]byte, error) {
	if t.IsZero() {
		return []byte(`null`), nil
	}
	return []byte(`"` + t.UTC().Format(wireLayout) + `"`), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (t *Time) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if string(b) == "null" {
		*t = Time{}
		return nil
	}
	if len(b) > 0 && b[0] != '"' {
		var ms json.Number
		if err := json.Unmarshal(b, &ms); err != nil {
			return fmt.Errorf("timestamp: %w", err)
		}
		return t.setEpochMillis(string(ms))
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("timestamp: %w", err)
	}
	return t.Parse(s)
}

// Parse sets t from RFC 3339, ISO 8601 without a zone offset (taken as
// UTC: the seed allowed it, and UTC is the one zone every host agrees on),
// or epoch milliseconds.
func (t *Time) Parse(s string) error {
	s = strings.TrimSpace(s)
	if s == "" {
		*t = Time{}
		return nil
	}
	if s[0] >= '0' && s[0] <= '9' && !strings.ContainsAny(s, "-:T") {
		return t.setEpochMillis(s)
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999",
		"2006-01-02T15:04:05.999999999Z0700", "2006-01-02T15:04"} {
		if v, err := time.Parse(layout, s); err == nil {
			t.Time = v
			return nil
		}
	}
	return fmt.Errorf("timestamp %q: want RFC 3339, ISO 8601 (UTC if it has no offset) or epoch milliseconds", s)
}

// maxEpochMillis is 9999-12-31T23:59:59.999Z: larger epochs are not dates
// (and would overflow time arithmetic).
const maxEpochMillis = 253402300799999

func (t *Time) setEpochMillis(s string) error {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != f {
		return fmt.Errorf("timestamp %q: want RFC 3339, ISO 8601 or epoch milliseconds", s)
	}
	if f < 0 || f > maxEpochMillis {
		return fmt.Errorf("timestamp %q: epoch milliseconds out of range (0 to %d)", s, int64(maxEpochMillis))
	}
	t.Time = time.UnixMilli(int64(f))
	return nil
}

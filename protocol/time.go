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

// Parse sets t from RFC 3339 or epoch milliseconds.
func (t *Time) Parse(s string) error {
	s = strings.TrimSpace(s)
	if s == "" {
		*t = Time{}
		return nil
	}
	if s[0] >= '0' && s[0] <= '9' && !strings.ContainsAny(s, "-:T") {
		return t.setEpochMillis(s)
	}
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return fmt.Errorf("timestamp %q: want RFC 3339 or epoch milliseconds", s)
	}
	t.Time = v
	return nil
}

func (t *Time) setEpochMillis(s string) error {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return fmt.Errorf("timestamp %q: want RFC 3339 or epoch milliseconds", s)
	}
	t.Time = time.UnixMilli(int64(f))
	return nil
}

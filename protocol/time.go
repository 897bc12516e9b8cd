package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Time is a timestamp on the wire. It is written as an RFC 3339 string in UTC
// with millisecond precision ("2026-11-26T10:00:00.123Z"). When read it
// accepts:
//
//   - ISO 8601 / RFC 3339 date-times with an offset ("Z", "+01:00",
//     "+0100") or without one, which means UTC; "T" or a space between date
//     and time; any fraction of a second;
//   - epoch milliseconds, as a JSON number or a string of digits (what the
//     seed protocol wrote), from 0 up to the end of year 9999.
//
// Anything else, and epoch values out of that range (1e20, negative), is an
// error: a timestamp is never silently read as "long ago" or "never".
// Null or "" is the zero Time.
type Time struct{ time.Time }

// Now returns the current time as a Time.
func Now() Time { return Time{time.Now()} }

const wireLayout = "2006-01-02T15:04:05.000Z07:00"

// maxEpochMS is 9999-12-31T23:59:59.999Z in epoch milliseconds.
const maxEpochMS = 253402300799999

// readLayouts are the ISO 8601 forms Parse accepts, tried in order. Those
// without a zone are read as UTC.
var readLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02T15:04:05.999999999Z0700",
	"2006-01-02T15:04:05.999999999",
	"2006-01-02 15:04:05.999999999Z07:00",
	"2006-01-02 15:04:05.999999999Z0700",
	"2006-01-02 15:04:05.999999999",
}

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

// Parse sets t from an ISO 8601 date-time or epoch milliseconds (see Time).
func (t *Time) Parse(s string) error {
	s = strings.TrimSpace(s)
	if s == "" {
		*t = Time{}
		return nil
	}
	if !strings.ContainsAny(s, "-:T ") {
		return t.setEpochMillis(s)
	}
	for _, layout := range readLayouts {
		if v, err := time.Parse(layout, s); err == nil {
			t.Time = v
			return nil
		}
	}
	return fmt.Errorf("timestamp %q: want ISO 8601 (e.g. 2026-11-26T10:00:00Z; no offset means UTC) or epoch milliseconds", s)
}

func (t *Time) setEpochMillis(s string) error {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) {
		return fmt.Errorf("timestamp %q: want ISO 8601 or epoch milliseconds", s)
	}
	if f < 0 || f > maxEpochMS {
		return fmt.Errorf("timestamp %s: epoch milliseconds out of range (0 to %d, the end of year 9999)", s, int64(maxEpochMS))
	}
	t.Time = time.UnixMilli(int64(f))
	return nil
}

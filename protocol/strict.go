package protocol

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// object is a JSON object whose fields are checked one by one, so that a
// wrong type or a null where a value is needed is reported by field name
// instead of being decoded to a zero value (which, for a control request,
// would silently change its meaning).
type object map[string]json.RawMessage

// decodeObject parses data as one JSON object.
func decodeObject(data []byte, what string) (object, error) {
	var o object
	if err := json.Unmarshal(data, &o); err != nil || o == nil {
		return nil, invalid("", "%s must be a JSON object", what)
	}
	return o, nil
}

func isNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

// str returns field f as a string. present is false when f is absent, or
// null and nullOK. A null without nullOK, or another type, is an error.
func (o object) str(f string, nullOK bool) (s string, present bool, err error) {
	raw, ok := o[f]
	if !ok {
		return "", false, nil
	}
	if isNull(raw) {
		if nullOK {
			return "", false, nil
		}
		return "", false, invalid(f, "must be a string, not null")
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false, invalid(f, "must be a string")
	}
	return s, true, nil
}

// integer returns field f as an int64 written without fraction or exponent.
func (o object) integer(f string) (n int64, present bool, err error) {
	raw, ok := o[f]
	if !ok {
		return 0, false, nil
	}
	n, perr := strconv.ParseInt(string(bytes.TrimSpace(raw)), 10, 64)
	if perr != nil {
		return 0, false, invalid(f, "must be an integer")
	}
	return n, true, nil
}

// boolean returns field f as a bool; null counts as absent.
func (o object) boolean(f string) (v bool, err error) {
	raw, ok := o[f]
	if !ok || isNull(raw) {
		return false, nil
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return false, invalid(f, "must be true or false")
	}
	return v, nil
}

// time returns field f as a Time (RFC 3339, ISO 8601 without offset, epoch
// milliseconds as a string or a number; null or absent: zero).
func (o object) time(f string) (Time, error) {
	var t Time
	raw, ok := o[f]
	if !ok {
		return t, nil
	}
	if err := t.UnmarshalJSON(raw); err != nil {
		return Time{}, invalid(f, "%v", err)
	}
	return t, nil
}

package protocol

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// AppendJSON appends the command file c as json.Marshal(c) writes it,
// byte for byte (FuzzCommandAppendJSON holds it to that), without
// encoding/json's reflection: the master CLI writes one command per
// process, and the reflecting encoder's first use (its field cache for
// Command, its code paged in) was a quarter to half a millisecond of
// `master submit --wait` (issue 44). What json.Marshal refuses (a NaN
// timeout) it refuses with json.Marshal's error.
func (c Command) AppendJSON(dst []byte) ([]byte, error) {
	if math.IsNaN(c.TimeoutS) || math.IsInf(c.TimeoutS, 0) {
		_, err := json.Marshal(c)
		return dst, err
	}
	dst = append(dst, '{')
	if c.ProtocolVersion != 0 {
		dst = append(dst, `"protocol_version":`...)
		dst = strconv.AppendInt(dst, int64(c.ProtocolVersion), 10)
		dst = append(dst, ',')
	}
	dst = append(dst, `"cmd_id":`...)
	dst = appendJSONString(dst, c.CmdID)
	dst = append(dst, `,"seq":`...)
	dst = strconv.AppendInt(dst, c.Seq, 10)
	dst = append(dst, `,"kind":`...)
	dst = appendJSONString(dst, string(c.Kind))
	dst = append(dst, `,"payload":`...)
	dst = appendJSONString(dst, c.Payload)
	if c.TimeoutS != 0 {
		dst = append(dst, `,"timeout_s":`...)
		dst = appendJSONFloat(dst, c.TimeoutS)
	}
	if c.CancelPolicy != "" {
		dst = append(dst, `,"cancel_policy":`...)
		dst = appendJSONString(dst, string(c.CancelPolicy))
	}
	if m := c.Marker; m != nil {
		dst = append(dst, `,"marker":{`...)
		sep := ""
		for _, f := range [...]struct{ name, v string }{{"prefix", m.Prefix}, {"token", m.Token}, {"mode", string(m.Mode)}} {
			if f.v != "" {
				dst = append(dst, sep+`"`+f.name+`":`...)
				dst = appendJSONString(dst, f.v)
				sep = ","
			}
		}
		dst = append(dst, '}')
	}
	if !c.SubmittedAt.IsZero() {
		dst = append(dst, `,"submitted_at":"`...)
		dst = c.SubmittedAt.UTC().AppendFormat(dst, wireLayout)
		dst = append(dst, '"')
	}
	if c.Submitter != "" {
		dst = append(dst, `,"submitter":`...)
		dst = appendJSONString(dst, c.Submitter)
	}
	if c.TraceID != "" {
		dst = append(dst, `,"trace_id":`...)
		dst = appendJSONString(dst, c.TraceID)
	}
	if len(c.Labels) > 0 {
		dst = append(dst, `,"labels":{`...)
		keys := make([]string, 0, len(c.Labels))
		for k := range c.Labels {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, k)
			dst = append(dst, ':')
			dst = appendJSONString(dst, c.Labels[k])
		}
		dst = append(dst, '}')
	}
	if c.MaxOutputBytes != 0 {
		dst = append(dst, `,"max_output_bytes":`...)
		dst = strconv.AppendInt(dst, c.MaxOutputBytes, 10)
	}
	return append(dst, '}'), nil
}

// appendJSONFloat appends f as encoding/json writes a float64: shortest
// decimal, exponent form below 1e-6 and from 1e21, "e-09" as "e-9".
func appendJSONFloat(dst []byte, f float64) []byte {
	format := byte('f')
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}

// appendJSONString appends s quoted as encoding/json quotes a string (with
// its default HTML escaping): <, > and & as \u003c, \u003e, \u0026, the
// control characters as \n, \t, \b, \f, \r or \u00XX, bytes that are not
// UTF-8 as \ufffd, U+2028 and U+2029 escaped.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

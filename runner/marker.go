package runner

import (
	"bytes"
	"encoding/base64"
	"strconv"
	"unicode/utf8"
)

// maxValue bounds the Tcl result recorded as a command's value (bytes of
// UTF-8); a longer one is cut and flagged value_truncated.
const maxValue = 64 << 10

// beginWord starts the line the runner's wrapper prints right before a
// payload runs; everything before it (prompt, echo) is not output.
const beginWord = "__SP_BEGIN__"

// done is a parsed completion marker line:
//
//	<prefix> <token> [rc=<n>] [v=<base64 of value>] [vt=1] [ei=<base64>] [ec=<base64>] [h=0]
//
// ei and ec are Tcl's errorInfo and errorCode of a payload that failed
// (rc=1); h=0 says the runner's helpers are gone (the payload deleted
// ::__sp).
type done struct {
	rc          int
	hasRC       bool
	value       []byte
	hasValue    bool
	truncated   bool
	errorInfo   []byte
	errorCode   []byte
	helpersGone bool
	nonce       string // n=: the command's secret, as the helper printed it
}

// matchDone reports whether line is a whole marker line for prefix and
// token, and parses its fields. Unknown fields are ignored; a malformed
// known field makes the line not a marker.
func matchDone(line []byte, prefix, token string) (done, bool) {
	var d done
	rest, ok := bytes.CutPrefix(line, []byte(prefix))
	if !ok {
		return d, false
	}
	rest, ok = bytes.CutPrefix(rest, []byte(" "))
	if !ok {
		return d, false
	}
	rest, ok = bytes.CutPrefix(rest, []byte(token))
	if !ok || (len(rest) > 0 && rest[0] != ' ') {
		return d, false
	}
	for _, f := range bytes.Fields(rest) {
		k, v, _ := bytes.Cut(f, []byte("="))
		switch string(k) {
		case "rc":
			n, err := strconv.Atoi(string(v))
			if err != nil {
				return d, false
			}
			d.rc, d.hasRC = n, true
		case "v":
			val, err := base64.StdEncoding.DecodeString(string(v))
			if err != nil {
				return d, false
			}
			d.value, d.hasValue = val, true
		case "vt":
			d.truncated = string(v) == "1"
		case "ei", "ec":
			val, err := base64.StdEncoding.DecodeString(string(v))
			if err != nil {
				return d, false
			}
			if k[1] == 'i' {
				d.errorInfo = trimPartialRune(val)
			} else {
				d.errorCode = trimPartialRune(val)
			}
		case "h":
			d.helpersGone = string(v) == "0"
		case "n":
			d.nonce = string(v)
		}
	}
	if d.truncated {
		d.value = trimPartialRune(d.value)
	}
	return d, true
}

// trimPartialRune cuts an incomplete UTF-8 sequence off the end of b (a
// value cut at a byte count can end inside a character).
func trimPartialRune(b []byte) []byte {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			return b
		}
	}
	return b
}

// isBegin reports whether line is the begin line for token.
func isBegin(line []byte, token string) bool {
	rest, ok := bytes.CutPrefix(line, []byte(beginWord+" "))
	return ok && string(rest) == token
}

// isEnd reports whether line is the end line for token: a line driver's
// payload ran to its end (PROTOCOL.md 11.1).
func isEnd(line []byte, token string) bool {
	rest, ok := bytes.CutPrefix(line, []byte(endWord+" "))
	return ok && string(rest) == token
}

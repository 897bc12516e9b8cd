package protocol

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
	"time"
)

// commandFrom builds a Command from fuzz values: every field, optional
// ones present or not by the bits of mask.
func commandFrom(mask uint16, id, payload, s1, s2 string, seq int64, timeout float64, ms int64) Command {
	c := Command{CmdID: id, Seq: seq, Kind: Kind(s1), Payload: payload}
	if mask&1 != 0 {
		c.ProtocolVersion = int(seq % 7)
	}
	if mask&2 != 0 {
		c.TimeoutS = timeout
	}
	if mask&4 != 0 {
		c.CancelPolicy = CancelPolicy(s2)
	}
	if mask&8 != 0 {
		c.Marker = &Marker{}
		if mask&16 != 0 {
			c.Marker.Prefix = s1
		}
		if mask&32 != 0 {
			c.Marker.Token = s2
		}
		if mask&64 != 0 {
			c.Marker.Mode = MarkerMode(payload)
		}
	}
	if mask&128 != 0 {
		c.SubmittedAt = Time{time.UnixMilli(ms).In(time.FixedZone("x", 3600))}
	}
	if mask&256 != 0 {
		c.Submitter = s2
	}
	if mask&512 != 0 {
		c.TraceID = s1
	}
	if mask&1024 != 0 {
		c.Labels = map[string]string{s1: s2, s2: payload, "k": id}
	}
	if mask&2048 != 0 {
		c.MaxOutputBytes = seq
	}
	return c
}

// FuzzCommandAppendJSON holds Command.AppendJSON to json.Marshal, byte for
// byte, error for error.
func FuzzCommandAppendJSON(f *testing.F) {
	f.Add(uint16(0xffff), "01a24e34-de46-7979-9d3b-0327ee480af9", "puts hi", "tcl", "ctrl_c", int64(42), 1.5, int64(1765000000123))
	f.Add(uint16(0), "", "", "", "", int64(0), 0.0, int64(0))
	f.Add(uint16(0xffff), "a\"b\\c", "<a&b>\u2028\u2029\x00\x1f\b\f\n\r\t\x7f", "\xff\xfe", "é中😀", int64(-1), 1e-7, int64(-62135596800000))
	f.Add(uint16(2), "x", "y", "z", "w", int64(1), 1e21, int64(253402300799999))
	f.Add(uint16(2), "x", "y", "z", "w", int64(1), 123456789.123456789, int64(1))
	f.Add(uint16(2), "x", "y", "z", "w", int64(1), math.NaN(), int64(1))
	f.Add(uint16(2), "x", "y", "z", "w", int64(1), math.Inf(-1), int64(1))
	f.Fuzz(func(t *testing.T, mask uint16, id, payload, s1, s2 string, seq int64, timeout float64, ms int64) {
		c := commandFrom(mask, id, payload, s1, s2, seq, timeout, ms)
		want, werr := json.Marshal(c)
		got, gerr := c.AppendJSON([]byte("prefix"))
		if (werr != nil) != (gerr != nil) {
			t.Fatalf("json.Marshal error %v, AppendJSON error %v", werr, gerr)
		}
		if werr != nil {
			if string(got) != "prefix" {
				t.Fatalf("AppendJSON appended %q with its error", got)
			}
			return
		}
		if !bytes.Equal(got, append([]byte("prefix"), want...)) {
			t.Fatalf("AppendJSON:\n%s\njson.Marshal:\n%s", got[len("prefix"):], want)
		}
	})
}

// The submit path's command (the master's Submit) is written by
// AppendJSON: one that a payload with every kind of character survives,
// read back by the runner's parser.
func TestCommandAppendJSONParses(t *testing.T) {
	c := commandFrom(0xffff&^1024, "01a24e34-de46-7979-9d3b-0327ee480af9", "puts \"<&>\"\n\t\\ é", "tcl", "ctrl_c", 7, 2.5, 1765000000123)
	c.ProtocolVersion = Version
	b, err := c.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	var back Command
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if back.Payload != c.Payload || back.CmdID != c.CmdID || back.TimeoutS != c.TimeoutS || !back.SubmittedAt.Equal(c.SubmittedAt.Time.Truncate(time.Millisecond)) {
		t.Fatalf("read back %+v, wrote %+v", back, c)
	}
}

package runner

import (
	"bytes"
	"strings"
	"testing"
)

// The echo filter, fed the same output split at every byte (and in two
// places), emits the same thing: the echo directly following a delivery is
// dropped when it is complete and byte for byte, released otherwise.
func TestEchoFilter(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, want, out, emitted string
	}{
		{"echo then output", "bob\n", "bob\ngot bob\n", "got bob\n"},
		{"echo only", "y\n", "y\n", ""},
		{"no echo", "bob\n", "got bob\n", "got bob\n"},
		{"differs midway", "bob\n", "boX\n", "boX\n"},
		{"output first", "bob\n", "Xbob\n", "Xbob\n"},
		{"cut short at the end", "bob\n", "bo", "bo"},
		{"two deliveries", "a\nb\n", "a\nb\nab\n", "ab\n"},
		{"empty output", "a\n", "", ""},
	}
	for _, c := range cases {
		for i := 0; i <= len(c.out); i++ {
			for j := i; j <= len(c.out); j++ {
				var e echoFilter
				e.expect([]byte(c.want))
				var got bytes.Buffer
				emit := func(b []byte) { got.Write(b) }
				for _, part := range []string{c.out[:i], c.out[i:j], c.out[j:]} {
					if part != "" {
						e.feed([]byte(part), emit)
					}
				}
				e.flush(emit)
				if got.String() != c.emitted {
					t.Fatalf("%s, split at %d and %d: emitted %q, want %q", c.name, i, j, got.String(), c.emitted)
				}
				if len(e.want) > 0 {
					t.Fatalf("%s: still active after flush", c.name)
				}
			}
		}
	}
}

// A write cut short expects only the bytes that were written.
func TestEchoFilterTruncate(t *testing.T) {
	t.Parallel()
	var e echoFilter
	e.expect([]byte("abcdef"))
	e.truncate(3)
	var got bytes.Buffer
	e.feed([]byte("abcXYZ"), func(b []byte) { got.Write(b) })
	if got.String() != "XYZ" || len(e.want) > 0 {
		t.Fatalf("emitted %q, active %v", got.String(), len(e.want) > 0)
	}
}

// The window keeps at least expectWindow bytes, at most twice that, and
// its offsets match the output's.
func TestOutWindow(t *testing.T) {
	t.Parallel()
	var w outWindow
	var all strings.Builder
	for i := 0; i < 5000; i++ {
		chunk := strings.Repeat(string(rune('a'+i%26)), 1+i%97)
		if i%1000 == 999 {
			chunk = strings.Repeat("Z", expectWindow+10) // A chunk larger than the window.
		}
		w.add([]byte(chunk))
		all.WriteString(chunk)
		s := all.String()
		if w.end != int64(len(s)) || len(w.buf) > 2*expectWindow || (len(s) >= expectWindow && len(w.buf) < expectWindow) {
			t.Fatalf("after %d chunks: end %d (want %d), kept %d", i, w.end, len(s), len(w.buf))
		}
		from := max(w.end-expectWindow, w.start())
		if !bytes.Equal(w.since(from), []byte(s[from:])) {
			t.Fatalf("after %d chunks: the kept bytes differ from the output", i)
		}
	}
}

package mcpserver

import (
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unicode/utf8"

	"github.com/skillpilot/skillpilot/fsq"
)

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "out")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPreviewBounds(t *testing.T) {
	const budget = 16
	for _, tc := range []struct {
		name, content string
	}{
		{"empty", ""},
		{"small", "hello\n"},
		{"exactly budget", strings.Repeat("a", budget)},
		{"budget+1", strings.Repeat("b", budget+1)},
		{"large", strings.Repeat("0123456789", 1000)},
		{"multibyte at both cuts", "a" + strings.Repeat("é", 20) + strings.Repeat("€", 20)},
		{"4-byte runes", "x" + strings.Repeat("𝄞", 50) + "y"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := makePreview(writeFile(t, tc.content), "output/x.out", -1, "", budget)
			if err != nil {
				t.Fatal(err)
			}
			if p.Size != int64(len(tc.content)) || p.Path != "output/x.out" {
				t.Fatalf("%+v", p)
			}
			if len(p.Head)+len(p.Tail) > budget {
				t.Fatalf("head+tail %d > budget %d", len(p.Head)+len(p.Tail), budget)
			}
			if !utf8.ValidString(p.Head) || !utf8.ValidString(p.Tail) {
				t.Fatalf("invalid UTF-8: %q %q", p.Head, p.Tail)
			}
			if len(tc.content) <= budget {
				if p.Truncated || p.Head != tc.content || p.Tail != "" {
					t.Fatalf("%+v", p)
				}
				return
			}
			// Head and tail are exact pieces of the output; offsets add up.
			if !p.Truncated || !strings.HasPrefix(tc.content, p.Head) || tc.content[p.TailOffset:] != p.Tail ||
				int64(len(p.Head))+p.OmittedBytes+int64(len(p.Tail)) != p.Size {
				t.Fatalf("%+v", p)
			}
			// At most 3 bytes per side are given up to keep runes whole.
			if len(p.Head)+len(p.Tail) < budget-6 {
				t.Fatalf("head+tail %d bytes, wasteful", len(p.Head)+len(p.Tail))
			}
		})
	}
}

// A done command passes size and sha256 from its result.
func TestPreviewFromResult(t *testing.T) {
	p, err := makePreview(writeFile(t, "abc"), "o", 3, "cafe", 16)
	if err != nil || p.SHA256 != "cafe" || p.Head != "abc" {
		t.Fatalf("%+v %v", p, err)
	}
	// No output file (an invalid request has none): an empty preview.
	p, err = makePreview(filepath.Join(t.TempDir(), "missing"), "o", 0, "", 16)
	if err != nil || p.Size != 0 || p.Head != "" {
		t.Fatalf("%+v %v", p, err)
	}
}

func TestPreviewInvalidUTF8(t *testing.T) {
	p, err := makePreview(writeFile(t, "a\xffb"), "o", -1, "", 16)
	if err != nil || p.Head != "a\uFFFDb" {
		t.Fatalf("%+v %v", p, err)
	}
}

func TestEncode(t *testing.T) {
	if d, e := encode([]byte("plain\r\n")); d != "plain\r\n" || e != "utf-8" {
		t.Fatal(d, e)
	}
	raw := []byte{'x', 0xe2, 0x82} // A cut rune.
	d, e := encode(raw)
	if b, _ := base64.StdEncoding.DecodeString(d); e != "base64" || string(b) != string(raw) {
		t.Fatal(d, e)
	}
}

func TestCut(t *testing.T) {
	if s, c := cut("héllo", 2); s != "h" || !c {
		t.Fatalf("%q %v", s, c)
	}
	if s, c := cut("hello", 5); s != "hello" || c {
		t.Fatalf("%q %v", s, c)
	}
}

// Output files are input: a FIFO or a symlink where a file belongs is an
// error, never a hang or a read of another file.
func TestReadRangeHostileFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := readRange(fifo, 0, 10); !errors.Is(err, fsq.ErrNotRegular) {
		t.Fatalf("fifo: %v", err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(writeFile(t, "secret"), link); err != nil {
		t.Fatal(err)
	}
	if _, _, err := readRange(link, 0, 10); !errors.Is(err, fsq.ErrSymlink) {
		t.Fatalf("symlink: %v", err)
	}
	if _, _, err := readRange(dir, 0, 10); !errors.Is(err, fsq.ErrNotRegular) {
		t.Fatalf("directory: %v", err)
	}
	b, size, err := readRange(writeFile(t, "0123456789"), 8, 10)
	if err != nil || string(b) != "89" || size != 10 {
		t.Fatalf("%q %d %v", b, size, err)
	}
}

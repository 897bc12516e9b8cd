package mcpserver

import (
	"encoding/base64"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/skillpilot/skillpilot/fsq"
)

// Preview is the bounded view of a command's output returned inline by run
// and wait: the first and the last bytes within the server's byte budget,
// plus what a client needs to fetch the rest exactly with read_output.
type Preview struct {
	Size         int64  `json:"size" jsonschema:"bytes of output so far (all of it once the command is done)"`
	SHA256       string `json:"sha256,omitempty" jsonschema:"sha256 of the whole output, hex; present once the command is done"`
	Path         string `json:"path" jsonschema:"the output file, relative to the session directory; read it by range with read_output"`
	Head         string `json:"head" jsonschema:"the first bytes of the output (all of it when not truncated)"`
	Tail         string `json:"tail,omitempty" jsonschema:"the last bytes of the output, when truncated"`
	TailOffset   int64  `json:"tail_offset,omitempty" jsonschema:"byte offset in the output where tail starts"`
	Truncated    bool   `json:"truncated" jsonschema:"true when bytes between head and tail are not shown"`
	OmittedBytes int64  `json:"omitted_bytes,omitempty" jsonschema:"how many bytes between head and tail are not shown"`
}

// errNoFile is returned by readRange when the file does not exist (yet).
var errNoFile = errors.New("no such file")

// readRange reads up to n bytes of the regular file path from off. It
// refuses anything but a regular file and never follows a symlink.
func readRange(path string, off, n int64) ([]byte, int64, error) {
	// Opening the directory anew revalidates it: the runner may be on
	// another NFS client.
	var f *os.File
	dir, err := fsq.OpenRoot(filepath.Dir(path))
	if err == nil {
		defer dir.Close()
		f, err = dir.OpenRegular(filepath.Base(path))
	}
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, errNoFile
	}
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	size := fi.Size()
	if off >= size || n <= 0 {
		return nil, size, nil
	}
	buf := make([]byte, min(n, size-off))
	k, err := f.ReadAt(buf, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, size, err
	}
	return buf[:k], size, nil
}

// makePreview builds the preview of the output file at path (abs) whose
// session-relative name is rel. size < 0 means "stat the file"; a done
// command passes the size and sha256 from its result. budget bounds
// len(head)+len(tail) in bytes of output.
func makePreview(abs, rel string, size int64, sha string, budget int) (Preview, error) {
	p := Preview{Path: rel, SHA256: sha}
	if size < 0 {
		_, sz, err := readRange(abs, 0, 0)
		if err != nil && !errors.Is(err, errNoFile) {
			return p, err
		}
		size = sz
	}
	p.Size = size
	if size <= int64(budget) {
		b, _, err := readRange(abs, 0, size)
		if err != nil && !errors.Is(err, errNoFile) {
			return p, err
		}
		p.Head = text(b)
		return p, nil
	}
	headN := int64(budget / 2)
	tailN := int64(budget) - headN
	head, _, err := readRange(abs, 0, headN)
	if err != nil {
		return p, err
	}
	head = head[:runeCut(head)]
	tail, _, err := readRange(abs, size-tailN, tailN)
	if err != nil {
		return p, err
	}
	skip := runeStart(tail)
	tail = tail[skip:]
	p.Head, p.Tail = text(head), text(tail)
	p.TailOffset = size - int64(len(tail))
	p.Truncated = true
	p.OmittedBytes = p.TailOffset - int64(len(head))
	return p, nil
}

// text renders output bytes as a JSON-safe string: invalid UTF-8 becomes
// U+FFFD (exact bytes are available from read_output).
func text(b []byte) string { return strings.ToValidUTF8(string(b), "\uFFFD") }

// runeCut returns the length of b without a trailing incomplete UTF-8
// sequence (at most 3 bytes are dropped).
func runeCut(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if r, _ := utf8.DecodeRune(b[i:]); r == utf8.RuneError && !utf8.FullRune(b[i:]) {
				return i
			}
			return len(b)
		}
	}
	return len(b)
}

// runeStart returns how many leading continuation bytes b has (at most 3).
func runeStart(b []byte) int {
	for i := 0; i < len(b) && i < utf8.UTFMax; i++ {
		if utf8.RuneStart(b[i]) {
			return i
		}
	}
	return 0
}

// encode returns b as text when it is valid UTF-8, else as base64, with
// the encoding's name: ranges are always exact.
func encode(b []byte) (data, encoding string) {
	if utf8.Valid(b) {
		return string(b), "utf-8"
	}
	return base64.StdEncoding.EncodeToString(b), "base64"
}

// cut bounds s to n bytes at a rune boundary and says if it cut.
func cut(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	b := []byte(s[:n])
	return string(b[:runeCut(b)]), true
}

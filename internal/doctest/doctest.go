// Package doctest runs the code blocks of README.md and docs/*.md, so that
// what the documents teach is what the code does. A fenced block is marked
// by the line just above its opening fence:
//
//	<!-- test NAME: PATH -->   the test file PATH runs it (and names NAME)
//	<!-- not run: REASON -->   an illustration: a site's tool, a scheduler's
//	                           output, a fragment shown in its place
//
// Every block in a language (sh, python, tcl, go, json) carries one of the
// two (TestDocsBlocksMarked), and a test finds its block by name ([Get]),
// so editing a document edits what the test runs. [Env] runs a block as a
// reader would, in a scratch directory laid out like a source tree, with
// the built binaries first on PATH.
package doctest

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/skillpilot/skillpilot/internal/testenv"
)

// Block is one fenced code block of a document.
type Block struct {
	File   string // from the repository's root: README.md, docs/first-session.md
	Line   int    // the line of its opening fence (1-based)
	Lang   string // the fence's info string: sh, python, tcl, go, json, "" for text
	Name   string // from <!-- test NAME: PATH -->
	RunBy  string // PATH of that marker
	NotRun string // REASON of <!-- not run: REASON -->
	Text   string // the block's lines, each ending in a newline
}

// Where says where the block is, for messages: README.md:42.
func (b Block) Where() string { return fmt.Sprintf("%s:%d", b.File, b.Line) }

// Want fails the test unless out, what the block printed, holds every
// one of want.
func (b Block) Want(t testing.TB, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Fatalf("%s (%s) printed no %q:\n%s", b.Where(), b.Name, w, out)
		}
	}
}

// Langs are the languages whose blocks must be marked.
var Langs = map[string]bool{"sh": true, "bash": true, "python": true, "tcl": true, "go": true, "json": true}

var (
	testMark   = regexp.MustCompile(`^<!-- test ([a-z0-9-]+): (\S+) -->$`)
	notRunMark = regexp.MustCompile(`^<!-- not run: (.+) -->$`)
	fence      = regexp.MustCompile("^(\\s*)(```+)\\s*([A-Za-z0-9_+-]*)\\s*$")
)

// Parse returns the fenced blocks of src, the document file (a path from
// the repository's root), with their markers.
func Parse(file string, src []byte) []Block {
	lines := strings.Split(string(src), "\n")
	var out []Block
	for i := 0; i < len(lines); i++ {
		m := fence.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		indent, ticks := m[1], m[2]
		b := Block{File: file, Line: i + 1, Lang: m[3]}
		if i > 0 {
			prev := strings.TrimSpace(lines[i-1])
			if t := testMark.FindStringSubmatch(prev); t != nil {
				b.Name, b.RunBy = t[1], t[2]
			} else if n := notRunMark.FindStringSubmatch(prev); n != nil {
				b.NotRun = n[1]
			}
		}
		var text strings.Builder
		for i++; i < len(lines); i++ {
			if strings.TrimSpace(lines[i]) == ticks {
				break
			}
			text.WriteString(strings.TrimPrefix(lines[i], indent) + "\n")
		}
		b.Text = text.String()
		out = append(out, b)
	}
	return out
}

// Root is the repository's root: the directory of go.mod above the
// working directory.
func Root() (string, error) { return testenv.ModuleRoot() }

// Documents are the documents whose blocks are tested, from the
// repository's root: README.md, the other top-level guides and docs/*.md
// (docs/reference/ is generated from the code; internal/refdoc checks it).
func Documents(root string) ([]string, error) {
	var out []string
	for _, pat := range []string{"*.md", "docs/*.md"} {
		m, err := filepath.Glob(filepath.Join(root, pat))
		if err != nil {
			return nil, err
		}
		for _, p := range m {
			rel, _ := filepath.Rel(root, p)
			switch rel {
			case "CHANGELOG.md", "PROTOCOL.md", "BENCHMARKS.md", "docs/benchmarks-log.md":
				continue // History, measurements and the normative spec: their blocks are quoted, not taught.
			}
			out = append(out, rel)
		}
	}
	sort.Strings(out)
	return out, nil
}

// All are the blocks of every document.
func All(root string) ([]Block, error) {
	docs, err := Documents(root)
	if err != nil {
		return nil, err
	}
	var out []Block
	for _, d := range docs {
		src, err := os.ReadFile(filepath.Join(root, d))
		if err != nil {
			return nil, err
		}
		out = append(out, Parse(d, src)...)
	}
	return out, nil
}

// Get is the block called name (<!-- test name: ... -->); the test fails
// unless exactly one block has that name.
func Get(t testing.TB, name string) Block {
	t.Helper()
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := All(root)
	if err != nil {
		t.Fatal(err)
	}
	var found []Block
	for _, b := range blocks {
		if b.Name == name {
			found = append(found, b)
		}
	}
	if len(found) != 1 {
		t.Fatalf("doctest: %d blocks named %q in the documents, want 1", len(found), name)
	}
	return found[0]
}

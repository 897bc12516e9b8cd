package doctest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDocsBlocksMarked: every block of README.md and docs/*.md in a
// language is either run by a test or says why not, every test marker
// names a test file that exists and names the block, and no two blocks
// share a name. A block added untested fails here.
func TestDocsBlocksMarked(t *testing.T) {
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := All(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) == 0 {
		t.Fatal("no blocks found")
	}
	names := map[string]string{}
	run := 0
	for _, b := range blocks {
		switch {
		case b.Name != "":
			run++
			if prev, ok := names[b.Name]; ok {
				t.Errorf("%s: block name %q is also at %s", b.Where(), b.Name, prev)
			}
			names[b.Name] = b.Where()
			src, err := os.ReadFile(filepath.Join(root, b.RunBy))
			if err != nil {
				t.Errorf("%s: %s is run by %s: %v", b.Where(), b.Name, b.RunBy, err)
				continue
			}
			if !strings.HasSuffix(b.RunBy, "_test.go") || !strings.Contains(string(src), `"`+b.Name+`"`) {
				t.Errorf("%s: %s says it runs block %q, but does not name it", b.Where(), b.RunBy, b.Name)
			}
		case b.NotRun != "":
		case Langs[b.Lang]:
			t.Errorf("%s: a %s block with neither <!-- test NAME: PATH --> nor <!-- not run: REASON --> above it", b.Where(), b.Lang)
		}
	}
	t.Logf("%d blocks, %d run by tests", len(blocks), run)
}

func TestParse(t *testing.T) {
	src := "# x\n<!-- test first: a_test.go -->\n```sh\necho hi\n```\n\n<!-- not run: a site's tool -->\n```tcl\nputs x\n```\n```\ntext\n```\n  <!-- test in-list: b_test.go -->\n  ```python\n  print(1)\n  ```\n"
	got := Parse("x.md", []byte(src))
	want := []Block{
		{File: "x.md", Line: 3, Lang: "sh", Name: "first", RunBy: "a_test.go", Text: "echo hi\n"},
		{File: "x.md", Line: 8, Lang: "tcl", NotRun: "a site's tool", Text: "puts x\n"},
		{File: "x.md", Line: 11, Lang: "", Text: "text\n"},
		{File: "x.md", Line: 15, Lang: "python", Name: "in-list", RunBy: "b_test.go", Text: "print(1)\n"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d blocks: %+v", len(got), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("block %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

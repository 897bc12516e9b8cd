package refdoc

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDocsReference: the checked-in reference pages and man pages are
// exactly what the commands' tables produce, so a flag, a command or an
// exit code added, removed or reworded in the code fails here until the
// files are regenerated (`make docs`, which sets SP_UPDATE_DOCS=1).
func TestDocsReference(t *testing.T) {
	update := os.Getenv("SP_UPDATE_DOCS") == "1"
	for path, want := range Files() {
		full := filepath.Join("..", "..", path)
		got, err := os.ReadFile(full)
		if string(got) == want {
			continue
		}
		if update {
			if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(full, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("rewrote %s", path)
			continue
		}
		if err != nil {
			t.Errorf("%s: %v; run %s", path, err, Regenerate)
			continue
		}
		t.Errorf("%s differs from what the commands' tables produce (%s); run %s", path, firstDiff(string(got), want), Regenerate)
	}
}

// firstDiff says where got and want first differ: the line, as each has it.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var a, b string
		if i < len(g) {
			a = g[i]
		}
		if i < len(w) {
			b = w[i]
		}
		if a != b {
			return fmt.Sprintf("line %d: the file has %q, the code gives %q", i+1, a, b)
		}
	}
	return "they differ"
}

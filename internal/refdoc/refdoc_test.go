package refdoc

import (
	"os"
	"path/filepath"
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
		t.Errorf("%s differs from what the commands' tables produce; run %s", path, Regenerate)
	}
}

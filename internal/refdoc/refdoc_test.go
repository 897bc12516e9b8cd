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

// TestPagesListEveryCommand: the pages list the commands and their flags
// (master's verb table is built on first use: a reference made before it
// listed none, and the drift test could not tell).
func TestPagesListEveryCommand(t *testing.T) {
	want := map[string][]string{"master": {"submit", "wait", "status", "cancel", "pool start", "report"}, "runner": {"check"}}
	for _, p := range Pages() {
		have := map[string]int{}
		for _, c := range p.Commands {
			have[c.Name] = len(c.Flags)
		}
		for _, name := range want[p.Name] {
			if n, ok := have[name]; !ok || n == 0 {
				t.Errorf("%s's page: command %q listed %v with %d flags, want it with its flags", p.Name, name, ok, n)
			}
		}
		if len(p.Flags) == 0 && p.Name == "runner" {
			t.Errorf("runner's page lists no flags")
		}
	}
}

package farm

import (
	"strings"
	"testing"

	"github.com/skillpilot/skillpilot/internal/doctest"
)

// TestSGEDocsPool runs docs/farms.md's Grid Engine pool as written, on
// the real Grid Engine make test-sge brings up (cmd/master/docs_test.go
// runs the same block with --via local).
func TestSGEDocsPool(t *testing.T) {
	needSGE(t)
	e := doctest.NewEnv(t)
	b := doctest.Get(t, "pool-sge")
	out := e.Bash(b)
	for _, w := range []string{"ff\n", "4 sessions, 4 serving, via sge", "stop_request"} {
		if !strings.Contains(out, w) {
			t.Fatalf("%s printed no %q:\n%s", b.Where(), w, out)
		}
	}
}

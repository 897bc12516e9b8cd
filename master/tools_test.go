package master

import (
	"testing"

	"github.com/skillpilot/skillpilot/internal/testenv"
)

// needTool returns the path of a program a test needs. Under CI (CI=true)
// a missing program fails the test; elsewhere the test is skipped with the
// program's name, so a developer knows what to install.
func needTool(t *testing.T, name string) string {
	t.Helper()
	pkg := map[string]string{"tclsh": "tcl", "promtool": "prometheus"}[name]
	if pkg == "" {
		pkg = name
	}
	return testenv.NeedTool(t, name, pkg) // scripts/deps.sh installs it
}

package master

import (
	"os"
	"os/exec"
	"testing"
)

// needTool returns the path of a program a test needs. Under CI (CI=true)
// a missing program fails the test; elsewhere the test is skipped with the
// program's name, so a developer knows what to install.
func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is not installed (scripts/deps.sh installs it)", name)
	}
	t.Skipf("%s is not installed (scripts/deps.sh installs it)", name)
	return ""
}

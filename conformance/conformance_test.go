package conformance

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

func TestMain(m *testing.M) {
	Main()
	os.Exit(m.Run())
}

// needTool returns the path of a tool the masters need: a failure under CI,
// a skip naming the Debian package elsewhere.
func needTool(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		need(t, name+" not installed (Debian package "+pkg+")")
	}
	return p
}

// TestConformance runs every scenario with every master against a real
// runner on tclsh, on this host.
func TestConformance(t *testing.T) {
	needTool(t, "tclsh", "tcl")
	needTool(t, "python3", "python3")
	needTool(t, "bash", "bash")
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	Run(t, Env{Repo: repo, Bin: MakeBin(t), Self: self, RunnerRoot: t.TempDir()})
}

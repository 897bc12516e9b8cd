package conformance

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/skillpilot/skillpilot/internal/testenv"
)

func TestMain(m *testing.M) {
	Main()
	os.Exit(m.Run())
}

// TestConformance runs every scenario with every master against a real
// runner on tclsh, on this host.
func TestConformance(t *testing.T) {
	testenv.NeedTool(t, "tclsh", "tcl")
	testenv.NeedTool(t, "python3", "python3")
	testenv.NeedTool(t, "bash", "bash")
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

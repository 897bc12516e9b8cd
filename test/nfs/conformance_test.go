package nfs

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/skillpilot/skillpilot/internal/conformance"
)

func TestMain(m *testing.M) {
	conformance.Main() // This binary also serves as the runner, the master CLI and the Go adapters.
	code := m.Run()
	stopHostB()
	os.Exit(code)
}

// TestNFSConformance runs the conformance suite (internal/conformance/scenarios)
// with every runner on client A and every master on client B, in a UTS
// namespace of its own (host "hostb", hostb_test.go): the same scenarios and expectations
// as on one host, across two NFS clients.
func TestNFSConformance(t *testing.T) {
	if mountA == "" || mountB == "" || repo == "" {
		t.Skip("not on NFS: run make test-nfs")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const root = "conformance"
	if err := os.MkdirAll(filepath.Join(mountA, root), 0o755); err != nil {
		t.Fatal(err)
	}
	// The runner and master binaries run-nfs-tests.sh built from this tree,
	// when it gave both: each call one exec in the slow guest.
	var bin string
	if runnerBin != "" && os.Getenv("SP_MASTER_BIN") != "" {
		bin = conformance.LinkBin(t, runnerBin, masterCLI(t))
	} else {
		bin = conformance.MakeBin(t)
	}
	conformance.Run(t, conformance.Env{
		Repo: repo, Bin: bin, Self: self,
		RunnerRoot: filepath.Join(mountA, root), MasterRoot: filepath.Join(mountB, root),
		MasterPrefix: onHostBPrefix(t),
	})
}

package conformance

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/skillpilot/skillpilot/cmd/master/cli"
	"github.com/skillpilot/skillpilot/cmd/runner/runnercli"
	"github.com/skillpilot/skillpilot/internal/testenv"
)

// Main makes a test binary act as the runner, the master CLI or the Go and
// CLI adapters when ExecEnv says so; call it first in TestMain. It returns
// when ExecEnv is not set.
func Main() {
	role := os.Getenv(ExecEnv)
	if role == "" {
		return
	}
	_ = os.Unsetenv(ExecEnv) // Not for the processes this one starts.
	switch role {
	case "runner":
		os.Exit(runnercli.Main(os.Args[1:], os.Stdout, os.Stderr))
	case "master":
		os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	case "adapter-go":
		os.Exit(goAdapter(os.Args[1]))
	case "adapter-cli":
		os.Exit(cliAdapter(os.Args[1], os.Getenv("SP_MASTER_BIN")))
	}
	fmt.Fprintf(os.Stderr, "%s=%s: unknown role\n", ExecEnv, role)
	os.Exit(2)
}

// LinkBin returns a new directory holding "runner" and "master" as
// symbolic links to the binaries given: for a suite that has the real
// binaries at hand (the NFS suite), each runner and CLI call is then one
// exec of the binary users run, not a shell script starting this test
// binary (two execs, which cost a guest of the NFS suite about 0.3 s a
// call; BENCHMARKS.md).
func LinkBin(t testing.TB, runner, master string) string {
	t.Helper()
	bin := t.TempDir()
	for role, target := range map[string]string{"runner": runner, "master": master} {
		abs, err := filepath.Abs(target)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(abs, filepath.Join(bin, role)); err != nil {
			t.Fatal(err)
		}
	}
	return bin
}

// MakeBin writes "runner" and "master" into a new directory: scripts that
// run this test binary (which must call Main) as the runner and as the
// master CLI, so that every master and the shell find them on PATH.
func MakeBin(t testing.TB) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	for _, role := range []string{"runner", "master"} {
		script := fmt.Sprintf("#!/bin/sh\n%s=%s exec %q \"$@\"\n", ExecEnv, role, self)
		testenv.WriteExecutable(t, filepath.Join(bin, role), []byte(script))
	}
	return bin
}

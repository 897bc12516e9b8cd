package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// CI reports whether the tests run under CI (the environment variable CI
// is "true"), where nothing a test needs may be missing.
func CI() bool { return os.Getenv("CI") == "true" }

// Unavailable ends the test because something it needs is missing: under
// CI=true it fails with the message, elsewhere it skips with it. The
// message should say what to install or how to run the test.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if CI() {
		t.Fatalf("%s (required under CI=true)", msg)
	}
	t.Skip(msg)
}

// NeedTool returns the path of the program name on PATH. When it is
// missing the test fails under CI=true and is skipped elsewhere, naming
// the Debian package pkg that provides it.
func NeedTool(t testing.TB, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Unavailable(t, "%s is not installed: install the Debian package %s (apt-get install %s)", name, pkg, pkg)
	}
	if name == "python3" {
		return Python3() // Not a version manager's shim.
	}
	return p
}

// Python3 is the interpreter python3 names, resolved once (or "python3"
// when that fails). python3 is often a version manager's shim: pyenv's is
// a bash script that runs a dozen programs, about a second per start here
// and fifteen in the user-mode Linux guest of the NFS suite. Tests run the
// interpreter itself.
var Python3 = sync.OnceValue(func() string {
	out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if exe := strings.TrimSpace(string(out)); err == nil && filepath.IsAbs(exe) {
		return exe
	}
	return "python3"
})

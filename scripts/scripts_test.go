// Package scripts holds the tests of the scripts in this directory.
package scripts

import (
	"github.com/skillpilot/skillpilot/internal/testenv"

	"os"
	"os/exec"
	"strings"
	"testing"
)

// subreaper.py reaps a daemon's orphaned child: it exits only once the
// orphan has exited, and the orphan is then gone, not a zombie
// (sge-down.sh left a zombie sge_qmaster where PID 1 reaps nothing).
func TestSubreaperReapsOrphans(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatal("python3 is needed")
	}
	out, err := exec.Command(testenv.Python3(), "subreaper.py", "sh", "-c", "sleep 0.3 & echo $!").Output()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	pid := strings.TrimSpace(string(out))
	if pid == "" {
		t.Fatal("no pid printed")
	}
	if b, err := os.ReadFile("/proc/" + pid + "/stat"); err == nil {
		t.Errorf("the orphan %s is still there after the subreaper exited: %s", pid, b)
	}
	if err := exec.Command(testenv.Python3(), "subreaper.py", "sh", "-c", "exit 3").Run(); err == nil {
		t.Error("the command's exit status 3 was not passed on")
	} else if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
		t.Errorf("exit: %v", err)
	}
}

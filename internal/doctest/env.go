package doctest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/internal/testenv"
)

// Env is where a test runs a document's blocks as a reader would: a
// scratch directory laid out like a source tree (testdata/ and master/
// link to the repository's), the built runner, master and master-mcp
// first on PATH, the Python and Tcl masters importable, and the absolute
// paths the documents use (/tmp/..., /proj/...) moved into the scratch
// directory.
type Env struct {
	Dir  string   // the working directory of every block: the "source tree"
	Tmp  string   // where /tmp/ of a document goes; /proj/ is Tmp/proj/
	Repo string   // the repository's root
	Bin  string   // runner, master and master-mcp
	Vars []string // KEY=VALUE added to every block's environment
	t    testing.TB
	pgid []int
}

// NewEnv makes an Env; when the test ends, every process group a block
// started is killed and every runner left serving a session under Tmp is
// stopped, so that a failed block leaves nothing running.
func NewEnv(t testing.TB) *Env {
	t.Helper()
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	e := &Env{Dir: t.TempDir(), Tmp: t.TempDir(), Repo: root, Bin: t.TempDir(), t: t}
	for _, l := range []string{"testdata", "master"} {
		if err := os.Symlink(filepath.Join(root, l), filepath.Join(e.Dir, l)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(e.Tmp, "proj"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, pkg := range map[string]string{"runner": testenv.Runner, "master": testenv.Master, "master-mcp": testenv.MasterMCP} {
		if err := os.Symlink(testenv.BuildBinary(t, pkg), filepath.Join(e.Bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	e.Vars = []string{
		"PATH=" + e.Bin + string(os.PathListSeparator) + os.Getenv("PATH"),
		"PYTHONPATH=" + filepath.Join(root, "clients", "python"),
		"PYTHONDONTWRITEBYTECODE=1",
		"TCLLIBPATH=" + filepath.Join(root, "clients", "tcl"),
		"SP_SESSION_DIR=", "SP_POOL_DIR=",
	}
	t.Cleanup(e.cleanup)
	return e
}

// Rebase moves the document's absolute paths into the scratch directory:
// /tmp/X becomes Tmp/X and /proj/X Tmp/proj/X.
func (e *Env) Rebase(text string) string {
	return strings.NewReplacer("/tmp/", e.Tmp+"/", "/proj/", e.Tmp+"/proj/").Replace(text)
}

// Path is a document's absolute path as Rebase moves it.
func (e *Env) Path(p string) string { return e.Rebase(p) }

// Bash runs the block (rebased) with bash -euo pipefail in Dir and returns
// what it printed (stdout and stderr together); a non-zero exit fails the
// test with the output and the script.
func (e *Env) Bash(b Block, vars ...string) string {
	e.t.Helper()
	return e.Run(b, []string{"bash", "-euo", "pipefail", "-c"}, vars...)
}

// Run runs the block (rebased) as the last argument of argv, or, when
// argv ends in "FILE", written to a file whose path replaces it (python3
// FILE, tclsh FILE).
func (e *Env) Run(b Block, argv []string, vars ...string) string {
	e.t.Helper()
	out, err := e.run(b, argv, vars...)
	if err != nil {
		e.t.Fatalf("%s (%s): %v\n%s\n--- block:\n%s", b.Where(), b.Name, err, out, e.Rebase(b.Text))
	}
	return out
}

func (e *Env) run(b Block, argv []string, vars ...string) (string, error) {
	text := e.Rebase(b.Text)
	args := append([]string(nil), argv...)
	if n := len(args); n > 0 && args[n-1] == "FILE" {
		f := filepath.Join(e.t.TempDir(), "block."+b.Lang)
		if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
			e.t.Fatal(err)
		}
		args[n-1] = f
	} else {
		args = append(args, text)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = e.Dir
	cmd.Env = append(append(os.Environ(), e.Vars...), vars...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A file, not a pipe: a runner the block leaves in the background
	// keeps the block's stdout, and Wait would wait for it to close a pipe.
	out, err := os.CreateTemp(e.t.TempDir(), "out")
	if err != nil {
		e.t.Fatal(err)
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return "", err
	}
	e.pgid = append(e.pgid, cmd.Process.Pid)
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-done:
		case <-time.After(5 * time.Minute): // Anti-hang guard, not a timing assertion.
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	}()
	err = cmd.Wait()
	data, rerr := os.ReadFile(out.Name())
	if rerr != nil {
		e.t.Fatal(rerr)
	}
	return string(data), err
}

// cleanup stops what the blocks left running: runners serving a session
// under Tmp (a force stop through master), then every process group a
// block started.
func (e *Env) cleanup() {
	_ = filepath.WalkDir(e.Tmp, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if _, err := os.Stat(filepath.Join(p, "state", "runner.lock")); err == nil {
			_ = exec.Command(filepath.Join(e.Bin, "master"), "stop", "--session", p, "--force", "--wait", "--wait-for-runner", "2s").Run()
			return filepath.SkipDir
		}
		return nil
	})
	for _, pg := range e.pgid {
		_ = syscall.Kill(-pg, syscall.SIGKILL)
	}
}

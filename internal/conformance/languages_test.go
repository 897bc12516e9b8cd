package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/internal/sessionio"
	"github.com/skillpilot/skillpilot/internal/testenv"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
)

func repoPath(t *testing.T, rel string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", rel))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPythonUnittest runs the Python master's own unittest suite
// (clients/python/tests: its logic against a fake runner, the CLI, the
// build backend).
func TestPythonUnittest(t *testing.T) {
	t.Parallel()
	testenv.Slow(t, "the Python master's own suite; alone: cd clients/python && python3 -m unittest discover -s tests -t .")
	py := testenv.NeedTool(t, "python3", "python3")
	cmd := exec.Command(py, "-m", "unittest", "discover", "-s", "tests", "-t", ".")
	cmd.Dir = repoPath(t, "clients/python")
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

// TestTclTests runs the Tcl master's tcltest suite (clients/tcl/tests).
func TestTclTests(t *testing.T) {
	t.Parallel()
	testenv.Slow(t, "the Tcl master's own suite; alone: cd clients/tcl/tests && tclsh all.tcl")
	tcl := testenv.NeedTool(t, "tclsh", "tcl")
	testenv.NeedTool(t, "flock", "util-linux")
	cmd := exec.Command(tcl, "all.tcl")
	cmd.Dir = repoPath(t, "clients/tcl/tests")
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("Failed\t0")) {
		t.Fatalf("%v\n%s", err, out)
	}
}

// TestPythonPipInstallOffline installs the Python master as docs/python.md shows,
// into a fresh virtual environment with no package index, and runs it.
func TestPythonPipInstallOffline(t *testing.T) {
	t.Parallel()
	testenv.Slow(t, "an offline pip install into a fresh venv")
	py := testenv.NeedTool(t, "python3", "python3")
	venv := filepath.Join(t.TempDir(), "venv")
	if out, err := exec.Command(py, "-m", "venv", venv).CombinedOutput(); err != nil {
		need(t, fmt.Sprintf("python3 -m venv failed (Debian package python3-venv): %v\n%s", err, out))
	}
	pip := exec.Command(filepath.Join(venv, "bin", "pip"), "install", "--no-index", "--disable-pip-version-check",
		repoPath(t, "clients/python"))
	pip.Env = append(os.Environ(), "PIP_NO_INDEX=1", "PIP_CONFIG_FILE=/dev/null")
	if out, err := pip.CombinedOutput(); err != nil {
		t.Fatalf("pip install: %v\n%s", err, out)
	}
	check := exec.Command(filepath.Join(venv, "bin", "python"), "-c",
		"import skillpilot, skillpilot_master, sys; s = skillpilot.Session(sys.argv[1]); print(skillpilot.__version__, s.status()['alive'])",
		startSession(t))
	check.Dir = t.TempDir() // Not the source tree: the installed package.
	out, err := check.CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "1.0.0 ") {
		t.Fatalf("installed package: %v\n%s", err, out)
	}
	code := exec.Command(filepath.Join(venv, "bin", "skillpilot-master"), "status", "--session", filepath.Join(t.TempDir(), "none"))
	if err := code.Run(); code.ProcessState.ExitCode() != 5 {
		t.Fatalf("skillpilot-master status on no session: %v, want exit 5", err)
	}
}

// startSession makes a session directory (as a runner would) with no runner.
func startSession(t *testing.T) string {
	dir := filepath.Join(t.TempDir(), "sess")
	for _, d := range protocol.Dirs {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestMixedMastersOneSession: the Go, Python, Tcl and shell masters submit
// to one session at the same time; every seq is unique and every command
// gets its result, executed once.
func TestMixedMastersOneSession(t *testing.T) {
	t.Parallel()
	testenv.Slow(t, "five masters on one session")
	py, tcl := testenv.NeedTool(t, "python3", "python3"), testenv.NeedTool(t, "tclsh", "tcl")
	bin := MakeBin(t)
	dir := filepath.Join(t.TempDir(), "sess")
	side := filepath.Join(t.TempDir(), "side")
	runner := exec.Command(filepath.Join(bin, "runner"), "--session", dir, "--heartbeat", "500ms")
	if err := runner.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = runner.Process.Kill(); _ = runner.Wait() })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := master.WaitReady(ctx, dir, master.WaitOptions{}); err != nil {
		t.Fatal(err)
	}
	const each = 25
	payload := func(who string) string {
		return fmt.Sprintf(`set f [open %q a]; puts $f %s-$i; close $f`, side, who)
	}
	pyScript := fmt.Sprintf("import skillpilot as sp\ns = sp.Session(%q)\nfor i in range(%d):\n    print(s.submit(%q.replace('$i', str(i)))[1])\n",
		dir, each, payload("py"))
	tclScript := fmt.Sprintf("package require skillpilot\nfor {set i 0} {$i < %d} {incr i} { puts [skillpilot::submit %s [string map [list \\$i $i] {%s}]] }\n",
		each, dir, payload("tcl"))
	lines := func(who string) string {
		var b strings.Builder
		for i := 0; i < each; i++ {
			fmt.Fprintf(&b, "submit payload_b64=%s\n", b64(strings.ReplaceAll(payload(who), "$i", fmt.Sprint(i))))
		}
		return b.String()
	}
	procs := []*exec.Cmd{
		exec.Command(py, "-c", pyScript),
		exec.Command(tcl),
		exec.Command("bash", repoPath(t, "clients/sh/skillpilot_master.sh"), dir),
		exec.Command(os.Args[0], dir),
	}
	procs[0].Env = append(os.Environ(), "PYTHONPATH="+repoPath(t, "clients/python"), "PYTHONDONTWRITEBYTECODE=1")
	procs[1].Env = append(os.Environ(), "TCLLIBPATH="+repoPath(t, "clients/tcl"))
	procs[1].Stdin = strings.NewReader(tclScript)
	procs[2].Stdin = strings.NewReader(lines("sh"))
	procs[3].Env = append(os.Environ(), ExecEnv+"=adapter-go")
	procs[3].Stdin = strings.NewReader(lines("go"))
	outs := make([]*bytes.Buffer, len(procs))
	for i, p := range procs {
		outs[i] = &bytes.Buffer{}
		p.Stdout, p.Stderr = outs[i], os.Stderr
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
	}
	for i, p := range procs {
		if err := p.Wait(); err != nil {
			t.Fatalf("%v: %v\n%s", p.Args, err, outs[i])
		}
	}
	// In the order commands move (queue/ -> inflight/ -> a result, which
	// stays), so a command that moves on between two globs is still seen
	// by the later one.
	names, _ := filepath.Glob(filepath.Join(dir, "queue", "cmd_*"))
	inflight, _ := filepath.Glob(filepath.Join(dir, "inflight", "cmd_*"))
	results, _ := filepath.Glob(filepath.Join(dir, "result", "cmd_*"))
	all := append(append(names, inflight...), results...)
	seqs := map[int64]string{}
	for _, p := range all {
		seq, id, err := protocol.ParseCommandName(filepath.Base(p))
		if err != nil {
			t.Fatal(err)
		}
		if prev, dup := seqs[seq]; dup && filepath.Base(prev) != filepath.Base(p) {
			t.Fatalf("seq %d used by %s and %s", seq, prev, p)
		}
		seqs[seq] = p
		// By its file name, not a lookup by cmd_id: the command may move
		// between directories meanwhile.
		c := &commandWaiter{dir: dir, name: filepath.Base(p), id: id}
		if r := c.wait(t, ctx); r.Status != protocol.StatusOK {
			t.Fatalf("%s: %s %v", c.name, r.Status, r.Error)
		}
	}
	if len(seqs) != 4*each {
		t.Fatalf("%d commands, want %d", len(seqs), 4*each)
	}
	data, err := os.ReadFile(side)
	if err != nil {
		t.Fatal(err)
	}
	ran := map[string]int{}
	for _, l := range strings.Fields(string(data)) {
		ran[l]++
	}
	for _, who := range []string{"py", "tcl", "sh", "go"} {
		for i := 0; i < each; i++ {
			if n := ran[fmt.Sprintf("%s-%d", who, i)]; n != 1 {
				t.Errorf("%s-%d ran %d times", who, i, n)
			}
		}
	}
}

// commandWaiter polls for a command's result by its file name.
type commandWaiter struct{ dir, name, id string }

func (c *commandWaiter) wait(t *testing.T, ctx context.Context) protocol.Result {
	t.Helper()
	for {
		data, err := os.ReadFile(filepath.Join(c.dir, protocol.DirResult, c.name))
		if err == nil {
			var r protocol.Result
			if err := json.Unmarshal(data, &r); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			return r
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: no result", c.name)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestEveryMasterReadsTheGoHint: the Go master writes seq/hint as a
// record of fixed width, in place (sessionio.HintRecord, PROTOCOL.md
// section 5); the Python, Tcl and shell masters read it as the hint,
// padding and all. The session holds no reservation below the hint, so a
// master that failed to parse it and listed seq/ instead would take seq 1,
// not the one after the hint.
func TestEveryMasterReadsTheGoHint(t *testing.T) {
	t.Parallel()
	py, tcl := testenv.NeedTool(t, "python3", "python3"), testenv.NeedTool(t, "tclsh", "tcl")
	const hint = 41
	for _, who := range []string{"go", "py", "tcl", "sh"} {
		t.Run(who, func(t *testing.T) {
			dir := startSession(t)
			s, err := master.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			root, err := s.Core().Root()
			if err != nil {
				t.Fatal(err)
			}
			sessionio.WriteHint(root, hint)
			if b, _ := os.ReadFile(filepath.Join(dir, protocol.FileSeqHint)); string(b) != string(sessionio.HintRecord(hint)) {
				t.Fatalf("seq/hint %q, want the padded record %q", b, sessionio.HintRecord(hint))
			}
			var cmd *exec.Cmd
			switch who {
			case "go":
				if _, err := s.Submit(context.Background(), "puts x", master.SubmitOptions{}); err != nil {
					t.Fatal(err)
				}
			case "py":
				cmd = exec.Command(py, "-c", "import skillpilot as sp, sys\nsp.Session(sys.argv[1]).submit('puts x')\n", dir)
				cmd.Env = append(os.Environ(), "PYTHONPATH="+repoPath(t, "clients/python"), "PYTHONDONTWRITEBYTECODE=1")
			case "tcl":
				cmd = exec.Command(tcl)
				cmd.Stdin = strings.NewReader(fmt.Sprintf("package require skillpilot\nskillpilot::submit %s {puts x}\n", dir))
				cmd.Env = append(os.Environ(), "TCLLIBPATH="+repoPath(t, "clients/tcl"))
			case "sh":
				cmd = exec.Command("bash", repoPath(t, "clients/sh/skillpilot_master.sh"), dir)
				cmd.Stdin = strings.NewReader("submit payload_b64=" + b64("puts x") + "\n")
			}
			if cmd != nil {
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("%v: %v\n%s", cmd.Args, err, out)
				}
			}
			names, _ := filepath.Glob(filepath.Join(dir, protocol.DirQueue, "cmd_*"))
			if len(names) != 1 {
				t.Fatalf("queue/ holds %v, want one command", names)
			}
			seq, _, err := protocol.ParseCommandName(filepath.Base(names[0]))
			if err != nil || seq != hint+1 {
				t.Fatalf("%s took seq %d (%v), want %d: the hint %q was not read", who, seq, err, hint+1, sessionio.HintRecord(hint))
			}
			b, _ := os.ReadFile(filepath.Join(dir, protocol.FileSeqHint))
			if strings.TrimSpace(string(b)) != fmt.Sprint(hint+1) {
				t.Errorf("seq/hint after %s's submit: %q, want %d", who, b, hint+1)
			}
		})
	}
}

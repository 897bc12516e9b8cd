package toolcheck_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/skillpilot/skillpilot/internal/testenv"
	"github.com/skillpilot/skillpilot/internal/zoo"
	"github.com/skillpilot/skillpilot/toolcheck"
)

var update = flag.Bool("update", false, "rewrite the tool matrix (docs/drivers.md) from the catalogue's expectations (internal/zoo)")

// expected is what the catalogue says the check must find on t for the
// check name: a status and words its detail must hold.
func expected(t zoo.Tool, name string) (toolcheck.Status, string) {
	e, ok := t.Expect[name]
	if !ok {
		e, ok = t.Expect["*"]
	}
	if !ok {
		return toolcheck.Holds, ""
	}
	st, words, _ := strings.Cut(e, ": ")
	return toolcheck.Status(st), words
}

// TestCheckTools runs `runner check --json` on every tool of the catalogue
// (internal/zoo): the real EDA shells and every zoo shell. Each row of
// its report must say what the catalogue expects, with the tool's own
// words where it names any; the cancel row what Ctrl-C does to the tool;
// the exit code 0 exactly when every guarantee holds.
func TestCheckTools(t *testing.T) {
	testenv.Slow(t, "runner check on every real tool and zoo shell")
	bin := testenv.BuildBinary(t, testenv.Runner)
	for _, tool := range zoo.All() {
		t.Run(strings.ReplaceAll(tool.Name, " ", "_"), func(t *testing.T) {
			t.Parallel()
			testenv.NeedTool(t, tool.Program, tool.Package)
			work := t.TempDir()
			pids := filepath.Join(work, "jobserver.pids")
			defer killPids(pids)
			args := append([]string{"check", "--json", "--timeout", "30s", "--init-timeout", "30s"}, tool.Flags...)
			cmd := exec.Command(bin, append(append(args, "--"), tool.Command()...)...)
			cmd.Dir = work
			cmd.Env = append(os.Environ(), "ZOO_LOG="+filepath.Join(work, "zoo.log"), "ZOO_JOBSERVER_PIDFILE="+pids, "TMPDIR="+work)
			if tool.X {
				cmd.Env = append(cmd.Env, "DISPLAY="+testenv.Xvfb(t))
			}
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			var rep toolcheck.Report
			if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
				t.Fatalf("exit %d, stdout %q, stderr %s: %v", code, stdout.String(), stderr.String(), err)
			}
			var table bytes.Buffer
			rep.WriteTable(&table)
			if len(rep.Checks) != len(toolcheck.Titles) {
				t.Fatalf("%d checks, want %d:\n%s", len(rep.Checks), len(toolcheck.Titles), table.String())
			}
			wantOK := true
			for i, c := range rep.Checks {
				if c.Name != toolcheck.Titles[i].Name {
					t.Fatalf("check %d is %s, want %s", i, c.Name, toolcheck.Titles[i].Name)
				}
				st, words := expected(tool, c.Name)
				if st == toolcheck.Fails {
					wantOK = false
				}
				if c.Status != st || !strings.Contains(c.Detail, words) {
					t.Errorf("%s: %s %q, want %s with %q", c.Name, c.Status, c.Detail, st, words)
				}
				if c.Name == "cancel" && c.Status == toolcheck.Holds {
					if got := cancelOf(c); got != tool.Cancel {
						t.Errorf("cancel: the check found the tool %s (%s), the catalogue says %s", got, c.Detail, tool.Cancel)
					}
				}
			}
			if wantOK != (code == 0) || rep.OK != (code == 0) {
				t.Errorf("exit %d (ok %v), want exit %d", code, rep.OK, map[bool]int{true: 0, false: 1}[wantOK])
			}
			if t.Failed() {
				t.Logf("runner check's table:\n%s\nstderr:\n%s", table.String(), stderr.String())
			}
		})
	}
}

// cancelOf is what a cancel that held did to the tool.
func cancelOf(c toolcheck.Check) string {
	switch {
	case c.ToolRestarted == nil || c.KeptState == nil:
		return "unknown"
	case !*c.ToolRestarted && *c.KeptState:
		return "kept"
	case strings.Contains(c.Detail, "did not bring the tool back"):
		return "terminated"
	}
	return "restarted"
}

func killPids(file string) {
	data, _ := os.ReadFile(file)
	for _, f := range strings.Fields(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// Markers around the tool matrix (docs/drivers.md).
const (
	matrixBegin = "<!-- tool matrix: made by toolcheck's TestToolMatrix from internal/zoo; go test ./toolcheck -run TestToolMatrix -args -update rewrites it -->"
	matrixEnd   = "<!-- end of the tool matrix -->"
)

// matrix is the tool matrix (docs/drivers.md): one row per tool of the catalogue, one
// column per check of `runner check`, each cell what TestCheckTools
// asserts the check finds.
func matrix() string {
	var b strings.Builder
	b.WriteString("| tool | command line |")
	for _, tt := range toolcheck.Titles {
		b.WriteString(" " + tt.Title + " |")
	}
	b.WriteString(" what it is; what it prevents |\n|---|---|")
	b.WriteString(strings.Repeat("---|", len(toolcheck.Titles)+1) + "\n")
	for _, tool := range zoo.All() {
		name := tool.Name
		if !tool.Zoo {
			name += fmt.Sprintf(" (`%s`)", tool.Package)
		}
		fmt.Fprintf(&b, "| %s | `%s` |", name, tool.Display())
		for _, tt := range toolcheck.Titles {
			st, _ := expected(tool, tt.Name)
			cell := map[toolcheck.Status]string{toolcheck.Holds: "yes", toolcheck.Fails: "**no**", toolcheck.NotApplicable: "n/a", toolcheck.NotRun: "-"}[st]
			if tt.Name == "cancel" && st == toolcheck.Holds {
				cell += map[string]string{"restarted": ", restarted", "kept": ", keeps its state", "terminated": ", terminated after `--resync-wait`"}[tool.Cancel]
			}
			b.WriteString(" " + cell + " |")
		}
		notes := tool.Behaviour
		if tool.Prevents != "" {
			notes += ". **Prevents:** " + tool.Prevents
		}
		b.WriteString(" " + strings.ReplaceAll(notes, "|", "\\|") + " |\n")
	}
	return b.String()
}

// TestToolMatrix: the tool matrix (docs/drivers.md) is the catalogue's expectations,
// which TestCheckTools holds `runner check` to, so it cannot drift from
// what the check prints.
func TestToolMatrix(t *testing.T) {
	path := filepath.Join("..", "docs", "drivers.md")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	i, j := strings.Index(s, matrixBegin), strings.Index(s, matrixEnd)
	if i < 0 || j < i {
		t.Fatalf("docs/drivers.md has no tool matrix between %q and %q", matrixBegin, matrixEnd)
	}
	want := matrix()
	got := s[i+len(matrixBegin)+1 : j]
	if got == want {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(s[:i+len(matrixBegin)+1]+want+s[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("the tool matrix (docs/drivers.md) is not the catalogue's (go test ./toolcheck -run TestToolMatrix -args -update):\n%s", want)
}

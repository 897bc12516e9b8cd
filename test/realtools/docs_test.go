package realtools

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/skillpilot/skillpilot/internal/doctest"
	"github.com/skillpilot/skillpilot/internal/testenv"
)

// The code blocks of README.md and docs/*.md that drive real EDA shells,
// run as written (internal/doctest).

// README's Yosys → OpenSTA flow.
func TestDocsReadmeYosysSTA(t *testing.T) {
	testenv.Slow(t, "real EDA shells")
	testenv.NeedTool(t, "yosys", "yosys")
	testenv.NeedTool(t, "sta", "opensta")
	e := doctest.NewEnv(t)
	b := doctest.Get(t, "readme-yosys-sta")
	out := e.Bash(b)
	b.Want(t, out, "Dumping module `\\counter'.", "slack (MET)")
	if strings.Count(out, "slack (MET)") != 2 {
		t.Fatalf("want a setup and a hold path met:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(e.Path("/tmp/sp-flow"), "netlist.v")); err != nil {
		t.Fatalf("Yosys wrote no netlist: %v", err)
	}
}

// docs/real-flow.md, in order: the command line, the Python flow on the
// same sessions, ngspice.
func TestDocsRealFlow(t *testing.T) {
	testenv.Slow(t, "real EDA shells")
	testenv.NeedTool(t, "yosys", "yosys")
	testenv.NeedTool(t, "sta", "opensta")
	testenv.NeedTool(t, "ngspice", "ngspice")
	testenv.NeedTool(t, "python3", "python3")
	e := doctest.NewEnv(t)
	b := doctest.Get(t, "flow-cli")
	out := e.Bash(b)
	b.Want(t, out, "ERROR: No such command: nosuchpass", "exit 1\n", "Dumping module `\\counter'.",
		"Number of cells:", "Startpoint: ", "slack (MET)", "_35_/D (DFF)")
	b = doctest.Get(t, "flow-python")
	if out := e.Bash(b); !strings.HasPrefix(out, "2\n") {
		t.Fatalf("%s printed %q, want the count of slack (MET) lines, 2", b.Where(), out)
	}
	b = doctest.Get(t, "flow-ngspice")
	out = e.Bash(b)
	if !regexp.MustCompile(`(?m)^t50 += +\S+$`).MatchString(out) || !regexp.MustCompile(`(?m)^vend += +\S+$`).MatchString(out) {
		t.Fatalf("%s: no measurements:\n%s", b.Where(), out)
	}
	b.Want(t, out, "v(out)[10] = ", "no such command available in ngspice", "exit 1\n")
}

// docs/drivers.md's Python REPL driver, written as the document shows and
// driven as it shows.
func TestDocsDriverPyrepl(t *testing.T) {
	testenv.Slow(t, "a real REPL")
	testenv.NeedTool(t, "python3", "python3")
	e := doctest.NewEnv(t)
	drv := doctest.Get(t, "driver-pyrepl")
	if err := os.WriteFile(filepath.Join(e.Dir, "py.json"), []byte(drv.Text), 0o644); err != nil {
		t.Fatal(err)
	}
	b := doctest.Get(t, "driver-pyrepl-run")
	out := e.Bash(b)
	b.Want(t, out, "42\n0\n1\n2\n", "ZeroDivisionError: division by zero", "exit 1\n")
	if strings.Count(out, "42\n") != 2 {
		t.Fatalf("%s: the interpreter did not keep x:\n%s", b.Where(), out)
	}
}

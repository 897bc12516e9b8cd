package realtools

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/skillpilot/skillpilot/internal/testenv"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
)

// flowDir copies testdata/flow into a new directory.
func flowDir(t *testing.T) string {
	t.Helper()
	src := repoFile(t, "testdata/flow")
	dst := t.TempDir()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// TestFlowYosysOpenSTA: one Python flow (testdata/flow/flow.py) drives
// Yosys and OpenSTA, each in its own session: Yosys maps a counter to a
// small Liberty library, OpenSTA reports its setup and hold paths. The
// report through SkillPilot is byte for byte what OpenSTA prints run in
// batch on the same netlist.
func TestFlowYosysOpenSTA(t *testing.T) {
	testenv.Slow(t, "real EDA shells")
	testenv.NeedTool(t, "yosys", "yosys")
	testenv.NeedTool(t, "sta", "opensta")
	py := testenv.NeedTool(t, "python3", "python3")
	work := flowDir(t)
	ry := testenv.StartRunner(t, testenv.RunnerOptions{WorkDir: work, Args: []string{"--kind", "yosys"}})
	rs := testenv.StartRunner(t, testenv.RunnerOptions{WorkDir: work, Args: []string{"--", "sta", "-no_splash"}})
	cmd := exec.Command(py, filepath.Join(work, "flow.py"), ry.Dir, rs.Dir, work)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+repoFile(t, "clients/python"), "PYTHONDONTWRITEBYTECODE=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	report, err := cmd.Output()
	if err != nil {
		t.Fatalf("flow.py: %v\n%s", err, stderr.Bytes())
	}
	if _, err := os.Stat(filepath.Join(work, "netlist.v")); err != nil {
		t.Fatalf("Yosys wrote no netlist: %v", err)
	}
	batch := exec.Command("sta", "-no_splash", "-exit", "sta.tcl")
	batch.Dir = work
	want, err := batch.Output()
	if err != nil {
		t.Fatalf("sta in batch: %v", err)
	}
	for _, w := range []string{"Path Type: max", "Path Type: min", "slack (MET)", "library setup time", "library hold time"} {
		if !bytes.Contains(report, []byte(w)) {
			t.Fatalf("the report lacks %q:\n%s", w, report)
		}
	}
	if !bytes.Equal(report, want) {
		t.Fatalf("the report through SkillPilot differs from sta in batch:\n--- runner\n%s\n--- batch\n%s", report, want)
	}
}

// TestNgspiceMeasure: a transient with .meas through the runner gives the
// values `ngspice -b` gives on the same deck.
func TestNgspiceMeasure(t *testing.T) {
	testenv.Slow(t, "real EDA shells")
	testenv.NeedTool(t, "ngspice", "ngspice")
	work := flowDir(t)
	_, s := session(t, []string{"--kind", "ngspice"})
	res, out := run(t, s, "source "+filepath.Join(work, "rc.cir")+"\nrun", master.SubmitOptions{})
	if res.Status != protocol.StatusOK {
		t.Fatalf("run: %s %+v\n%s", res.Status, res.Error, out)
	}
	batch := exec.Command("ngspice", "-b", "rc.cir")
	batch.Dir = work
	b, err := batch.CombinedOutput()
	if err != nil {
		t.Fatalf("ngspice -b: %v\n%s", err, b)
	}
	meas := regexp.MustCompile(`(?m)^(t50|vend) += +(\S+)$`)
	got, want := meas.FindAllString(out, -1), meas.FindAllString(string(b), -1)
	if len(want) != 2 || len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("measurements through the runner %q, ngspice -b %q", got, want)
	}
}

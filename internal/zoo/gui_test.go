package zoo

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skillpilot/skillpilot/internal/testenv"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
)

func realTool(t *testing.T, name string) Tool {
	t.Helper()
	for _, r := range Real {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no tool %q", name)
	return Tool{}
}

// TestGUIConformance runs the core scenarios with the Go master on the
// open GUI tools' Tcl shells (xschem -x, gtkwave -W, wish), headless
// under an Xvfb of the test's own: every guarantee tclsh has. A scenario
// a tool's behaviour prevents is in its Replaced, with why.
func TestGUIConformance(t *testing.T) {
	testenv.Slow(t, "the core scenarios on xschem, gtkwave and wish under Xvfb")
	env := newScenarioEnv(t)
	for _, tool := range Real {
		if !tool.X {
			continue
		}
		t.Run(tool.Name, func(t *testing.T) {
			t.Parallel()
			testenv.NeedTool(t, tool.Program, tool.Package)
			env.run(t, tool, "DISPLAY="+testenv.Xvfb(t))
		})
	}
}

// TestUnknownRunsNoProgram: a payload's unknown command is an error on
// every interactive Tcl shell, never a program run in its name
// (interactive Tcl's unknown runs programs through auto_execok: a wish
// given "tkcon" ran tkcon, which never ended and held up a graceful stop).
func TestUnknownRunsNoProgram(t *testing.T) {
	testenv.Slow(t, "Tcl shells, some under Xvfb")
	for _, name := range []string{"tclsh", "wish", "xschem", "gtkwave", "OpenSTA", "Magic", "netgen"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tool := realTool(t, name)
			testenv.NeedTool(t, tool.Program, tool.Package)
			var env []string
			if tool.X {
				env = append(env, "DISPLAY="+testenv.Xvfb(t))
			}
			_, s, work := start(t, tool, nil, env...)
			touched := filepath.Join(work, "touched")
			res, _ := run(t, s, "touch "+touched, master.SubmitOptions{})
			if _, err := os.Stat(touched); err == nil {
				t.Fatalf("the payload \"touch FILE\" ran the program touch (%s)", res.Status)
			}
			if res.Status != protocol.StatusError || res.Error == nil || !strings.Contains(res.Error.Message, `invalid command name "touch"`) {
				t.Fatalf("touch: %s %+v, want error invalid command name", res.Status, res.Error)
			}
		})
	}
}

// TestXschemLeavesNothingOutside: xschem's Ctrl-C only prints "Use 'exit'
// to close the program", so a cancel ends it with a signal, and each
// signal that ends it leaves an emergency save: with the rc file of its
// row (testdata/gui/xschemrc) that lands in the session, never in /tmp.
// The cancel policy its row recommends, terminate_tool, ends a command at
// once, its output ending with where xschem saved.
func TestXschemLeavesNothingOutside(t *testing.T) {
	testenv.Slow(t, "xschem under Xvfb")
	tool := realTool(t, "xschem")
	testenv.NeedTool(t, tool.Program, tool.Package)
	display := testenv.Xvfb(t)
	before, _ := filepath.Glob(filepath.Join(os.TempDir(), "xschem_*"))
	rp, s, _ := start(t, tool, []string{"--resync-wait", "2s"}, "DISPLAY="+display)
	res, out := run(t, s, "xschem get version", master.SubmitOptions{})
	if res.Status != protocol.StatusOK || !strings.HasPrefix(value(res)+out, "XSCHEM V") {
		t.Fatalf("xschem get version: %s %q %q", res.Status, value(res), out)
	}
	long := "puts going; flush stdout; while 1 {after 20}"
	c := submitPrinted(t, s, long, "going", master.SubmitOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), testenv.LongWait)
	defer cancel()
	if _, err := s.Cancel(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	res, out = wait(t, c)
	if res.Status != protocol.StatusCancelled || !res.ToolRestarted || !strings.Contains(out, "Use 'exit' to close the program") {
		t.Fatalf("a Ctrl-C cancel: %s restarted=%v %q", res.Status, res.ToolRestarted, out)
	}
	c = submitPrinted(t, s, long, "going", master.SubmitOptions{CancelPolicy: protocol.PolicyTerminateTool})
	if _, err := s.Cancel(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	res, out = wait(t, c)
	if res.Status != protocol.StatusCancelled || !strings.HasPrefix(out, "going\nEMERGENCY SAVE DIR: "+filepath.Join(s.Dir(), "xschem", "xschem_emergencysave_")) {
		t.Fatalf("a terminate_tool cancel: %s %q, want cancelled, its output what it printed and where xschem saved", res.Status, out)
	}
	rp.Stop()
	saves, _ := filepath.Glob(filepath.Join(s.Dir(), "xschem", "xschem_emergencysave_*"))
	if len(saves) < 2 {
		t.Fatalf("%d emergency saves in the session (%v), want one per signal that ended xschem", len(saves), saves)
	}
	after, _ := filepath.Glob(filepath.Join(os.TempDir(), "xschem_*"))
	if len(after) > len(before) {
		t.Fatalf("xschem left files in %s: %v (before: %v)", os.TempDir(), after, before)
	}
}

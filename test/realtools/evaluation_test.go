package realtools

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skillpilot/skillpilot/internal/testenv"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
)

// TestTclOwnEvaluation holds every Tcl shell to Tcl's own evaluation of a
// payload, whatever the shell redefined: OpenSTA's source returns nothing
// and goes on after an error, and wrapped.tcl redefines source, puts,
// unknown and exit as the commercial shells do. A payload too big to
// travel inline (a file) and one that does (inline) both stop at their
// first error, with its message and Tcl's errorInfo and errorCode, and
// their value is their last command's.
func TestTclOwnEvaluation(t *testing.T) {
	testenv.Slow(t, "real EDA shells")
	tools := append(tclTools(t),
		tclTool{name: "wrapped", cmd: "tclsh", pkg: "tcl", argv: []string{"tclsh", repoFile(t, "testdata/tools/wrapped.tcl")}},
		tclTool{name: "tclsh", cmd: "tclsh", pkg: "tcl", argv: []string{"tclsh"}})
	for _, tool := range tools {
		t.Run(tool.name, func(t *testing.T) {
			testenv.NeedTool(t, tool.cmd, tool.pkg)
			_, s := session(t, nil, tool.argv...)
			o := master.SubmitOptions{}

			var big strings.Builder
			big.WriteString("set y 0\n")
			for range 400 {
				big.WriteString("incr y\n")
			}
			if big.Len() < 2048 {
				t.Fatalf("the payload is %d bytes: it must be too big to travel inline", big.Len())
			}
			res, out := run(t, s, big.String(), o)
			must(t, "a big payload", res, out, protocol.StatusOK, "")
			if value(res) != "400" {
				t.Fatalf("a big payload's value %q, want its last command's, 400", value(res))
			}

			for _, c := range []struct{ name, payload string }{
				{"big", big.String() + "puts before\nerror big-boom\nset y 999\n"},
				{"inline", "set y 400\nputs before\nerror big-boom\nset y 999\n"},
			} {
				res, out = run(t, s, c.payload, o)
				must(t, c.name+" payload with an error in its middle", res, out, protocol.StatusError, "before\n")
				e := res.Error
				if e == nil || e.Code != protocol.CodeToolError || e.Message != "big-boom" {
					t.Fatalf("%s: error %+v, want tool_error big-boom", c.name, e)
				}
				if !strings.Contains(e.ErrorInfo, "big-boom\n    while executing\n\"error big-boom\"") {
					t.Fatalf("%s: error_info %q lacks Tcl's errorInfo", c.name, e.ErrorInfo)
				}
				if e.ErrorCode != "NONE" {
					t.Fatalf("%s: error_code %q, want Tcl's NONE", c.name, e.ErrorCode)
				}
				res, _ = run(t, s, "set y", o)
				if value(res) != "400" {
					t.Fatalf("%s: y is %q after the error, want 400: a line after the error ran", c.name, value(res))
				}
			}

			// A word that names no command is an error, not a program
			// run by interactive Tcl's unknown (true is /bin/true).
			res, _ = run(t, s, "true", o)
			if res.Status != protocol.StatusError {
				t.Fatalf("payload 'true': %s, want an error (no program is run)", res.Status)
			}
			res, _ = run(t, s, "info exists tcl_interactive", o)
			if value(res) != "1" && tool.name == "tclsh" {
				t.Fatalf("tclsh on a terminal has no tcl_interactive: %q", value(res))
			}
		})
	}
}

// TestTclInteractiveFlag: with --tcl-interactive a payload runs as typed
// at tclsh's interactive prompt: a word naming no command runs the program
// of that name, and tcl_interactive is the tool's.
func TestTclInteractiveFlag(t *testing.T) {
	testenv.Slow(t, "tclsh")
	_, s := session(t, []string{"--tcl-interactive"}, "tclsh")
	res, out := run(t, s, "echo from-a-program", master.SubmitOptions{})
	must(t, "a program by name", res, out, protocol.StatusOK, "from-a-program\n")
	res, _ = run(t, s, "set tcl_interactive", master.SubmitOptions{})
	if value(res) != "1" {
		t.Fatalf("tcl_interactive %q under --tcl-interactive, want the tool's 1", value(res))
	}
}

// TestWrappedShellKeepsItsOwn: what a shell redefined stays the shell's:
// a payload's puts goes through the redefined one (the tee log has it)
// and the output is still exact; the shell's own source still serves a
// payload that calls it.
func TestWrappedShellKeepsItsOwn(t *testing.T) {
	testenv.Slow(t, "tclsh")
	testenv.NeedTool(t, "tclsh", "tcl")
	log := filepath.Join(t.TempDir(), "tee.log")
	script := filepath.Join(t.TempDir(), "step.tcl")
	if err := os.WriteFile(script, []byte("puts step-ran\nerror in-step\nputs step-went-on\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("WRAPPED_LOG", log)
	_, s := session(t, nil, "tclsh", repoFile(t, "testdata/tools/wrapped.tcl"))
	res, out := run(t, s, "puts teed; expr 6*7", master.SubmitOptions{})
	must(t, "puts", res, out, protocol.StatusOK, "teed\n")
	if value(res) != "42" {
		t.Fatalf("value %q, want 42", value(res))
	}
	// The shell's source goes on after an error and returns nothing: that
	// is the shell's behaviour, and the payload that calls it gets it.
	res, out = run(t, s, "source -echo -verbose "+script, master.SubmitOptions{})
	must(t, "the shell's own source", res, out, protocol.StatusOK,
		"puts step-ran\nstep-ran\nerror in-step\nError: in-step\nputs step-went-on\nstep-went-on\n")
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "teed\n") {
		t.Fatalf("the tee log %q lacks the payload's line", b)
	}
}

// TestTclMasterInsideEDAShells: the Tcl master loads and drives a session
// from inside the EDA shells' own Tcl (OpenSTA redefines source and runs a
// file in a proc, where package require's $dir is not seen; Magic's Tcl has
// no clock command), by package require and by the compatibility files.
func TestTclMasterInsideEDAShells(t *testing.T) {
	testenv.Slow(t, "real EDA shells")
	_, target := session(t, nil, "tclsh")
	lib := repoFile(t, "clients/tcl")
	for _, tool := range tclTools(t) {
		if tool.name == "linewise" {
			continue
		}
		t.Run(tool.name, func(t *testing.T) {
			testenv.NeedTool(t, tool.cmd, tool.pkg)
			_, s := session(t, nil, tool.argv...)
			for _, load := range []string{
				"lappend ::auto_path " + lib + "; package require skillpilot",
				"source " + lib + "/skillpilot_master.tcl",
			} {
				res, _ := run(t, s, load+"\nset r [skillpilot::run "+target.Dir()+" {expr 6*7}]\ndict get $r value", master.SubmitOptions{})
				if res.Status != protocol.StatusOK || value(res) != "42" {
					msg := ""
					if res.Error != nil {
						msg = res.Error.Message
					}
					t.Fatalf("%s: %s %q %s, want the Tcl master to run a command and give 42", load, res.Status, value(res), msg)
				}
			}
		})
	}
}

package master

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skillpilot/skillpilot/protocol"
)

func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s not installed", name)
	}
	return p
}

const pyFlow = `
import sys
sys.path.insert(0, sys.argv[1])
import skillpilot_master as m
s = m.Session(sys.argv[2])
r = s.run("puts from-python; expr 20+22")
assert r["status"] == "ok" and r["value"] == "42", r
assert s.output(r) == "from-python\n", repr(s.output(r))
try:
    s.run("error py-boom")
    raise SystemExit("no error raised")
except m.CommandFailed as e:
    assert e.code == "command_failed" and "py-boom" in str(e)
cid, name = s.submit("after 60000")
while s.status()["current_cmd_id"] != cid:
    pass
s.cancel()
try:
    s.wait(name)
except m.Cancelled:
    pass
try:
    s.wait(s.submit("after 5000")[1], timeout=0.1)
except m.WaitTimeout:
    pass
s.write_lease(60)
st = s.status()
assert st["alive"], st
print("python ok")
`

const tclFlow = `
source [lindex $argv 0]
set dir [lindex $argv 1]
set r [skillpilot::run $dir "puts from-tcl; expr 40+2"]
if {[dict get $r status] ne "ok" || [dict get $r value] ne "42"} { error "bad result $r" }
if {[skillpilot::output $dir $r] ne "from-tcl\n"} { error "bad output" }
if {![catch {skillpilot::wait $dir [skillpilot::submit $dir {error tcl-boom}]} msg opts]} { error "no error" }
if {[lindex [dict get $opts -errorcode] 1] ne "command_failed"} { error "code [dict get $opts -errorcode]" }
set name [skillpilot::submit $dir {after 60000}]
while {[dict get [skillpilot::state $dir] current_cmd_id] eq ""} { after 10 }
skillpilot::cancel $dir
catch {skillpilot::wait $dir $name} msg opts
if {[lindex [dict get $opts -errorcode] 1] ne "cancelled"} { error "cancel: $msg" }
skillpilot::lease $dir 60000
if {![dict get [skillpilot::status $dir] alive]} { error "not alive" }
puts "tcl ok"
`

func TestPythonMaster(t *testing.T) {
	py := needTool(t, "python3")
	dir := startRunner(t)
	lib, _ := filepath.Abs("python")
	out, err := exec.Command(py, "-c", pyFlow, lib, dir).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "python ok") {
		t.Fatalf("%v\n%s", err, out)
	}
}

func TestTclMaster(t *testing.T) {
	tcl := needTool(t, "tclsh")
	dir := startRunner(t)
	lib, _ := filepath.Abs("tcl/skillpilot_master.tcl")
	script := filepath.Join(t.TempDir(), "flow.tcl")
	os.WriteFile(script, []byte(tclFlow), 0o600)
	out, err := exec.Command(tcl, script, lib, dir).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "tcl ok") {
		t.Fatalf("%v\n%s", err, out)
	}
}

// Go, Python and Tcl masters submit to one session at the same time: every
// seq is unique and every command gets its result.
func TestMixedMastersOneSession(t *testing.T) {
	py, tcl := needTool(t, "python3"), needTool(t, "tclsh")
	dir := startRunner(t)
	const each = 25
	pylib, _ := filepath.Abs("python")
	tcllib, _ := filepath.Abs("tcl/skillpilot_master.tcl")
	pyScript := fmt.Sprintf(`
import sys
sys.path.insert(0, %q)
import skillpilot_master as m
s = m.Session(%q)
for i in range(%d):
    print(s.submit("expr %%d" %% i)[1])
`, pylib, dir, each)
	tclScript := filepath.Join(t.TempDir(), "sub.tcl")
	os.WriteFile(tclScript, []byte(fmt.Sprintf("source %s\nfor {set i 0} {$i < %d} {incr i} { puts [skillpilot::submit %s \"expr $i\"] }\n", tcllib, each, dir)), 0o600)
	goCmd := exec.Command(os.Args[0], "-test.run=^$")
	goCmd.Env = append(os.Environ(), "MASTER_SUBMIT_HELPER=1", "SESSION="+dir, fmt.Sprintf("N=%d", each))
	cmds := []*exec.Cmd{exec.Command(py, "-c", pyScript), exec.Command(tcl, tclScript), goCmd}
	outs := make([]*bytes.Buffer, len(cmds))
	for i, c := range cmds {
		outs[i] = &bytes.Buffer{}
		c.Stdout, c.Stderr = outs[i], os.Stderr
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
	}
	var names []string
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("%s: %v", c.Path, err)
		}
		for _, f := range strings.Fields(outs[i].String()) {
			if strings.HasPrefix(f, "cmd_") {
				names = append(names, f)
			}
		}
	}
	if len(names) != 3*each {
		t.Fatalf("%d names: %v", len(names), names)
	}
	seen := map[int64]string{}
	s, _ := Open(dir)
	for _, n := range names {
		seq, id, err := protocol.ParseCommandName(n)
		if err != nil {
			t.Fatal(err)
		}
		if prev, dup := seen[seq]; dup {
			t.Fatalf("seq %d used by %s and %s", seq, prev, n)
		}
		seen[seq] = n
		c := &Command{s: s, ID: id, Seq: seq, Name: n}
		if r, err := c.Wait(ctx(t)); err != nil || r.Status != protocol.StatusOK {
			t.Fatalf("%s: %v", n, err)
		}
	}
}

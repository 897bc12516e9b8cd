package runnercli

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/skillpilot/skillpilot/internal/clidoc/goconst"
)

// TestExitCodesListed: every exit code package runner defines is in
// exitCodes, so runner --help and the reference list it (5, the session
// taken away, was once documented everywhere but --help).
func TestExitCodesListed(t *testing.T) {
	consts, err := goconst.IntConstants("../../../runner", "Exit")
	if err != nil {
		t.Fatal(err)
	}
	if len(consts) == 0 {
		t.Fatal("no Exit constants found in package runner")
	}
	// A code the command line defines itself (with a literal value) counts too.
	own, err := goconst.IntConstants(".", "Exit")
	if err != nil {
		t.Fatal(err)
	}
	for name, code := range own {
		consts[name] = code
	}
	listed := map[int]bool{}
	for _, e := range exitCodes {
		listed[e.Code] = true
	}
	for name, code := range consts {
		if !listed[code] {
			t.Errorf("%s = %d is not in exitCodes (runner --help)", name, code)
		}
	}
	var out bytes.Buffer
	if rc := Main([]string{"--help"}, &out, &out); rc != ExitOK {
		t.Fatalf("--help: rc %d", rc)
	}
	for code := range listed {
		if !bytes.Contains(out.Bytes(), []byte(fmt.Sprintf("\n  %-3d ", code))) {
			t.Errorf("runner --help does not list exit code %d:\n%s", code, out.String())
		}
	}
}

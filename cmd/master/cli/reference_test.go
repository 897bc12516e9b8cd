package cli

import (
	"flag"
	"testing"

	"github.com/skillpilot/skillpilot/internal/clidoc/goconst"
)

// TestExitCodesListed: every exit code package master defines is in
// exitCodes, which master --help and the reference list.
func TestExitCodesListed(t *testing.T) {
	consts, err := goconst.IntConstants("../../../master", "Exit")
	if err != nil {
		t.Fatal(err)
	}
	if len(consts) == 0 {
		t.Fatal("no Exit constants found in package master")
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
			t.Errorf("%s = %d is not in exitCodes (master --help)", name, code)
		}
	}
}

// TestReferenceCoversTheTable: the reference names every command a user
// can type, pool subcommands included, each with the flags its --help
// shows.
func TestReferenceCoversTheTable(t *testing.T) {
	ref := Reference()
	have := map[string]int{}
	for _, c := range ref.Commands {
		have[c.Name] = len(c.Flags)
	}
	for _, name := range names(verbs) {
		if name == "pool" {
			continue
		}
		if _, ok := have[name]; !ok {
			t.Errorf("master %s is not in the reference", name)
		}
		if fs := flagSetOf(name); fs != nil {
			n := 0
			fs.VisitAll(func(*flag.Flag) { n++ })
			if have[name] != n {
				t.Errorf("master %s: %d flags in the reference, %d in its flag set", name, have[name], n)
			}
		}
	}
	for _, name := range names(poolVerbs) {
		if have["pool "+name] == 0 {
			t.Errorf("master pool %s is not in the reference (or has no flags)", name)
		}
	}
}

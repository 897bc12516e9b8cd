package version

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	s := String("runner")
	if !strings.HasPrefix(s, "runner ") || !strings.HasSuffix(s, "protocol version 1") {
		t.Fatalf("%q", s)
	}
	Version = "9.9.9"
	defer func() { Version = "" }()
	if s := String("master"); !strings.HasPrefix(s, "master (SkillPilot) "+Release()+" (build 9.9.9), go") {
		t.Fatalf("%q", s)
	}
}

// One version everywhere: the binaries print Release (the
// file VERSION); the Python and Tcl packages carry the same string,
// copied by scripts/sync-version.sh.
func TestVersionsAgree(t *testing.T) {
	want := Release()
	if !regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+$`).MatchString(want) {
		t.Fatalf("VERSION %q: want N.N.N (Python and Tcl both accept it)", want)
	}
	for _, c := range []struct{ file, re string }{
		{"../../clients/python/pyproject.toml", `(?m)^version = "([^"]*)"`},
		{"../../clients/python/skillpilot/__init__.py", `(?m)^__version__ = "([^"]*)"`},
		{"../../clients/tcl/skillpilot/pkgIndex.tcl", `package ifneeded skillpilot ([0-9.]+) `},
		{"../../clients/tcl/skillpilot/pkgIndex.tcl", `package provide skillpilot ([0-9.]+)`},
		{"../../clients/tcl/skillpilot/skillpilot.tcl", `(?m)^    variable release (\S+)`},
	} {
		b, err := os.ReadFile(c.file)
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(c.re).FindSubmatch(b)
		if m == nil || string(m[1]) != want {
			t.Errorf("%s: version %q, VERSION says %q: run scripts/sync-version.sh", c.file, m, want)
		}
	}
}

package protocol

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestDocumentsNameTheVersion: PROTOCOL.md's title and CHANGELOG.md's
// current section name the version this package speaks (PROTOCOL.md,
// "Versions": a change of version is written in both).
func TestDocumentsNameTheVersion(t *testing.T) {
	spec, err := os.ReadFile("../PROTOCOL.md")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("# SkillPilot file protocol, version %d\n", Version); !strings.HasPrefix(string(spec), want) {
		t.Errorf("PROTOCOL.md does not start with %q", want)
	}
	log, err := os.ReadFile("../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("(protocol version %d)", Version); !strings.Contains(string(log), want) {
		t.Errorf("CHANGELOG.md names no release %s", want)
	}
}

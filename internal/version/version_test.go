package version

import (
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
	if s := String("master"); !strings.HasPrefix(s, "master (SkillPilot) 9.9.9, go") {
		t.Fatalf("%q", s)
	}
}

package version

import (
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	s := String("runner")
	if !strings.HasPrefix(s, "runner ") || !strings.Contains(s, "protocol 1") {
		t.Fatalf("%q", s)
	}
	Version = "9.9.9"
	defer func() { Version = "" }()
	if s := String("master"); !strings.HasPrefix(s, "master 9.9.9 (") {
		t.Fatalf("%q", s)
	}
}

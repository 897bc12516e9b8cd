package testenv

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/internal/sessioncheck"
	"github.com/skillpilot/skillpilot/protocol"
)

// A binary is built once: a second call, and a concurrent one, return the
// same path without building again.
func TestBuildBinaryOnce(t *testing.T) {
	paths := make(chan string, 2)
	for range 2 {
		go func() {
			p, err := Build(Runner)
			if err != nil {
				t.Error(err)
			}
			paths <- p
		}()
	}
	a, b := <-paths, <-paths
	if a != b || a == "" {
		t.Fatalf("two builds: %q and %q", a, b)
	}
	if c := BuildBinary(t, Runner); c != a {
		t.Fatalf("third call built again: %q, want %q", c, a)
	}
	if fi, err := os.Stat(a); err != nil || fi.Mode().Perm()&0o111 == 0 {
		t.Fatalf("%s: %v %v", a, fi, err)
	}
	if d := BuildBinary(t, Runner, WithEnv("CGO_ENABLED=1")); d == a {
		t.Fatal("another build environment shares the binary")
	}
}

// A runner started here serves a command and its session passes the check
// registered at cleanup.
func TestStartRunner(t *testing.T) {
	r := StartRunner(t, RunnerOptions{Check: sessioncheck.Options{Submitted: []string{protocol.CommandName(1, "a")}}})
	b := `{"protocol_version":1,"cmd_id":"a","seq":1,"kind":"tcl","payload":"expr 6*7"}`
	if err := WriteAtomic(filepath.Join(r.Dir, protocol.DirQueue, protocol.CommandName(1, "a")), []byte(b)); err != nil {
		t.Fatal(err)
	}
	res := filepath.Join(r.Dir, protocol.DirResult, protocol.CommandName(1, "a"))
	for deadline := time.Now().Add(LongWait); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(res); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no result")
		}
	}
	r.Stop()
}

// NeedTool finds a program that is always there.
func TestNeedTool(t *testing.T) {
	if p := NeedTool(t, "sh", "dash"); p == "" {
		t.Fatal("no path for sh")
	}
}

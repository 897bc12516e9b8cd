package runner

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/skillpilot/skillpilot/internal/sessioncheck"
	"github.com/skillpilot/skillpilot/internal/testenv"
	"github.com/skillpilot/skillpilot/protocol"
)

// A group-shared session served by a runner whose umask is 077 still gets
// its files with the documented modes (0640): output files and results
// come from spare files, made with the mode when they are made (they kept
// the umask's 0600 until issue 44). Real runner process, real tclsh.
func TestSharedSessionUnderUmask077(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "s")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o770|os.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	wrapper := filepath.Join(t.TempDir(), "runner-umask077")
	testenv.WriteExecutable(t, wrapper, []byte("#!/bin/sh\numask 077\nexec '"+runnerBin+"' \"$@\"\n"))
	p := startBinary(t, wrapper, nil, "--session", dir, "--heartbeat", "100ms")
	h := &harness{t: t, dir: dir}
	h.state() // The runner made the layout (queue/ 2770): the commands go into it.
	var names []string
	for _, payload := range []string{"puts one", "puts two", "puts [string repeat x 70000]"} {
		names = append(names, writeCmd(t, dir, int64(len(names)+1), "u"+string(rune('a'+len(names))), payload))
		h.result(names[len(names)-1])
	}
	stopChecked(t, dir, p)
	if err := sessioncheck.Check(dir, sessioncheck.Options{Submitted: names}); err != nil {
		t.Fatalf("modes under umask 077:\n%v", err)
	}
	fi, err := os.Stat(filepath.Join(dir, protocol.DirOutput, protocol.OutputName(names[0])))
	if err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("output file: %v %v, want 0640", fi.Mode(), err)
	}
}

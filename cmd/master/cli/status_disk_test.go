package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
)

// state.json's disk_full reaches Status and the status view, which says
// plainly what is and is not written meanwhile.
func TestStatusShowsDiskFull(t *testing.T) {
	dir := t.TempDir()
	for _, d := range protocol.Dirs {
		os.MkdirAll(filepath.Join(dir, d), 0o700)
	}
	os.WriteFile(filepath.Join(dir, protocol.FileState), []byte(`{"protocol_version":1,"phase":"busy","session_id":"s1","runner_pid":1,"hostname":"h","current_cmd_id":null,"queue_depth":0,"kind":"tcl","updated_at":"2026-11-26T12:00:00Z","commands_done":3,"tool_starts":1,"rejected_count":0,"skipped_count":0,"disk_full":true}`), 0o600)
	os.WriteFile(filepath.Join(dir, protocol.FileHeartbeat), []byte(`{"protocol_version":1,"timestamp":"2026-11-26T12:00:00Z","counter":5,"hostname":"h","runner_pid":1,"session_id":"s1","phase":"busy","interval_ms":1000}          `), 0o600)
	s, err := master.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.Status(context.Background())
	if err != nil || !st.DiskFull {
		t.Fatalf("Status: %+v %v", st, err)
	}
	var out, errb bytes.Buffer
	Main([]string{"status", "--session", dir}, strings.NewReader(""), &out, &errb)
	if !strings.Contains(out.String(), "FULL: output files and log/session.out are not written") {
		t.Fatalf("status view:\n%s\n%s", out.String(), errb.String())
	}
}

// A runner that died while busy left state.json saying busy and running a
// command: the view says that is the last thing it wrote, not the present,
// and prints no elapsed time that stopped with it (a newcomer read "running
// X for 20ms" on a dead runner as a live command).
func TestStatusDeadRunnerIsLastSeen(t *testing.T) {
	st := master.Status{Dir: "S", Alive: false, AliveReason: "runner's lock is free", Phase: protocol.PhaseBusy,
		CurrentCmdID: "c1", CurrentElapsed: 20e6, CommandsDone: 3}
	var b bytes.Buffer
	writeStatus(&b, sessionStatus{Status: st})
	out := b.String()
	for _, want := range []string{
		"phase     busy  (as last written: the runner is not alive)\n",
		"running   c1 when the runner was last seen; a runner started later ends it (runner_restarted)\n",
		"done      3 commands since the runner started\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "20ms") {
		t.Errorf("a dead runner's elapsed time is shown as current:\n%s", out)
	}
	// Alive: the same state is the present.
	st.Alive = true
	b.Reset()
	writeStatus(&b, sessionStatus{Status: st})
	if out := b.String(); strings.Contains(out, "as last written") || !strings.Contains(out, "running   c1 for 20ms") {
		t.Errorf("alive runner's status:\n%s", out)
	}
}

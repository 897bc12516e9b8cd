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

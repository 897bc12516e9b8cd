package master

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
)

// fakeSession lays out a session whose runner wrote state (no runner runs:
// the free lock says not alive at once).
func fakeSession(t *testing.T, state string) (*Session, string) {
	t.Helper()
	dir := t.TempDir()
	for _, d := range protocol.Dirs {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	write := func(rel, body string) {
		if err := os.WriteFile(filepath.Join(dir, rel), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(protocol.FileState, state)
	write(protocol.FileHeartbeat, `{"protocol_version":1,"timestamp":"2026-11-26T12:00:01Z","counter":5,"hostname":"h","runner_pid":1,"session_id":"s1","phase":"idle","interval_ms":1000}`)
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, dir
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, _ := json.Marshal(v)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// A command claimed after state.json was last written (busy/idle flips are
// coalesced) shows as running at once, not "idle, nothing running, queue
// 0".
func TestStatusShowsAClaimedCommandAtOnce(t *testing.T) {
	s, dir := fakeSession(t, `{"protocol_version":1,"phase":"idle","session_id":"s1","runner_pid":1,"hostname":"h","current_cmd_id":null,"queue_depth":0,"kind":"tcl","updated_at":"2026-11-26T12:00:00Z","commands_done":6,"tool_starts":1}`)
	name := protocol.CommandName(7, "c7")
	writeJSON(t, filepath.Join(dir, protocol.DirInflight, name), map[string]any{"protocol_version": 1, "cmd_id": "c7", "seq": 7, "kind": "tcl", "payload": "after 1000"})
	st, err := s.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Phase != protocol.PhaseBusy || st.CurrentCmdID != "c7" || st.CommandsDone != 6 {
		t.Fatalf("phase %s, running %q, done %d; want busy, c7, 6", st.Phase, st.CurrentCmdID, st.CommandsDone)
	}
}

// A result written after state.json counts as done, and its command is no
// longer shown running; quiet time never exceeds the
// running time.
func TestStatusCountsResultsNewerThanState(t *testing.T) {
	s, dir := fakeSession(t, `{"protocol_version":1,"phase":"busy","session_id":"s1","runner_pid":1,"hostname":"h","current_cmd_id":"c7","current_seq":7,"current_start_ts":"2026-11-26T12:00:00Z","queue_depth":0,"kind":"tcl","updated_at":"2026-11-26T12:00:00.050Z","commands_done":6,"tool_starts":1,"current_quiet_ms":1400}`)
	st, err := s.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.CurrentQuiet == nil || *st.CurrentQuiet > st.CurrentElapsed {
		t.Errorf("quiet %v exceeds running time %v", st.CurrentQuiet, st.CurrentElapsed)
	}
	end := protocol.Time{Time: time.Date(2026, 11, 26, 12, 0, 0, 450e6, time.UTC)}
	writeJSON(t, filepath.Join(dir, protocol.DirResult, protocol.CommandName(7, "c7")),
		protocol.Result{ProtocolVersion: 1, CmdID: "c7", Seq: 7, Status: protocol.StatusOK, EndTS: end, ToolStart: 1})
	st, err = s.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Phase != protocol.PhaseIdle || st.CurrentCmdID != "" || st.CommandsDone != 7 {
		t.Fatalf("phase %s, running %q, done %d; want idle, nothing, 7", st.Phase, st.CurrentCmdID, st.CommandsDone)
	}
	// The next command already claimed and run too, state.json still
	// unchanged: 8 done, nothing running.
	end.Time = end.Add(time.Second)
	writeJSON(t, filepath.Join(dir, protocol.DirResult, protocol.CommandName(8, "c8")),
		protocol.Result{ProtocolVersion: 1, CmdID: "c8", Seq: 8, Status: protocol.StatusOK, EndTS: end, ToolStart: 1})
	if st, _ = s.Status(context.Background()); st.CommandsDone != 8 || st.CurrentCmdID != "" {
		t.Fatalf("done %d, running %q; want 8, nothing", st.CommandsDone, st.CurrentCmdID)
	}
}

// The output count shown beside the last line is the newer of the
// heartbeat's and state.json's: a status right after the command printed
// showed its last line with "0 bytes of output" until the next heartbeat.
func TestStatusOutputBytesNewerOfTwo(t *testing.T) {
	for _, tc := range []struct {
		name         string
		hbBytes      int64
		hbCmd        string
		stateBytes   string // state.json's current_output_bytes member, "" for none
		want         int64
		wantLastLine string
	}{
		{"state newer", 0, "x", `,"current_output_bytes":9`, 9, "sleeping"},
		{"heartbeat newer", 12, "x", `,"current_output_bytes":9`, 12, "sleeping"},
		{"older runner: no field", 4, "x", "", 4, "sleeping"},
		{"heartbeat of another command", 50, "y", `,"current_output_bytes":9`, 9, "sleeping"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, dir := fakeSession(t, `{"protocol_version":1,"phase":"busy","session_id":"s1","runner_pid":1,"hostname":"h","current_cmd_id":"x","current_seq":3,`+
				`"current_start_ts":"2026-11-26T12:00:00Z","updated_at":"2026-11-26T12:00:01Z","current_last_line":"sleeping","current_quiet_ms":20`+tc.stateBytes+`}`)
			writeJSON(t, filepath.Join(dir, protocol.FileHeartbeat), map[string]any{"protocol_version": 1, "timestamp": "2026-11-26T12:00:01Z", "counter": 5,
				"hostname": "h", "runner_pid": 1, "session_id": "s1", "phase": "busy", "interval_ms": 1000, "current_cmd_id": tc.hbCmd, "current_output_bytes": tc.hbBytes})
			writeJSON(t, filepath.Join(dir, protocol.DirInflight, protocol.CommandName(3, "x")), map[string]any{"cmd_id": "x", "seq": 3})
			st, _ := s.Status(context.Background())
			if st.CurrentCmdID != "x" || st.CurrentOutBytes != tc.want || st.CurrentLastLine != tc.wantLastLine {
				t.Fatalf("running %q, %d bytes, last line %q; want x, %d, %q", st.CurrentCmdID, st.CurrentOutBytes, st.CurrentLastLine, tc.want, tc.wantLastLine)
			}
		})
	}
}

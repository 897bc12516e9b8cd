package master

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/skillpilot/skillpilot/protocol"
)

// A result committed while Output reads a running command's file does not
// turn the (then correct) short read into "the rest is not in this
// session": only a result seen before the read bounds what the file must
// hold. (It did, seen in `make test-short`: output_gone.txtar.)
func TestOutputResultCommittedDuringRead(t *testing.T) {
	s, dir := fakeSession(t, `{"protocol_version":1,"phase":"busy","session_id":"s1","runner_pid":1,"hostname":"h","current_cmd_id":"c7","current_seq":7,"queue_depth":0,"kind":"tcl","updated_at":"2026-11-26T12:00:00Z","commands_done":6,"tool_starts":1}`)
	name := protocol.CommandName(7, "c7")
	writeJSON(t, filepath.Join(dir, protocol.DirInflight, name), map[string]any{"protocol_version": 1, "cmd_id": "c7", "seq": 7, "kind": "tcl", "payload": "x"})
	out := filepath.Join(dir, protocol.DirOutput, protocol.OutputName(name))
	if err := os.WriteFile(out, []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := s.Command("c7")
	if err != nil {
		t.Fatal(err)
	}
	commit := func() {
		writeJSON(t, filepath.Join(dir, protocol.DirResult, name),
			protocol.Result{ProtocolVersion: 1, CmdID: "c7", Seq: 7, Status: protocol.StatusOK, ToolStart: 1, Stats: protocol.Stats{Bytes: 8}})
	}
	testHookOutputRead = commit
	t.Cleanup(func() { testHookOutputRead = func() {} })
	b, err := c.Output(0, 0)
	if err != nil || string(b) != "half" {
		t.Fatalf("Output during commit = %q, %v; want the 4 bytes read, no error", b, err)
	}
	// With the result seen before the read, the short file is an error.
	testHookOutputRead = func() {}
	if b, err := c.Output(0, 0); err == nil {
		t.Fatalf("Output after the result = %q, nil; want an error (file holds 4 of 8 bytes)", b)
	}
}

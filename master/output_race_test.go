package master

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"syscall"
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

// A result that carries the whole output (output_inline) answers Output
// and Follow without the output file: here a FIFO, which an open would
// refuse (not a regular file), so a look at the file fails the test.
func TestOutputWholeInlineNeedsNoFile(t *testing.T) {
	s, dir := fakeSession(t, `{"protocol_version":1,"phase":"idle","session_id":"s1","runner_pid":1,"hostname":"h","queue_depth":0,"kind":"tcl","updated_at":"2026-11-26T12:00:00Z","commands_done":7,"tool_starts":1}`)
	name := protocol.CommandName(7, "c7")
	if err := syscall.Mkfifo(filepath.Join(dir, protocol.DirOutput, protocol.OutputName(name)), 0o600); err != nil {
		t.Fatal(err)
	}
	writeJSON(t, filepath.Join(dir, protocol.DirResult, name), protocol.Result{ProtocolVersion: 1, CmdID: "c7", Seq: 7, Status: protocol.StatusOK,
		ToolStart: 1, Stats: protocol.Stats{Bytes: 6}, OutputInline: []byte("hello\n")})
	c, err := s.Command("c7")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := c.Output(2, 3); err != nil || string(b) != "llo" {
		t.Fatalf("Output(2, 3) = %q, %v; want \"llo\" from the result's copy", b, err)
	}
	var out bytes.Buffer
	if off, err := c.Follow(context.Background(), &out, 0); err != nil || off != 6 || out.String() != "hello\n" {
		t.Fatalf("Follow = %d, %v, wrote %q; want the 6 bytes of the result's copy", off, err, out.String())
	}
	// A result whose copy is not whole still needs the file, and the FIFO
	// is refused, not opened.
	writeJSON(t, filepath.Join(dir, protocol.DirResult, protocol.CommandName(8, "c8")), protocol.Result{ProtocolVersion: 1, CmdID: "c8", Seq: 8,
		Status: protocol.StatusOK, ToolStart: 1, Stats: protocol.Stats{Bytes: 7}, OutputInline: []byte("hello\n")})
	if err := syscall.Mkfifo(filepath.Join(dir, protocol.DirOutput, protocol.OutputName(protocol.CommandName(8, "c8"))), 0o600); err != nil {
		t.Fatal(err)
	}
	c8, err := s.Command("c8")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := c8.Output(0, 0); err == nil {
		t.Fatalf("Output of a result with a partial copy and a FIFO for its file = %q, nil; want an error", b)
	}
}

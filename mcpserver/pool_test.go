package mcpserver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A pool serves every session directory in it: calls name one, or run and
// submit go to the least-loaded one; commands are found by cmd_id alone.
func TestPool(t *testing.T) {
	pool := t.TempDir()
	startRunner(t, filepath.Join(pool, "a"))
	startRunner(t, filepath.Join(pool, "b"))
	// Not sessions: a file, a directory without queue/, a dot directory,
	// and a symlink to a session (never followed).
	os.WriteFile(filepath.Join(pool, "notes.txt"), []byte("x"), 0o600)
	os.Mkdir(filepath.Join(pool, "empty"), 0o700)
	os.MkdirAll(filepath.Join(pool, ".hidden", "queue"), 0o700)
	os.Symlink(filepath.Join(pool, "a"), filepath.Join(pool, "link"))
	cs := connect(t, Config{Pool: pool})

	var st StatusOutput
	call(t, cs, "status", nil, &st)
	if len(st.Sessions) != 2 || st.Sessions[0].Session != "a" || st.Sessions[1].Session != "b" ||
		!st.Sessions[0].Alive || !st.Sessions[1].Alive {
		t.Fatalf("%+v", st)
	}
	var long SubmitOutput
	call(t, cs, "submit", map[string]any{"payload": "after 600000", "session": "a"}, &long)
	if long.Session != "a" {
		t.Fatalf("%+v", long)
	}
	for ctx := testCtx(t); ctx.Err() == nil; {
		call(t, cs, "status", map[string]any{"session": "a"}, &st)
		if st.Sessions[0].CurrentCmdID == long.CmdID {
			break
		}
	}
	// a is busy: the next run goes to b.
	var r CommandResult
	call(t, cs, "run", map[string]any{"payload": "expr {6*7}"}, &r)
	if r.Session != "b" || r.Value != "42" {
		t.Fatalf("%+v", r)
	}
	// Every option of a session's run and submit, on the pool's too:
	// they reach the command file.
	var opt CommandResult
	call(t, cs, "run", map[string]any{"payload": "expr 1", "session": "b", "timeout_s": 30, "cancel_policy": "terminate_tool",
		"max_output_bytes": 4096, "trace_id": "t43", "labels": map[string]string{"step": "x"}}, &opt)
	if opt.Value != "1" {
		t.Fatalf("%+v", opt)
	}
	// The command file reaches archive/ just after its result appears
	// (PROTOCOL.md, command_path).
	var cmdFile []byte
	waitUntil(t, "the archived command", func() bool {
		var err error
		cmdFile, err = os.ReadFile(filepath.Join(pool, "b", filepath.FromSlash(opt.CommandPath)))
		return err == nil
	})
	for _, want := range []string{`"timeout_s":30`, `"cancel_policy":"terminate_tool"`, `"max_output_bytes":4096`, `"trace_id":"t43"`, `"labels":{"step":"x"}`} {
		if !strings.Contains(string(cmdFile), want) {
			t.Errorf("command file %s lacks %s", cmdFile, want)
		}
	}
	// Found by cmd_id alone, in whichever session.
	var ro ReadOutputOutput
	call(t, cs, "read_output", map[string]any{"cmd_id": r.CmdID, "offset": 0}, &ro)
	if ro.Session != "b" || !ro.Done {
		t.Fatalf("%+v", ro)
	}
	var c CancelOutput
	call(t, cs, "cancel", map[string]any{"cmd_id": long.CmdID, "wait_timeout_s": longWait.Seconds()}, &c)
	if c.Session != "a" || c.Outcome != "cancelled_running" {
		t.Fatalf("%+v", c)
	}
	// The spool is per session: name it.
	if msg := callErr(t, cs, "wait_for", map[string]any{"pattern": "x", "from_cursor": 0}); !strings.Contains(msg, "name the session") {
		t.Errorf("%s", msg)
	}
	for _, bad := range []string{"link", "empty", "../a", ".hidden", "zzz"} {
		if msg := callErr(t, cs, "tail", map[string]any{"from_cursor": 0, "session": bad}); !strings.Contains(msg, "session") {
			t.Errorf("%s: %s", bad, msg)
		}
	}
	// A session added to the pool later is found.
	startRunner(t, filepath.Join(pool, "c"))
	call(t, cs, "status", nil, &st)
	if len(st.Sessions) != 3 || st.Sessions[2].Session != "c" || !st.Sessions[2].Alive {
		t.Fatalf("%+v", st)
	}
	var tl TailOutput
	call(t, cs, "tail", map[string]any{"from_cursor": -100, "session": "b"}, &tl)
	if tl.Session != "b" || tl.SpoolSize == 0 {
		t.Fatalf("%+v", tl)
	}
}

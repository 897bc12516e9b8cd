package runner

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/skillpilot/skillpilot/protocol"
)

// inflight/ moved away (with the running command's file in it) and made
// again, while the command runs: the next heartbeat puts the file back
// from the bytes the runner claimed, with a warning event; a crash after
// that still ends the command with exactly one result (runner_restarted);
// without a crash, its result's command_path names a file that is there.
// Before, the crash left a command with no result at all, and without one
// archive/ lacked the file the result named.
func TestInflightSwappedWhileRunning(t *testing.T) {
	t.Parallel()
	for _, crash := range []bool{false, true} {
		t.Run(map[bool]string{false: "finishes", true: "crash"}[crash], func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "s")
			p := startRunnerProc(t, "--session", dir, "--heartbeat", "100ms")
			h := &harness{t: t, dir: dir}
			h.result(writeCmd(t, dir, 1, "warm", "set x 1"))
			payload := "puts started; flush stdout; after 1500; set v 1"
			if crash {
				payload = "puts started; flush stdout; after 60000"
			}
			name := writeCmd(t, dir, 2, "i", payload)
			h.waitFor("i running", func() bool { st := h.state(); return st.CurrentCmdID != nil && *st.CurrentCmdID == "i" })
			inflight := filepath.Join(dir, protocol.DirInflight)
			if err := os.Rename(inflight, inflight+".x"); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(inflight, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.RemoveAll(inflight + ".x"); err != nil {
				t.Fatal(err)
			}
			h.waitFor("the command file back in inflight/", func() bool {
				_, err := os.Stat(filepath.Join(inflight, name))
				return err == nil
			})
			// The file comes back before its warning event is appended to
			// meta.log, so wait for the event rather than reading meta.log once.
			h.waitFor("a warning event naming the command file made again", func() bool {
				for _, e := range readEventsLoose(dir) {
					if e.Event == protocol.EvWarning && e.CmdID == "i" && e.Detail["recreated"] == protocol.DirInflight+"/"+name {
						return true
					}
				}
				return false
			})
			if crash {
				p.Kill()
				checkNoOrphans(t, dir)
				p = startRunnerProc(t, "--session", dir, "--heartbeat", "100ms")
			}
			r := h.result(name)
			want := protocol.ReasonMarkerSeen
			if crash {
				want = protocol.ReasonRunnerRestarted
			}
			if r.ExitReason != want {
				t.Errorf("exit_reason %s, want %s: %+v", r.ExitReason, want, r)
			}
			// The command file is moved to command_path just after the result
			// appears (the writer renames it once the result is in place).
			if r.CommandPath == "" {
				t.Fatalf("no command_path: %+v", r)
			}
			h.waitFor("the command file at command_path "+r.CommandPath, func() bool {
				_, err := os.Stat(filepath.Join(dir, r.CommandPath))
				return err == nil
			})
			h.waitFor("serving", func() bool { return h.state().Phase == protocol.PhaseIdle })
			stopChecked(t, dir, p)
			invariants(t, dir, name)
		})
	}
}

package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skillpilot/skillpilot/internal/testenv"
	"github.com/skillpilot/skillpilot/protocol"
)

// failpointRunner builds the runner with -tags sp_failpoints once: a binary
// that kills itself with SIGKILL at the point $SP_FAILPOINT names.
func failpointRunner(t testing.TB) string {
	t.Helper()
	return testenv.BuildBinary(t, testenv.Runner, testenv.WithTags("sp_failpoints"))
}

// A runner killed between acting on a request and deleting it never makes
// the request act twice: killed after the reply, the next runner only
// deletes the request; killed before the reply, the request is stale for
// the next runner (it names the dead runner's session, or is older than the
// new start) and is answered so without acting.
func TestMailboxExactlyOnceAcrossKill(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		point     string
		sessionID bool
	}{{"ctl_after_reply", true}, {"ctl_after_reply", false}, {"ctl_after_act", true}, {"ctl_after_act", false}} {
		name := tc.point
		if !tc.sessionID {
			name += "_without_session_id"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "s")
			h := &harness{t: t, dir: dir}
			p := startBinary(t, failpointRunner(t), []string{"SP_FAILPOINT=" + tc.point}, "--session", dir, "--heartbeat", "100ms")
			a := writeCmd(t, dir, 1, "a", "puts go; flush stdout; after 60000")
			q := writeCmd(t, dir, 2, "q", "puts never")
			h.waitFor("a running", func() bool {
				b, _ := os.ReadFile(filepath.Join(dir, protocol.DirOutput, protocol.OutputName(a)))
				return strings.Contains(string(b), "go")
			})
			fields := map[string]any{"cmd_id": "q"}
			if tc.sessionID {
				var st protocol.State
				b, _ := os.ReadFile(filepath.Join(dir, protocol.FileState))
				jsonUnmarshal(b, &st)
				fields["session_id"] = st.SessionID
			}
			req := h.request(10, "r", protocol.OpCancel, fields)
			if code := p.ExitCode(); code != -1 {
				t.Fatalf("the runner exited %d instead of dying at %s\n%s", code, tc.point, p.Log())
			}
			if r := waitResultFile(t, dir, q); r.ExitReason != protocol.ReasonCancelledQueued {
				t.Fatalf("the cancel did not act before the kill: %+v", r)
			}
			first, _ := os.ReadFile(filepath.Join(dir, protocol.DirResult, q))
			_, err := os.Lstat(filepath.Join(dir, protocol.DirAck, req))
			if hasReply := err == nil; hasReply != (tc.point == "ctl_after_reply") {
				t.Fatalf("reply present %v after dying at %s", hasReply, tc.point)
			}
			if _, err := os.Lstat(filepath.Join(dir, protocol.DirCtl, req)); err != nil {
				t.Fatalf("the request should still be there: %v", err)
			}
			p2 := startRunnerProc(t, "--session", dir, "--heartbeat", "100ms")
			rep := waitReply(t, dir, req)
			want := protocol.OutcomeCancelledQueued
			if tc.point == "ctl_after_act" {
				want = protocol.OutcomeStale
			}
			if rep.Outcome != want {
				t.Errorf("reply %+v, want %s", rep, want)
			}
			if r := waitResultFile(t, dir, a); r.ExitReason != protocol.ReasonRunnerRestarted {
				t.Errorf("%+v", r)
			}
			if r := waitResultFile(t, dir, writeCmd(t, dir, 3, "after", "expr 1")); r.Status != protocol.StatusOK {
				t.Fatalf("%+v", r)
			}
			again, _ := os.ReadFile(filepath.Join(dir, protocol.DirResult, q))
			if string(again) != string(first) {
				t.Errorf("q's result changed:\n%s\n%s", first, again)
			}
			wantEvents := 1
			if tc.point == "ctl_after_act" {
				wantEvents = 2 // the act, and the next runner's stale answer
			}
			if n := len(requestEvents(readEvents(t, dir), "r")); n != wantEvents {
				t.Errorf("%d events for the request, want %d", n, wantEvents)
			}
			stopChecked(t, dir, p2)
		})
	}
}

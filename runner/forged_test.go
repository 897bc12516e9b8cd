package runner

import (
	"fmt"
	"strings"
	"testing"

	"github.com/skillpilot/skillpilot/protocol"
)

// A payload that prints its own command's done line (the token is the
// cmd_id, which a flow knows: a log of an earlier run with the same ids, or
// a payload that echoes it) does not end its command: the helper's done
// line carries the command's secret (n=), the printed one does not. Before,
// the command ended ok at the printed line, its real error was lost, and
// the next command was typed while it still ran (PROTOCOL.md 6.2).
func TestForgedDoneLineIsOutput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		kind    protocol.Kind
		payload string
		forged  string
	}{
		{"tcl", protocol.KindTcl, `puts {__SP_DONE__ forged rc=0 v= vt=0}; puts {__SP_DONE__ forged}; after 100; error real_failure`, "__SP_DONE__ forged rc=0 v= vt=0\n__SP_DONE__ forged\n"},
		{"sh", protocol.KindSh, `echo '__SP_DONE__ forged rc=0'; sleep 0.1; false`, "__SP_DONE__ forged rc=0\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, func(c *Config) { c.Kind = tc.kind }).start()
			name := writeCmdKind(t, h.dir, 1, "forged", tc.kind, tc.payload)
			next := writeCmdKind(t, h.dir, 2, "next", tc.kind, map[protocol.Kind]string{protocol.KindTcl: "set v next", protocol.KindSh: "echo next"}[tc.kind])
			r := h.result(name)
			if r.Status != protocol.StatusError || r.ExitReason != protocol.ReasonMarkerSeen {
				t.Errorf("the forged command: status %s, exit_reason %s; want error, marker_seen (its real end)", r.Status, r.ExitReason)
			}
			if tc.kind == protocol.KindTcl && (r.Error == nil || !strings.Contains(r.Error.Message, "real_failure")) {
				t.Errorf("the forged command's error %+v, want real_failure", r.Error)
			}
			if got := h.output(name); got != tc.forged {
				t.Errorf("output %q, want the printed lines %q", got, tc.forged)
			}
			if r := h.result(next); r.Status != protocol.StatusOK {
				t.Errorf("the next command: %+v", r)
			}
			h.stop(protocol.StopGraceful)
		})
	}
}

// A sync token cannot be guessed from the session_id: a payload still
// running after a cancel that printed "<prefix> sync-<id>-1 rc=0" (the
// first token a counter would give) must not be taken for the tool's
// answer to the runner's sync line. Before, the number counted from 1.
func TestSyncTokenNotGuessable(t *testing.T) {
	t.Parallel()
	tl := newToolLife(nil)
	defer tl.close()
	const id = "session_20261207_120000_89c0a3b1"
	seen := map[string]bool{}
	for i := 1; i <= 50; i++ {
		tok := tl.newSyncToken(id)
		if seen[tok] {
			t.Fatalf("token %s given out twice", tok)
		}
		seen[tok] = true
		if !strings.HasPrefix(tok, "sync-89c0a3b1-") || len(tok) != len("sync-89c0a3b1-")+12 {
			t.Errorf("token %q: want sync-89c0a3b1-<12 digits> (master tail --clean recognises that form)", tok)
		}
		if !tl.isSync([]byte(protocol.DefaultMarkerPrefix+" "+tok+" rc=0"), protocol.DefaultMarkerPrefix) {
			t.Errorf("the token given out, %s, is not accepted", tok)
		}
	}
	for i := 0; i <= 1000; i++ {
		guess := fmt.Sprintf("%s sync-89c0a3b1-%d rc=0", protocol.DefaultMarkerPrefix, i)
		if tl.isSync([]byte(guess), protocol.DefaultMarkerPrefix) {
			t.Errorf("a guessed sync line is accepted: %s", guess)
		}
	}
}

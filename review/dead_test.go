package review_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
	"github.com/skillpilot/skillpilot/review"
)

// deadSession writes a session whose runner was killed running c1 at
// 10:00:05 (its last cmd_output; last heartbeat 10:00:07) and whose next
// runner settled c1 a minute later, as PROTOCOL.md sections 7 and 13 say:
// the result's end_ts is the last sign of life (endTS; an older runner
// wrote the recovery's time there). c2 then runs for 2 s.
func deadSession(t *testing.T, endTS time.Time) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "s")
	for _, d := range protocol.Dirs {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	at := func(s int) protocol.Time { return protocol.Time{Time: time.Date(2026, 12, 1, 10, 0, s, 0, time.UTC)} }
	i64 := func(v int64) *int64 { return &v }
	evs := []protocol.Event{
		{TS: at(0), Event: protocol.EvRunnerStart, Detail: map[string]any{"session_id": "one"}},
		{TS: at(1), Event: protocol.EvCmdBegin, CmdID: "c1", Seq: 1, SpoolStart: i64(0)},
		{TS: at(5), Event: protocol.EvCmdOutput, CmdID: "c1", Seq: 1, SpoolStart: i64(0), SpoolEnd: i64(10)},
		// The next runner, a minute later: its recovery, then its start.
		{TS: at(65), Event: protocol.EvLockTakeover, Detail: map[string]any{"old_pid": 1}},
		{TS: at(65), Event: protocol.EvCmdEnd, CmdID: "c1", Seq: 1, Status: protocol.StatusError,
			ExitReason: protocol.ReasonRunnerRestarted, Detail: map[string]any{"recovered": true}},
		{TS: at(65), Event: protocol.EvRecovered, CmdID: "c1", Seq: 1, Status: protocol.StatusError},
		{TS: at(65), Event: protocol.EvRecoverySummary, Detail: map[string]any{"claimed": 1}},
		{TS: at(66), Event: protocol.EvRunnerStart, Detail: map[string]any{"session_id": "two"}},
		{TS: at(67), Event: protocol.EvCmdBegin, CmdID: "c2", Seq: 2, SpoolStart: i64(10)},
		{TS: at(69), Event: protocol.EvCmdEnd, CmdID: "c2", Seq: 2, Status: protocol.StatusOK},
	}
	var log []byte
	for _, e := range evs {
		b, _ := json.Marshal(e)
		log = append(append(log, b...), '\n')
	}
	write := func(rel string, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, rel), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(protocol.FileMeta, log)
	for _, r := range []protocol.Result{
		{CmdID: "c1", Seq: 1, Status: protocol.StatusError, ExitReason: protocol.ReasonRunnerRestarted, StartTS: at(1),
			EndTS: protocol.Time{Time: endTS}, Error: &protocol.Error{Code: protocol.CodeRunnerRestarted}},
		{CmdID: "c2", Seq: 2, Status: protocol.StatusOK, ExitReason: protocol.ReasonMarkerSeen, StartTS: at(67), EndTS: at(69)},
	} {
		b, _ := json.Marshal(r)
		write("result/"+protocol.CommandName(r.Seq, r.CmdID), b)
	}
	write(protocol.FileState, []byte(`{"phase":"stopped"}`))
	return dir
}

// TestDeadRunnerTime: a command its runner died running ran
// until the runner's last sign of life; the time until the next runner
// settled it is DeadUntil, not its run.
func TestDeadRunnerTime(t *testing.T) {
	heartbeat := time.Date(2026, 12, 1, 10, 0, 7, 0, time.UTC)
	settled := time.Date(2026, 12, 1, 10, 1, 5, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		endTS time.Time
		want  time.Time
	}{
		{"last heartbeat in end_ts", heartbeat, heartbeat},
		// An older runner's result ends at the recovery: the dead run's
		// last event (its cmd_output at 10:00:05) is its last sign.
		{"older runner", settled, time.Date(2026, 12, 1, 10, 0, 5, 0, time.UTC)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := review.Load(deadSession(t, tc.endTS), review.Options{})
			if err != nil {
				t.Fatal(err)
			}
			var c1, c2 *review.Command
			for _, c := range s.Commands {
				switch c.CmdID {
				case "c1":
					c1 = c
				case "c2":
					c2 = c
				}
			}
			if c1 == nil || c2 == nil {
				t.Fatalf("commands %+v", s.Commands)
			}
			if !c1.End.Equal(tc.want) || !c1.DeadUntil.Equal(settled) || c1.Duration() != tc.want.Sub(c1.Start) {
				t.Errorf("c1 %v..%v dead until %v, want ..%v dead until %v", c1.Start, c1.End, c1.DeadUntil, tc.want, settled)
			}
			if !c2.DeadUntil.IsZero() {
				t.Errorf("c2 dead until %v", c2.DeadUntil)
			}
		})
	}
}

package master

import (
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
)

// Errors carry context beside code and message (PROTOCOL.md section 19,
// "Errors carry context"): the same keys the CLI prints under "context".
func TestErrorContext(t *testing.T) {
	s, dir := bareSession(t)
	_, err := s.Command("nosuch")
	if got := ErrorContext(err); !errors.Is(err, ErrUnknownCmdID) || !reflect.DeepEqual(got, map[string]any{"cmd_id": "nosuch"}) {
		t.Errorf("unknown cmd_id: %v, context %v", err, got)
	}
	_, err = Open(filepath.Join(dir, "missing"))
	if got := ErrorContext(err); !errors.Is(err, ErrSessionMissing) || got["dir"] != filepath.Join(dir, "missing") {
		t.Errorf("session missing: %v, context %v", err, got)
	}
	rep := &protocol.ControlReply{Op: protocol.OpCancel, ReqID: "r1", Outcome: protocol.OutcomeNotFound, CmdID: "x"}
	err = fmt.Errorf("cancel: %w", &RequestError{Reply: rep})
	want := map[string]any{"op": "cancel", "req_id": "r1", "outcome": "not_found", "cmd_id": "x"}
	if got := ErrorContext(err); !reflect.DeepEqual(got, want) {
		t.Errorf("refused request: context %v, want %v", got, want)
	}
	// No session state: a request's check fails at once, with the grace that applied.
	s.WaitForRunner = 3 * time.Second
	_, err = s.Request(t.Context(), protocol.ControlRequest{Op: protocol.OpCancel, Scope: protocol.ScopeCurrent})
	got := ErrorContext(err)
	if !errors.Is(err, ErrRunnerNotAlive) || got["grace_ms"] != int64(3000) || got["reason"] == "" {
		t.Errorf("runner not alive: %v, context %v", err, got)
	}
	if ErrorContext(errors.New("plain")) != nil || ErrorContext(nil) != nil {
		t.Error("an error without context has some")
	}
	// The outermost value wins; errors.Join is walked too.
	inner := withContext(ErrWaitTimeout, map[string]any{"cmd_id": "a", "resume_cursor": 1})
	outer := withContext(errors.Join(inner, errors.New("x")), map[string]any{"cmd_id": "b"})
	if got := ErrorContext(outer); !reflect.DeepEqual(got, map[string]any{"cmd_id": "b", "resume_cursor": 1}) || !errors.Is(outer, ErrWaitTimeout) {
		t.Errorf("merge: %v", got)
	}
}

// The runner's context of a result's error and of a reply (PROTOCOL.md
// sections 7 and 9.1) is passed on unchanged, beside the master's own
// keys, which win.
func TestErrorContextOfResultAndReply(t *testing.T) {
	res := &protocol.Result{CmdID: "c1", Status: protocol.StatusTimeout, ExitReason: protocol.ReasonCtrlC,
		Error: &protocol.Error{Code: protocol.CodeTimeout, Message: "timed out", Context: map[string]any{"timeout_s": 0.5, "status": "wrong"}}}
	err := fmt.Errorf("wait: %w", &ResultError{Result: res})
	want := map[string]any{"timeout_s": 0.5, "cmd_id": "c1", "status": "timeout", "exit_reason": "ctrl_c"}
	if got := ErrorContext(err); !reflect.DeepEqual(got, want) {
		t.Errorf("result: context %v, want %v", got, want)
	}
	if res.Error.Context["status"] != "wrong" {
		t.Error("the result's context was changed")
	}
	rep := &protocol.ControlReply{Op: protocol.OpCancel, ReqID: "r1", Outcome: protocol.OutcomeRejected,
		Context: map[string]any{"field": "scope", "source": "ctl/req_1_r1.json"}}
	want = map[string]any{"field": "scope", "source": "ctl/req_1_r1.json", "op": "cancel", "req_id": "r1", "outcome": "rejected"}
	if got := ErrorContext(&RequestError{Reply: rep}); !reflect.DeepEqual(got, want) {
		t.Errorf("reply: context %v, want %v", got, want)
	}
}

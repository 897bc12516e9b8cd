package runner

import (
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
)

// Requests are named in words in results and state.json:
// who asked, from which host and process, and when; a file only when
// nothing else names the request.
func TestRequestWords(t *testing.T) {
	t.Parallel()
	ts := protocol.Time{Time: time.Date(2026, 11, 26, 16, 40, 51, 0, time.UTC)}
	mod := time.Date(2026, 11, 26, 17, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		req    protocol.ControlRequest
		source string
		want   string
	}{
		{protocol.ControlRequest{Op: protocol.OpStop, Submitter: "master@host1:4242", TS: ts}, "ctl/req_0000000006_x.json",
			"a stop request from master pid 4242 on host1 at 2026-11-26 16:40:51 UTC"},
		{protocol.ControlRequest{Op: protocol.OpCancel, Submitter: "pilot", TS: ts}, "ctl/req_0000000007_y.json",
			"a cancel request from pilot at 2026-11-26 16:40:51 UTC"},
		{protocol.ControlRequest{Op: protocol.OpCancel}, "ctl/cancel.json",
			"a cancel request (ctl/cancel.json) at 2026-11-26 17:00:00 UTC"},
	} {
		if got := requestWords(&tc.req, tc.source, mod); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.req, got, tc.want)
		}
	}
}

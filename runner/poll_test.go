package runner

import (
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
)

// TestPollHurriesAfterActivity: polling only (as on a network filesystem),
// a command written right after a result is picked up by the fast ticks
// that follow activity, not at the next poll period (an hour here, so the
// test would time out without them).
func TestPollHurriesAfterActivity(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.Poll = time.Hour; c.Watch = WatchPoll })
	first := h.submit("expr 1") // Seen by the listing at start.
	h.start()
	h.result(first)
	for i := range 3 {
		if r := h.result(h.submit("expr 2")); r.Status != protocol.StatusOK {
			t.Fatalf("command %d after a result: %+v", i, r)
		}
	}
	if st := h.state(); st.Watch != "poll" {
		t.Fatalf("watch %q, want poll", st.Watch)
	}
}

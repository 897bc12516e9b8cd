package runner

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
)

// TestClockControlRetry: a control request still being written is looked
// at again when the fake clock passes its grace, and answered; nothing but
// the fake clock moves it (no rescans: the poll is an hour, and inotify
// saw the only write). A recheck set from the real clock never fires here.
func TestClockControlRetry(t *testing.T) {
	t.Parallel()
	h := newFakeHarness(t, nil, func(c *Config) {
		c.Poll, c.Watch, c.ParseGrace = time.Hour, WatchInotify, 500*time.Millisecond
	}).start()
	// The runner watches ctl/ once it logged runner_start.
	h.waitFor("runner_start", func() bool { return countEvents(h.events(), protocol.EvRunnerStart) > 0 })
	name := protocol.RequestName(1, "slow")
	p := filepath.Join(h.dir, protocol.DirCtl, name)
	if err := os.WriteFile(p, []byte(`{"req_id":"slow","seq":1,`), 0o600); err != nil {
		t.Fatal(err)
	}
	ack := filepath.Join(h.dir, protocol.DirAck, name)
	// Only the fake clock moving past the grace can bring the reply (the
	// poll is an hour): without the one clock it never comes, and
	// advanceUntil fails at its real-time deadline. No bound on fake time
	// here: a loaded machine lets much of it pass before the runner looks.
	h.advanceUntil("the reply to the incomplete request", 50*time.Millisecond, func() bool {
		_, err := os.Lstat(ack)
		return err == nil
	})
	if rep := h.reply(name); rep.Outcome != protocol.OutcomeRejected {
		t.Errorf("%+v", rep)
	}
}

// TestClockResultTimes: a result's start_ts, end_ts and duration_ms come
// from the one clock, so end_ts - start_ts is duration_ms (end_ts was read
// from the wall clock: eleven months after start_ts on the fake clock).
func TestClockResultTimes(t *testing.T) {
	t.Parallel()
	h := newFakeHarness(t, nil).start()
	res := h.result(h.submit("value 1"))
	got := res.EndTS.Sub(res.StartTS.Time)
	if want := time.Duration(res.Stats.DurationMS) * time.Millisecond; got < want-time.Millisecond || got > want+time.Millisecond { // Both are in milliseconds on the wire.
		t.Errorf("end_ts %v - start_ts %v = %v; duration_ms says %v", res.EndTS, res.StartTS, got, want)
	}
}

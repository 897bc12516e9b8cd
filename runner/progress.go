package runner

import (
	"time"

	"github.com/skillpilot/skillpilot/protocol"
)

// progressGap bounds how often a running command's output progress is
// reported, whatever the heartbeat: at most one cmd_output event per
// heartbeat and per progressGap.
const progressGap = 250 * time.Millisecond

// reportProgress writes a cmd_output event for the running command when
// the spool grew since its last one (PROTOCOL.md section 22): the spool
// range [spool_start, spool_end) it covers, contiguous from the command's
// cmd_begin to its cmd_end, and the size its output file has reached.
// Offsets and counts only, never the bytes. It runs on the heartbeat,
// after the buffers were flushed, so the range is in log/session.out
// when the event is.
func (r *Runner) reportProgress() {
	c := r.cur
	if c == nil {
		return
	}
	now := r.clk.Now()
	end := r.disk.spoolSize
	start, ok := c.progressed(end, now)
	if !ok {
		return
	}
	r.event(protocol.Event{Event: protocol.EvCmdOutput, CmdID: c.cmd.CmdID, Seq: c.cmd.Seq, SpoolStart: &start, SpoolEnd: &end,
		Detail: map[string]any{"spool_bytes": end - start, "output_bytes": c.bytes}})
}

// progressed records that c's output progress is reported up to spool
// offset end at now, and returns where its last report ended. ok is false
// (nothing recorded) when the spool did not grow since, or the last report
// is less than progressGap old.
func (c *running) progressed(end int64, now time.Time) (start int64, ok bool) {
	if end <= c.reported || (!c.reportedAt.IsZero() && now.Sub(c.reportedAt) < progressGap) {
		return 0, false
	}
	start = c.reported
	c.reported, c.reportedAt = end, now
	return start, true
}

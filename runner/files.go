package runner

import (
	"bytes"
	"encoding/json"
	"os"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
)

// tailRing keeps the last n lines of command output for
// log/last_n_lines.txt. Each line is cut at maxTailLine bytes, so memory is
// bounded by n × maxTailLine.
type tailRing struct {
	lines [][]byte
	next  int
	full  bool
	part  []byte // the unterminated last line
	cut   bool   // part reached maxTailLine; the rest of the line is dropped
	dirty bool
}

const maxTailLine = 4096

func newTailRing(n int) *tailRing { return &tailRing{lines: make([][]byte, n)} }

func (t *tailRing) write(b []byte) {
	t.dirty = true
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		seg := b
		if i >= 0 {
			seg = b[:i]
		}
		if room := maxTailLine - len(t.part); !t.cut {
			if room >= len(seg) {
				t.part = append(t.part, seg...)
			} else {
				// Cut at a character boundary, not inside one.
				t.part = trimPartialRune(append(t.part, seg[:room]...))
				t.cut = true
			}
		}
		if i < 0 {
			return
		}
		t.lines[t.next] = append(t.lines[t.next][:0], t.part...)
		t.next = (t.next + 1) % len(t.lines)
		t.full = t.full || t.next == 0
		t.part, t.cut = t.part[:0], false
		b = b[i+1:]
	}
}

func (t *tailRing) bytes() []byte {
	var out []byte
	start, n := 0, t.next
	if t.full {
		start, n = t.next, len(t.lines)
	}
	for k := 0; k < n; k++ {
		out = append(out, t.lines[(start+k)%len(t.lines)]...)
		out = append(out, '\n')
	}
	return append(out, t.part...)
}

// flushTail rewrites log/last_n_lines.txt if it changed. It is a preview:
// atomic for readers, not fsynced.
func (r *Runner) flushTail() {
	if !r.tail.dirty {
		return
	}
	r.tail.dirty = false
	if err := r.writeFile(protocol.FileTail, r.tail.bytes()); err != nil {
		r.log.Warn("write tail", "err", err)
	}
}

func marshal(v any) []byte {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		panic(err) // Only protocol types are marshalled; they always encode.
	}
	return append(b, '\n')
}

// runStatus is the runner's own state as state.json and the heartbeat
// publish it.
type runStatus struct {
	// shown and shownWhy are the phase last derived (Runner.phase), kept
	// only to notice when it changes (Runner.showPhase; "" before the
	// first turn of the loop).
	shown    protocol.Phase
	shownWhy string
	// logged is the last long reason the log gave whole (logReason): a
	// failure quoting the tool's last lines is logged once, not again by
	// each line that follows from it.
	logged   string
	dirty    bool      // state.json is to be rewritten
	writeAt  time.Time // when a dirty state.json is rewritten (zero: not scheduled)
	beats    int64
	cmdsDone int64
}

// schedule sets when a dirty state.json is rewritten: stateDelay after
// now, unless a time is set already.
func (s *runStatus) schedule(now time.Time) {
	if s.dirty && s.writeAt.IsZero() {
		s.writeAt = now.Add(stateDelay)
	}
}

// beat counts a heartbeat and returns its counter.
func (s *runStatus) beat() int64 {
	s.beats++
	return s.beats
}

// writeState rewrites state/state.json. It is observed state, rewritten on
// every transition: atomic for readers, not fsynced (a crash loses at most
// a transition, and the next runner rewrites it at start).
func (r *Runner) writeState() {
	phase, why := r.phase()
	st := protocol.State{
		ProtocolVersion: protocol.Version, Phase: phase, SessionID: r.id.sessionID,
		RunnerPID: os.Getpid(), Hostname: r.id.hostname, QueueDepth: r.queue.pend.len(),
		Reason: why, Filesystem: r.id.fsName, Kind: r.cfg.Kind, UpdatedAt: protocol.Now(),
		CommandsDone: r.status.cmdsDone, ToolStarts: r.tool.starts, RejectedCount: r.queue.rejected, SkippedCount: r.queue.skipped,
		LeaseError: r.lease.err, DiskFull: r.disk.full,
	}
	if r.stop.stage == stopDone {
		st.Error = r.stop.err
	}
	st.Retention = r.retentionState()
	if r.watcher != nil {
		st.Watch = "poll"
		if r.watcher.Inotify {
			st.Watch = "inotify"
		}
	}
	if pid, start, ok := r.tool.identity(); ok {
		st.ToolPID, st.ToolPGID, st.ToolStartTime = pid, pid, start
	}
	if r.cur != nil {
		r.cur.describeState(&st, r.clk.Now())
	}
	// Marked written before the write: a write that finds the disk full
	// (noSpace) marks state.json changed again, for disk_full.
	r.status.dirty, r.status.writeAt = false, time.Time{}
	if err := r.writeFile(protocol.FileState, marshal(st)); err != nil {
		r.log.Warn("write state", "err", err)
	}
}

// beat writes state/heartbeat.json with a counter that grows by one.
func (r *Runner) beat() {
	n := r.status.beat()
	phase, _ := r.phase()
	hb := protocol.Heartbeat{
		ProtocolVersion: protocol.Version, Timestamp: protocol.Now(), Counter: n,
		Hostname: r.id.hostname, RunnerPID: os.Getpid(), SessionID: r.id.sessionID, Phase: phase,
		IntervalMS: r.cfg.Heartbeat.Milliseconds(), SpoolSize: r.disk.spoolSize,
	}
	if r.cur != nil {
		r.cur.describeBeat(&hb)
	}
	if err := r.writeFile(protocol.FileHeartbeat, marshal(hb)); err != nil {
		r.log.Warn("write heartbeat", "err", err)
	}
	r.metrics.beat(r)
}

// writeFile replaces one of the runner's observed-state files atomically
// (not fsynced). Its temporary file is made in tmp/, so an interrupted
// write leaves nothing where masters look; a symlink or FIFO planted at
// the target is replaced, never followed. The file replaced is removed
// by the reaper, not by the rename (fsq.WriteAtomicReaped): on a disk
// that discards freed blocks at once, that deletion held the owner loop
// 0.4 ms and more a state.json (BENCHMARKS.md).
func (r *Runner) writeFile(relPath string, data []byte) error {
	err := r.root.WriteAtomicReaped(protocol.DirTmp, relPath, data, r.layout.perms.file, r.disk.reaper)
	if err != nil && isNoSpace(err) {
		r.noSpace(relPath, err)
		err = r.root.WriteAtomicReaped(protocol.DirTmp, relPath, data, r.layout.perms.file, r.disk.reaper)
		if err != nil && isNoSpace(err) && (relPath == protocol.FileHeartbeat || relPath == protocol.FileState) {
			err = r.disk.writeInPlace(relPath, data) // disk.go
		}
	}
	return err
}

// ringSync asks the syncer for a round (no-op with NoSync or before Run).
func (r *Runner) ringSync() {
	if r.sync != nil {
		r.sync.ring()
	}
}

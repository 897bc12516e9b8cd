package runner

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/protocol"
	"golang.org/x/sys/unix"
)

// openLogs opens log/meta.log and log/session.out. Either one planted as a
// symlink, a FIFO or anything but a regular file is refused with a message
// (never followed, never blocked on): log/ is the runner's own.
func (r *Runner) openLogs() error {
	torn, err := r.disk.openLogs(r.layout.perms.file)
	if torn > 0 {
		r.log.Warn("repaired a torn last line of the event log", "bytes", torn)
		r.event(protocol.Event{Event: protocol.EvWarning, Detail: map[string]any{"repaired_meta_log_bytes": torn}})
	}
	return err
}

// openLogs opens the event log, then the spool, made with perm. torn is
// the length of a torn last line repaired in the event log (which is open
// even when opening the spool then fails).
func (d *spoolDisk) openLogs(perm os.FileMode) (torn int, err error) {
	// Appends are not fsynced one by one: the syncer does it off the
	// critical path (and shutdown does it last).
	meta, tornLine, err := d.root.OpenLog(protocol.FileMeta, perm)
	if err != nil {
		return 0, plantedErr(protocol.FileMeta, err)
	}
	d.meta = meta
	d.metaInfo, _ = d.root.Lstat(protocol.FileMeta)
	_ = d.root.Chmod(protocol.FileMeta, perm) // A file of an earlier private session, now shared.
	spool, err := d.root.OpenAppend(protocol.FileSpool, perm)
	if err != nil {
		return len(tornLine), plantedErr(protocol.FileSpool, err)
	}
	_ = spool.Chmod(perm)
	fi, err := spool.Stat()
	if err != nil {
		spool.Close()
		return len(tornLine), err
	}
	d.spool, d.spoolSize, d.spoolInfo = spool, fi.Size(), fi
	d.spoolW = bufio.NewWriterSize(spool, 64<<10)
	return len(tornLine), nil
}

// plantedErr explains a runner file that is not a regular file.
func plantedErr(rel string, err error) error {
	if errors.Is(err, fsq.ErrSymlink) || errors.Is(err, fsq.ErrNotRegular) {
		return fmt.Errorf("%w: %s is not a regular file (%v): only the runner writes there; remove it", ErrUntrusted, rel, err)
	}
	if errors.Is(err, fsq.ErrHardLink) {
		return fmt.Errorf("%w: %s has another name (a hard link: %v): only the runner writes there; remove it", ErrUntrusted, rel, err)
	}
	return fmt.Errorf("runner: open %s: %w", rel, err)
}

// closeLogs flushes the spool and closes both logs.
func (r *Runner) closeLogs() {
	r.flushSpool()
	r.disk.closeLogs()
}

// closeLogs closes the spool and the event log (flushSpool first).
func (d *spoolDisk) closeLogs() {
	if d.spool != nil {
		_ = d.spool.Close() // Best effort at exit.
		d.spool = nil
	}
	if d.meta != nil {
		_ = d.meta.Close()
		d.meta = nil
	}
}

// reopenLogsIfGone reopens the event log or the spool when its file was
// deleted or replaced under the runner (appends would go nowhere).
// It returns why they cannot be opened (a FIFO planted there), for the
// caller's layout error.
func (r *Runner) reopenLogsIfGone() error {
	replaced, unreachable := r.disk.logsReplaced()
	if replaced {
		return r.reopenLogs()
	}
	// log/ swapped for a symlink: the open files are the session's own
	// (nothing is resolved by appending to them), so they stay open and
	// no event is lost; the layout error is reported meanwhile.
	return unreachable
}

// logsReplaced reports whether the event log or the spool was deleted or
// replaced under the runner, or else why log/ cannot be looked at
// (fsq.ErrLayout).
func (d *spoolDisk) logsReplaced() (replaced bool, unreachable error) {
	same := func(rel string, open os.FileInfo) bool {
		fi, err := d.root.Lstat(rel)
		if errors.Is(err, fsq.ErrLayout) {
			unreachable = err
			return true
		}
		return err == nil && open != nil && fsq.SameFile(fi, open)
	}
	replaced = !same(protocol.FileMeta, d.metaInfo) || !same(protocol.FileSpool, d.spoolInfo)
	return replaced, unreachable
}

// reopenLogs closes and reopens both logs (after log/ was recreated). A
// new spool starts again at offset 0. An error is for the caller to report
// (checkLayout, once per change): it recurs on every heartbeat until fixed.
func (r *Runner) reopenLogs() error {
	r.closeLogs()
	if err := r.openLogs(); err != nil {
		return err
	}
	r.onLogsReopened()
	r.log.Warn("reopened log/meta.log and log/session.out: they were deleted or replaced")
	r.event(protocol.Event{Event: protocol.EvWarning, Detail: map[string]any{"reopened": "log/meta.log, log/session.out", "spool_size": r.disk.spoolSize}})
	return nil
}

// event appends to log/meta.log; a failure is logged, not fatal: the
// results are the contract, the event log is the audit trail.
// controlEvents are the events of control acting on the session; each
// records the spool offset at which it took effect.
var controlEvents = map[string]bool{
	protocol.EvCancel: true, protocol.EvStop: true, protocol.EvLease: true, protocol.EvInterrupt: true,
	protocol.EvInput: true, protocol.EvSignal: true, protocol.EvResize: true, protocol.EvRequestRejected: true,
}

func (r *Runner) event(e protocol.Event) {
	if e.Event == protocol.EvCmdBegin {
		r.noteBegin(e) // Retention keeps its events and spool range (retain.go).
	}
	if err := r.disk.appendEvent(e); err != nil {
		r.log.Error("append event", "event", e.Event, "err", err)
	}
}

// appendEvent appends e to the event log (once closed: nothing), stamped
// with the time and, for a control event, the spool offset.
func (d *spoolDisk) appendEvent(e protocol.Event) error {
	if e.TS.IsZero() {
		e.TS = protocol.Now()
	}
	if d.meta == nil {
		return nil
	}
	if e.SpoolOffset == nil && controlEvents[e.Event] {
		// Control is ordered against output: where in the spool it acted.
		off := d.spoolSize
		e.SpoolOffset = &off
	}
	return d.meta.Append(e)
}

// markBuffered notes that printed bytes sit unflushed in the spool or
// output buffers since now, unless some already did.
func (d *spoolDisk) markBuffered(now time.Time) {
	if d.bufferedAt.IsZero() {
		d.bufferedAt = now
	}
}

// flushAt returns when the buffered bytes are due out (zero: none are).
func (d *spoolDisk) flushAt() time.Time {
	if d.bufferedAt.IsZero() {
		return time.Time{}
	}
	return d.bufferedAt.Add(flushDelay)
}

// flushDue reports whether bytes have been buffered for flushDelay at now.
func (d *spoolDisk) flushDue(now time.Time) bool {
	return !d.bufferedAt.IsZero() && now.Sub(d.bufferedAt) >= flushDelay
}

// syncSpool pushes the spool's written bytes to the file server
// (pushToServer); nothing once the spool is closed.
func (d *spoolDisk) syncSpool() error {
	if d.spool == nil {
		return nil
	}
	return unix.Fdatasync(int(d.spool.Fd()))
}

// spoolWrite appends raw tool output to the spool (buffered).
func (r *Runner) spoolWrite(b []byte) {
	if err := r.disk.spoolWrite(b); err != nil {
		r.spoolFailed(err)
	}
}

// spoolWrite appends b to the spool's buffer, or only counts it while the
// disk is full (or after the spool was closed: nothing).
func (d *spoolDisk) spoolWrite(b []byte) error {
	if d.spool == nil {
		return nil
	}
	if d.full {
		d.fullSpool += int64(len(b))
		return nil
	}
	if _, err := d.spoolW.Write(b); err != nil {
		return err
	}
	d.spoolSize += int64(len(b))
	return nil
}

// flushSpool writes buffered spool bytes out. The spool is buffered because
// a PTY hands out at most 4 KiB per read; it is flushed before every result
// (so the result's spool range can be read) and within flushDelay of any
// byte printed.
func (r *Runner) flushSpool() {
	recovered, err := r.disk.flushSpool()
	if err != nil {
		r.spoolFailed(err)
		return
	}
	if recovered {
		r.event(protocol.Event{Event: protocol.EvWarning, Detail: map[string]any{"spool": "writing log/session.out works again"}})
	}
}

// spoolFailed handles a failed spool write (a full disk): the buffered
// bytes are lost, and the spool continues from what the file holds, so
// that offsets stay true. bufio.Writer keeps an error forever; a fresh one
// lets the spool resume when space returns.
func (r *Runner) spoolFailed(err error) {
	if isNoSpace(err) {
		r.noSpace(protocol.FileSpool, err)
	}
	if r.disk.spoolReset(err) {
		r.log.Error("write spool; output is missing from log/session.out", "err", err)
		r.event(protocol.Event{Event: protocol.EvWarning, Detail: map[string]any{"spool": "write failed; output lost from log/session.out", "error": err.Error()}})
	}
}

// flushSpool writes the spool's buffer out. recovered says that the
// spool works again after a failed write.
func (d *spoolDisk) flushSpool() (recovered bool, err error) {
	if d.spool == nil || d.spoolW.Buffered() == 0 {
		return false, nil
	}
	if err := d.spoolW.Flush(); err != nil {
		return false, err
	}
	recovered, d.spoolErr = d.spoolErr != nil, nil
	return recovered, nil
}

// spoolReset continues the spool from what its file holds after err (the
// buffered bytes are lost), and reports whether err is the first failure
// since the spool last worked.
func (d *spoolDisk) spoolReset(err error) (first bool) {
	d.spoolW.Reset(d.spool)
	if fi, serr := d.spool.Stat(); serr == nil {
		d.spoolSize = fi.Size()
	}
	first, d.spoolErr = d.spoolErr == nil, err
	return first
}

package runner

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"syscall"
	"time"

	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/protocol"
	"golang.org/x/sys/unix"
)

// spoolDisk is the runner's part that writes the logs and watches the
// disk: the spool (log/session.out) and its buffer, the event log
// (log/meta.log), the pool of spare output files, the reserve
// (tmp/ballast), and the suspension of the spool and output files while
// the disk is full; and retention, which keeps a long-lived session's
// size flat (retain.go). It is owned by the Run goroutine.
type spoolDisk struct {
	retain     retainState // what retention keeps, and its pruner
	root       *fsq.Root
	meta       *fsq.Log      // log/meta.log; nil once closed
	metaInfo   os.FileInfo   // of the open event log
	spool      *os.File      // log/session.out; nil once closed
	spoolW     *bufio.Writer // buffers spool writes; flushed by flushSpool
	spoolErr   error         // the last spool write failure, until a write succeeds
	spoolInfo  os.FileInfo   // of the open spool, to notice it deleted or replaced
	spoolSize  int64
	bufferedAt time.Time   // when the spool or output buffers took their first unflushed byte
	outSpares  *fsq.Spares // output files made in advance
	reaper     *fsq.Reaper // removes the state files writeFile replaced, off the owner loop
	ballast    bool        // tmp/ballast holds the disk reserve
	// full: a write failed for want of space; the spool and output
	// files are suspended until the disk has room. The counts are the
	// bytes not written meanwhile.
	full               bool
	fullSpool, fullOut int64
}

// ballastSize is disk space the runner holds in reserve (tmp/ballast) and
// gives back when the disk fills up, so that the results of commands that
// ran meanwhile, state.json and the heartbeat can still be written. It is
// taken again once there is room.
const ballastSize = 1 << 20

// ballastName is the reserve's name in the session.
var ballastName = rel(protocol.DirTmp, "ballast")

// resumeFree is the free space at which a runner that suspended its output
// files (a full disk) takes its reserve again and resumes writing them.
const resumeFree = 4 * ballastSize

// freeBytes returns the space available to the runner on the session's
// filesystem (-1: unknown).
func (d *spoolDisk) freeBytes() int64 {
	var st unix.Statfs_t
	if err := d.root.Statfs(protocol.DirTmp, &st); err != nil {
		return -1
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// makeBallast reserves ballastSize bytes if the filesystem has room to
// spare (eight times as much free), or keeps the reserve already there.
func (d *spoolDisk) makeBallast() {
	if d.adoptBallast() || d.freeBytes() < 8*ballastSize {
		return
	}
	d.createBallast()
}

// takeBallast takes the reserve whatever the free space (resuming after a
// full disk: checkDiskRoom has seen resumeFree).
func (d *spoolDisk) takeBallast() {
	if !d.adoptBallast() {
		d.createBallast()
	}
}

// adoptBallast takes over a reserve already in tmp/ (one the previous
// runner left: sweepLeftovers keeps it) and reports whether there was one.
func (d *spoolDisk) adoptBallast() bool {
	fi, err := d.root.Lstat(ballastName)
	d.ballast = err == nil && fi.Mode().IsRegular() && fi.Size() >= ballastSize
	return d.ballast
}

// createBallast creates tmp/ballast (ballastSize bytes), replacing a
// leftover that is too small to be the reserve.
func (d *spoolDisk) createBallast() {
	_ = d.root.Remove(ballastName) // tmp/ is the runner's own; usually nothing is there.
	f, err := d.root.OpenFile(ballastName, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return
	}
	if err := unix.Fallocate(int(f.Fd()), 0, 0, ballastSize); err != nil {
		_, err = f.Write(make([]byte, ballastSize)) // No fallocate (NFS v3, tmpfs on old kernels).
		if err != nil {
			f.Close()
			_ = d.root.Remove(ballastName)
			return
		}
	}
	f.Close()
	d.ballast = true
}

// noSpace handles a write that failed for want of space (ENOSPC,
// EDQUOT). The runner gives its reserve back and suspends the writes that
// grow without bound — the spool and the running command's output file —
// so that what is left (results, state.json, the heartbeat, events) can
// still be written: a chatty command must not eat the reserve and make the
// runner look dead. The output printed meanwhile is counted, not written;
// the result says its output is incomplete. onBeat resumes once the
// filesystem has room again (checkDiskRoom).
func (r *Runner) noSpace(what string, err error) {
	released, first := r.disk.suspend()
	if !first {
		return
	}
	r.status.dirty = true
	d := map[string]any{"disk_full": true, "suspended": "log/session.out and output files", "failed": what, "error": err.Error()}
	if released {
		d["released_reserve_bytes"] = ballastSize
	}
	r.log.Warn("the disk is full: output files are suspended (not written) until it has room; results, state and heartbeat go on", "failed", what, "err", err, "released_reserve", released)
	r.event(protocol.Event{Event: protocol.EvWarning, Detail: d})
}

// suspend gives the reserve back (released: tmp/ballast was removed) and
// suspends the spool and output files, counting from zero the bytes not
// written. first says the suspension begins now; false: it was on already.
func (d *spoolDisk) suspend() (released, first bool) {
	if d.ballast {
		d.ballast = false
		released = d.root.Remove(ballastName) == nil
	}
	if d.full {
		return released, false
	}
	d.full = true
	d.fullSpool, d.fullOut = 0, 0
	return released, true
}

// checkDiskRoom ends a suspension (noSpace) once the filesystem has
// resumeFree bytes available: the reserve is taken again, then writing the
// spool and output files resumes. The event says how many bytes were not
// written meanwhile.
func (r *Runner) checkDiskRoom() {
	spoolLost, outLost, resumed := r.disk.resumeIfRoom()
	if !resumed {
		return
	}
	if c := r.cur; c != nil {
		c.resumeOutput()
	}
	r.status.dirty = true
	r.log.Info("the disk has room again: writing output files resumes", "spool_bytes_not_written", spoolLost, "output_bytes_not_written", outLost)
	r.event(protocol.Event{Event: protocol.EvWarning, Detail: map[string]any{"disk_full": false, "resumed": true,
		"spool_bytes_not_written": spoolLost, "output_bytes_not_written": outLost}})
}

// resumeIfRoom ends a suspension when the filesystem has resumeFree bytes
// available: it takes the reserve again and reports the spool and output
// bytes not written meanwhile. resumed is false when the disk was not
// full or still has too little room.
func (d *spoolDisk) resumeIfRoom() (spoolLost, outLost int64, resumed bool) {
	if !d.full || d.freeBytes() < resumeFree {
		return 0, 0, false
	}
	d.takeBallast()
	d.full = false
	return d.fullSpool, d.fullOut, true
}

// remakeBallast takes the reserve again if it is missing and the disk is
// not full (makeBallast: only with room to spare).
func (d *spoolDisk) remakeBallast() {
	if d.ballast || d.full {
		return
	}
	d.makeBallast()
}

// outputSuspended reports whether the disk is full; if so, the n output
// bytes the caller does not write are counted as not written.
func (d *spoolDisk) outputSuspended(n int) bool {
	if !d.full {
		return false
	}
	d.fullOut += int64(n)
	return true
}

// takeSpare takes a spare output file from the pool (openSpares).
func (d *spoolDisk) takeSpare() (*os.File, error) {
	return d.outSpares.Take()
}

// closeSpares removes the spare output files and reports whether the pool
// had been started (openSpares).
func (d *spoolDisk) closeSpares() bool {
	if d.outSpares == nil {
		return false
	}
	d.outSpares.Close()
	return true
}

// writeInPlace rewrites a small observed-state file (heartbeat.json,
// state.json) in place when the disk is too full for a temporary file: the
// file's blocks are already allocated, so the heartbeat goes on even when
// another process took the space the reserve gave back. The content is
// padded with spaces (valid JSON whitespace) to the old size, so no stale
// bytes remain. A reader may, rarely, see a torn file meanwhile; masters
// take an unreadable heartbeat as "no news", not as a dead runner. The
// write is fsq.Overwrite's: never through a symlink or a second hard link,
// never blocked on a FIFO.
func (d *spoolDisk) writeInPlace(relPath string, data []byte) error {
	fi, err := d.root.Lstat(relPath)
	if err != nil {
		return err
	}
	if n := fi.Size() - int64(len(data)); n > 0 {
		data = append(data[:len(data):len(data)], bytes.Repeat([]byte(" "), int(n))...)
	}
	return d.root.Overwrite(relPath, data)
}

// isNoSpace reports a full disk or an exhausted quota.
func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

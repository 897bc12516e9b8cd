package runner

import (
	"errors"
	"os"
	"syscall"

	"github.com/skillpilot/skillpilot/protocol"
	"golang.org/x/sys/unix"
)

// ballastSize is disk space the runner holds in reserve (tmp/ballast) and
// gives back when the disk fills up, so that the results of commands that
// ran meanwhile, state.json and the heartbeat can still be written. It is
// taken again once there is room.
const ballastSize = 1 << 20

func (r *Runner) ballastPath() string { return r.path(rel(protocol.DirTmp, "ballast")) }

// makeBallast reserves ballastSize bytes if the filesystem has room to
// spare (eight times as much free).
func (r *Runner) makeBallast() {
	var st unix.Statfs_t
	if err := unix.Statfs(r.path(protocol.DirTmp), &st); err != nil || int64(st.Bavail)*int64(st.Bsize) < 8*ballastSize {
		return
	}
	f, err := os.OpenFile(r.ballastPath(), os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return
	}
	if err := unix.Fallocate(int(f.Fd()), 0, 0, ballastSize); err != nil {
		_, err = f.Write(make([]byte, ballastSize)) // No fallocate (NFS v3, tmpfs on old kernels).
		if err != nil {
			f.Close()
			os.Remove(f.Name())
			return
		}
	}
	f.Close()
	r.ballast = true
}

// releaseBallast gives the reserve back to the filesystem (a full disk).
func (r *Runner) releaseBallast() {
	if !r.ballast {
		return
	}
	r.ballast = false
	if err := os.Remove(r.ballastPath()); err != nil {
		return
	}
	r.log.Warn("the disk is full: released the runner's 1 MiB reserve so that results and state can be written")
	r.event(protocol.Event{Event: protocol.EvWarning, Detail: map[string]any{"disk_full": true, "released_reserve_bytes": ballastSize}})
}

// removeBallast deletes the reserve at stop (tmp/ is left empty).
func (r *Runner) removeBallast() {
	if r.ballast {
		_ = os.Remove(r.ballastPath()) // tmp/ is emptied at the next start anyway.
		r.ballast = false
	}
}

// isNoSpace reports a full disk or an exhausted quota.
func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

package master

import (
	"errors"
	"fmt"
	"os"

	"github.com/skillpilot/skillpilot/protocol"
)

// Withdraw takes back a command no runner has claimed yet: its file is
// removed from queue/ (PROTOCOL.md section 6.1: a master may withdraw a
// queued command before it is claimed), so it never runs and gets no
// result. It is atomic against a runner's claim, which renames the same
// entry: exactly one of the two succeeds. A command a pool moved is
// withdrawn from the session it was moved to.
//
// A command that is running (claimed) is ErrNotQueued, one that has its
// result ErrAlreadyFinished (both exit 7), and one that is nowhere
// ErrUnknownCmdID.
func (c *Command) Withdraw() error {
	cur := c.Resolve()
	err := cur.s.remove(protocol.DirQueue + "/" + cur.Name)
	if err == nil {
		return nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return wrapf(err, "withdrawing %s", c.ID)
	}
	if r, _ := cur.Result(); r != nil {
		return fmt.Errorf("%w: %s has its result (%s); nothing to withdraw", ErrAlreadyFinished, c.ID, r.Status)
	}
	if cur.s.exists(protocol.DirInflight + "/" + cur.Name) {
		return fmt.Errorf("%w: %s is running (a runner claimed it); cancel it instead", ErrNotQueued, c.ID)
	}
	return fmt.Errorf("%w: %s is no longer queued, running or finished in this session", ErrUnknownCmdID, c.ID)
}

// queued reports whether the command (followed where a pool moved it) is
// still in queue/, unclaimed.
func (c *Command) queued() bool {
	cur := c.Resolve()
	return cur.s.exists(protocol.DirQueue + "/" + cur.Name)
}

// noRunnerErr is a wait's ErrRunnerNotAlive for c, saying plainly what
// becomes of c: a queued command stays queued, and a runner started later
// runs it unless it is withdrawn (issue 26.9: a retrying script ran it
// twice).
func (c *Command) noRunnerErr(err error) error {
	if c.queued() {
		err = fmt.Errorf("%w; %s stays queued: a runner started later runs it unless it is withdrawn", err, c.ID)
	}
	return wrapf(err, "waiting for %s", c.ID)
}

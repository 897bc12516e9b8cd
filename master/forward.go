package master

import (
	"path/filepath"

	"github.com/skillpilot/skillpilot/protocol"
)

// maxHops bounds how many forwards a lookup follows (moves chain when a
// target dies too; a longer chain is a crafted loop).
const maxHops = 16

// forwarded returns the command a forward record of c's session points to,
// or nil when c was not moved.
func (c *Command) forwarded() *Command {
	if c.hops >= maxHops {
		return nil
	}
	f, err := c.s.io.ReadForward(c.Name)
	if err != nil {
		return nil
	}
	t, err := Open(filepath.Join(c.s.Dir(), f.ToSession))
	if err != nil {
		return nil
	}
	seq, id, err := protocol.ParseCommandName(f.ToName)
	if err != nil || id != c.ID {
		return nil
	}
	t.PollInterval = c.s.PollInterval
	return &Command{s: t, ID: id, Seq: seq, Name: f.ToName, hops: c.hops + 1}
}

// Resolve follows c's forward records to the handle of the session the
// command is in now (c itself when it was never moved). A wait that checks
// liveness must check this session's runner, not the one c was queued in.
func (c *Command) Resolve() *Command {
	for {
		if c.s.io.Exists(protocol.DirResult + "/" + c.Name) {
			return c
		}
		next := c.forwarded()
		if next == nil {
			return c
		}
		c = next
	}
}

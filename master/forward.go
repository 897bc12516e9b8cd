package master

import (
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/skillpilot/skillpilot/protocol"
)

// DirForward is forward/ in a session: forward/<name>.json says where a
// command moved by a pool went (PROTOCOL.md, "Pools"). Every lookup of a
// command follows it.
const DirForward = "forward"

// Forward is forward/<name> in a session: the command queued there as
// <name> was moved, exactly once, to ToName in the session at ToSession.
// Written once, by the mover that won the move, never changed.
type Forward struct {
	ProtocolVersion int           `json:"protocol_version"`
	CmdID           string        `json:"cmd_id"`
	Seq             int64         `json:"seq"`
	ToSession       string        `json:"to_session"` // relative to this session's directory: "../s02"
	ToName          string        `json:"to_name"`    // cmd_<new seq>_<cmd_id>.json in the target's queue/
	Stage           string        `json:"stage"`      // the dot-file in the target's queue/ renamed to ToName
	Reason          string        `json:"reason"`
	MovedAt         protocol.Time `json:"moved_at"`
	Mover           string        `json:"mover"`
}

// ReadForward reads and checks the forward record at path (a pool mover
// writes them, see Forward).
func ReadForward(path string) (*Forward, error) {
	b, err := readForwardFile(path)
	if err != nil {
		return nil, err
	}
	return parseForward(path, b)
}

// readForward reads and checks the session's forward record for the
// command file name.
func (s *Session) readForward(name string) (*Forward, error) {
	b, _, err := s.readFile(DirForward+"/"+name, 1<<16, true)
	if err != nil {
		return nil, err
	}
	return parseForward(s.path(DirForward+"/"+name), b)
}

// parseForward checks the forward record b read from path.
func parseForward(path string, b []byte) (*Forward, error) {
	var f Forward
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, wrapf(err, "%s", path)
	}
	if !protocol.ValidCmdID(f.CmdID) || f.ToSession == "" || filepath.Base(f.ToName) != f.ToName || filepath.Base(f.Stage) != f.Stage {
		return nil, fmt.Errorf("master: %s: not a valid forward record", path)
	}
	return &f, nil
}

// maxHops bounds how many forwards a lookup follows (moves chain when a
// target dies too; a longer chain is a crafted loop).
const maxHops = 16

// forwarded returns the command a forward record of c's session points to,
// or nil when c was not moved.
func (c *Command) forwarded() *Command {
	if c.hops >= maxHops {
		return nil
	}
	f, err := c.s.readForward(c.Name)
	if err != nil {
		return nil
	}
	t, err := Open(filepath.Join(c.s.dir, f.ToSession))
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
		if c.s.exists(protocol.DirResult + "/" + c.Name) {
			return c
		}
		next := c.forwarded()
		if next == nil {
			return c
		}
		c = next
	}
}

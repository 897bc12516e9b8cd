package sessionio

import (
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/skillpilot/skillpilot/protocol"
)

// Directories of a session that only pools (and withdraw) make
// (PROTOCOL.md, "Pools" and section 19).
const (
	// DirMoved is moved/ in a session: moved/<name> is a command a pool
	// mover claimed out of queue/, its move in progress (PROTOCOL.md 18.4).
	DirMoved = "moved"
	// DirForward is forward/ in a session: forward/<name> says where a
	// command moved by a pool went (Forward). Every lookup of a command
	// follows it.
	DirForward = "forward"
	// DirWithdrawn is withdrawn/ in a session: withdrawn/<name> is a
	// command file a master's withdraw renamed out of queue/ (or a pool's
	// staging name). It never runs; it is kept so that a second withdraw
	// can say so.
	DirWithdrawn = "withdrawn"
)

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

// MaxForward bounds what a forward record may hold.
const MaxForward = 1 << 16

// ParseForward checks the forward record b read from path (named in
// errors).
func ParseForward(path string, b []byte) (*Forward, error) {
	var f Forward
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, Wrapf(err, "%s", path)
	}
	if !protocol.ValidCmdID(f.CmdID) || f.ToSession == "" || filepath.Base(f.ToName) != f.ToName || filepath.Base(f.Stage) != f.Stage {
		return nil, fmt.Errorf("master: %s: not a valid forward record", path)
	}
	return &f, nil
}

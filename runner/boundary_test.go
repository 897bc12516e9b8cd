package runner

import (
	"encoding/json"

	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/protocol"
)

// readHeartbeatPath reads a heartbeat by path, as a test looking at the
// session from outside does.
func readHeartbeatPath(path string) (protocol.Heartbeat, error) {
	var hb protocol.Heartbeat
	b, _, err := fsq.ReadFile(path, maxStateFile)
	if err != nil {
		return hb, err
	}
	return hb, json.Unmarshal(b, &hb)
}

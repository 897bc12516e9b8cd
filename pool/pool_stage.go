package pool

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
)

// StaleStageAge is how old (on the filesystem's clock) a mover's dot-file
// in a session's queue/ must be before a heal pass may delete it
// (PROTOCOL.md 18.4, "Leftovers of killed movers"). A live mover holds a
// temporary file for the time of one write.
const StaleStageAge = 10 * time.Minute

// stagePrefix starts the name of a staged move (18.4 step 2).
const stagePrefix = ".mv_"

// sweepStages deletes from the queue/ of every session of views what
// movers killed mid-move left there, each at least StaleStageAge old at
// now: a temporary file (.*.tmp) of a write that never completed, and a
// staged file (.mv_*) that can never be published because the move it
// was staged for was recorded with another stage (orphanStage). It
// returns the paths it removed, relative to the pool directory.
func (p *Pool) sweepStages(views []SessionView, now time.Time) []string {
	var removed []string
	for _, v := range views {
		if v.s == nil {
			continue
		}
		q := sessionPath(v.s, protocol.DirQueue)
		names, _ := fsq.ReadNames(q)
		for _, n := range names {
			stage := strings.HasPrefix(n, stagePrefix)
			if !stage && !(strings.HasPrefix(n, ".") && strings.HasSuffix(n, ".tmp")) {
				continue
			}
			path := filepath.Join(q, n)
			fi, err := os.Lstat(path)
			if err != nil || !fi.Mode().IsRegular() || now.Sub(fi.ModTime()) < StaleStageAge {
				continue
			}
			if stage && !orphanStage(v.s.Dir(), n) {
				continue
			}
			if os.Remove(path) == nil {
				rel, _ := filepath.Rel(p.dir, path)
				removed = append(removed, rel)
				p.event("stage_removed", map[string]any{"file": rel})
			}
		}
	}
	return removed
}

// orphanStage reports whether the stage name in target/queue/ can never be
// published: its moved_from names the command F of session D it was
// staged for, and D/forward/F exists and names another stage (forward
// records are created exclusively and never change, so no mover will
// ever publish this one). Without a readable moved_from, or while
// D/forward/F does not exist (its mover may be between staging and
// recording, however long it was suspended), the stage is kept.
func orphanStage(target, name string) bool {
	raw, _, err := fsq.ReadFile(filepath.Join(target, protocol.DirQueue, name), maxPoolCommand)
	if err != nil {
		return false
	}
	var body struct {
		MovedFrom *struct {
			Session string `json:"session"`
			Name    string `json:"name"`
		} `json:"moved_from"`
	}
	if json.Unmarshal(raw, &body) != nil || body.MovedFrom == nil || body.MovedFrom.Session == "" ||
		!isCommand(body.MovedFrom.Name) {
		return false
	}
	from := filepath.Join(target, body.MovedFrom.Session)
	fwd, err := master.ReadForward(filepath.Join(from, master.DirForward, body.MovedFrom.Name))
	if err != nil {
		return false
	}
	return fwd.Stage != name || filepath.Join(from, fwd.ToSession) != filepath.Clean(target)
}

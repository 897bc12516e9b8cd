package pool

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"time"

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
		r := sessionRoot(v.s)
		if r == nil {
			continue
		}
		names, _ := r.ReadNames(protocol.DirQueue)
		for _, n := range names {
			stage := strings.HasPrefix(n, stagePrefix)
			if !stage && !(strings.HasPrefix(n, ".") && strings.HasSuffix(n, ".tmp")) {
				continue
			}
			name := protocol.DirQueue + "/" + n
			fi, err := r.Lstat(name)
			if err != nil || !fi.Mode().IsRegular() || now.Sub(fi.ModTime()) < StaleStageAge {
				continue
			}
			if stage && !orphanStage(views, v.s, n) {
				continue
			}
			if removeSession(v.s, name) == nil {
				rel, _ := filepath.Rel(p.dir, filepath.Join(v.s.Dir(), name))
				removed = append(removed, rel)
				p.event("stage_removed", map[string]any{"file": rel})
			}
		}
	}
	return removed
}

// orphanStage reports whether the stage name in target's queue/ can never
// be published: its moved_from names the command F of session D it was
// staged for, and D/forward/F exists and names another stage (forward
// records are created exclusively and never change, so no mover will
// ever publish this one). Without a readable moved_from, when D is not a
// session of the pool, or while D/forward/F does not exist (its mover may
// be between staging and recording, however long it was suspended), the
// stage is kept.
func orphanStage(views []SessionView, target *master.Session, name string) bool {
	raw, err := readSessionFile(target, protocol.DirQueue+"/"+name, maxPoolCommand)
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
	fromDir := filepath.Join(target.Dir(), body.MovedFrom.Session)
	var from *master.Session
	for _, v := range views {
		if v.s != nil && filepath.Clean(v.s.Dir()) == fromDir {
			from = v.s
		}
	}
	if from == nil {
		return false
	}
	fwd, err := from.Core().ReadForward(body.MovedFrom.Name)
	if err != nil {
		return false
	}
	return fwd.Stage != name || filepath.Join(fromDir, fwd.ToSession) != filepath.Clean(target.Dir())
}

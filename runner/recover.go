package runner

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/protocol"
)

// recover runs before the first command: it learns which cmd_ids already
// have results, and settles every file a dead runner left in inflight/.
// A claimed command without a result gets exactly one result, status error,
// exit_reason runner_restarted: the tool state it ran in is gone, so it is
// never run again silently.
func (r *Runner) recover() error {
	if r.pendingTakeover != nil {
		r.event(protocol.Event{Event: protocol.EvLockTakeover, Detail: r.pendingTakeover})
	}
	// Spares and temp files of a dead runner (older runners kept spares
	// beside results; tmp/ is private to the runner).
	fsq.RemoveSpares(r.path(protocol.DirOutput))
	fsq.RemoveSpares(r.path(protocol.DirResult))
	if err := emptyDir(r.path(protocol.DirTmp)); err != nil {
		return err
	}
	results, err := fsq.ReadNames(r.path(protocol.DirResult))
	if err != nil {
		return err
	}
	have := make(map[string]bool, len(results))
	for _, name := range results {
		if _, id, err := protocol.ParseCommandName(name); err == nil {
			r.doneIDs[id] = true
			have[name] = true
		}
	}
	inflight, err := fsq.ReadNames(r.path(protocol.DirInflight))
	if err != nil {
		return err
	}
	for _, name := range inflight {
		p := r.path(rel(protocol.DirInflight, name))
		seq, id, perr := protocol.ParseCommandName(name)
		if perr != nil {
			if strings.HasSuffix(name, payloadExt) || strings.HasPrefix(name, ".") {
				_ = os.Remove(p) // A payload file or temp file of a dead run.
			}
			continue
		}
		if !have[name] {
			res := &protocol.Result{
				CmdID: id, Seq: seq, Status: protocol.StatusError, ExitReason: protocol.ReasonRunnerRestarted,
				Error: &protocol.Error{Code: protocol.CodeRunnerRestarted,
					Message: "the runner stopped while this command was claimed or running; it was not run again because the tool state it ran in is gone"},
				CommandPath: rel(protocol.DirArchive, name),
			}
			if err := r.writeResult(name, res); err != nil {
				return err
			}
			r.log.Warn("recovered an interrupted command", "name", name)
		}
		archiveCommand(p, r.path(rel(protocol.DirArchive, name)))
		if _, err := os.Lstat(p); err == nil {
			return fmt.Errorf("runner: cannot clear %s", p)
		}
		r.event(protocol.Event{Event: protocol.EvRecovered, CmdID: id, Seq: seq, Status: protocol.StatusError,
			ExitReason: protocol.ReasonRunnerRestarted, Detail: map[string]any{"had_result": have[name]}})
	}
	if len(inflight) > 0 && !r.cfg.NoSync {
		// Recovery results are durable before anything else happens.
		if err := fsq.SyncDir(r.path(protocol.DirResult)); err != nil {
			return err
		}
		if err := r.meta.Sync(); err != nil {
			return err
		}
	}
	return nil
}

// emptyDir removes every entry of dir (the runner's private tmp/).
func emptyDir(dir string) error {
	names, err := fsq.ReadNames(dir)
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := os.RemoveAll(filepath.Join(dir, n)); err != nil {
			return err
		}
	}
	return nil
}

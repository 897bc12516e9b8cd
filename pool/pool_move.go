package pool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/internal/sessionio"
	"github.com/skillpilot/skillpilot/launch"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
)

// Move is one command moved by Heal.
type Move struct {
	From   string `json:"from"`
	Name   string `json:"name"`
	To     string `json:"to"`
	ToName string `json:"to_name"`
}

// HealReport says what one Heal pass did.
type HealReport struct {
	Moved     []Move   `json:"moved,omitempty"`
	Respawned []string `json:"respawned,omitempty"`
	Dead      []string `json:"dead,omitempty"`
	// Removed lists the leftovers of killed movers deleted from queue/
	// (relative to the pool directory; PROTOCOL.md 18.4).
	Removed []string `json:"removed,omitempty"`
}

// minMoveAge: a queue file younger than this (filesystem clock) may still
// be being written by a non-atomic writer; it waits for the next pass.
const minMoveAge = 2 * time.Second

// Heal moves the unclaimed commands of dead sessions to live ones, finishes
// moves a crashed mover left half done, and (pool.json respawn) relaunches
// dead sessions whose job is gone. Every command that entered a queue/
// ends with exactly one result: a move claims the file by renaming it out
// of queue/ (the runner claims by renaming it into inflight/: exactly one
// rename wins), and forward/<name> is created exclusively, so a command is
// re-queued once whatever the number of concurrent movers. A claimed
// command (inflight/) is not moved: the session's next runner gives it its
// result (runner_restarted). Heal is safe to run from many processes.
func (p *Pool) Heal(ctx context.Context) (HealReport, error) {
	var rep HealReport
	now, err := p.fsNow()
	if err != nil {
		return rep, err
	}
	var views []SessionView
	for _, name := range p.SessionNames() {
		views = append(views, p.view(name, now))
	}
	var errs []error
	var dead []SessionView // to respawn
	for _, v := range views {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		if v.s == nil {
			continue
		}
		for _, name := range commandNames(v.s, DirMoved) {
			m, err := p.finishMove(views, v, name)
			if err != nil {
				errs = append(errs, err)
			} else if m != nil {
				rep.Moved = append(rep.Moved, *m)
			}
		}
		if !v.Dead {
			continue
		}
		rep.Dead = append(rep.Dead, v.Name)
		if _, ok := leastLoaded(views, v.Name); ok {
			for _, name := range commandNames(v.s, protocol.DirQueue) {
				m, err := p.moveOne(views, v, name, now)
				if err != nil {
					errs = append(errs, err)
				} else if m != nil {
					rep.Moved = append(rep.Moved, *m)
				}
			}
		}
		if p.cfg.Respawn {
			dead = append(dead, v)
		}
	}
	respawned, rerrs := p.respawnAll(ctx, dead)
	rep.Respawned = respawned
	errs = append(errs, rerrs...)
	rep.Removed = p.sweepStages(views, now)
	return rep, errors.Join(errs...)
}

// respawnLimit bounds the relaunches one heal pass runs at once.
const respawnLimit = 16

// respawnAll runs respawn for the dead sessions, up to respawnLimit at
// once (each is a scheduler submission: qsub took ~2 s each under load,
// 13 of them one after the other 27 s), and returns the names relaunched
// in the order of dead.
func (p *Pool) respawnAll(ctx context.Context, dead []SessionView) ([]string, []error) {
	ok := make([]bool, len(dead))
	errs := make([]error, len(dead))
	sem := make(chan struct{}, respawnLimit)
	var wg sync.WaitGroup
	for i, v := range dead {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			ok[i], errs[i] = p.respawn(ctx, v)
		}()
	}
	wg.Wait()
	var names []string
	for i, v := range dead {
		if ok[i] {
			names = append(names, v.Name)
		}
	}
	return names, errs
}

// moveOne claims queue/<name> of the dead session v (renaming it into
// moved/) and finishes the move. Losing the claim to the runner or another
// mover is not an error (nil, nil).
func (p *Pool) moveOne(views []SessionView, v SessionView, name string, now time.Time) (*Move, error) {
	q := protocol.DirQueue + "/" + name
	if fi, err := lstat(v.s, q); err != nil || !fi.Mode().IsRegular() || now.Sub(fi.ModTime()) < minMoveAge {
		return nil, nil // Gone, not a plain file (the runner answers it), or maybe still being written.
	}
	if err := mkdirSession(v.s, DirMoved); err != nil {
		return nil, err
	}
	ok, err := claim(v.s, q, DirMoved+"/"+name)
	if err != nil || !ok {
		return nil, err
	}
	return p.finishMove(views, v, name)
}

// finishMove completes the move of moved/<name> of session v: if no
// forward record exists yet, it stages the command (with a new seq) as a
// dot-file in a live session's queue/ and creates forward/<name>
// exclusively; then it renames the staged file named by the forward record
// into place (ENOENT: already done) and removes moved/<name>.
func (p *Pool) finishMove(views []SessionView, v SessionView, name string) (*Move, error) {
	return p.finishMoveTo(views, v, name, nil, "")
}

// finishMoveTo is finishMove that, when it stages, stages into to (nil:
// the session 18.3 chooses) and records reason (empty: v's death).
func (p *Pool) finishMoveTo(views []SessionView, v SessionView, name string, to *SessionView, reason string) (*Move, error) {
	s := v.s
	fwd, err := s.Core().ReadForward(name)
	if errors.Is(err, os.ErrNotExist) {
		fwd, err = p.stageMove(views, v, name, to, reason)
	}
	if err != nil || fwd == nil {
		return nil, err
	}
	target, err := p.forwardTarget(s, fwd)
	if err != nil {
		return nil, fmt.Errorf("master: move %s/%s: %w", v.Name, name, err)
	}
	ours, err := claim(target, protocol.DirQueue+"/"+fwd.Stage, protocol.DirQueue+"/"+fwd.ToName)
	if err != nil {
		return nil, fmt.Errorf("master: move %s/%s: %w", v.Name, name, err)
	}
	_ = removeSession(s, DirMoved+"/"+name) // Moved; an error leaves it for the next pass, which finds the forward.
	if !ours {
		return nil, nil // Another mover put it in place.
	}
	m := &Move{From: v.Name, Name: name, To: filepath.Base(target.Dir()), ToName: fwd.ToName}
	p.event("moved", map[string]any{"from": m.From, "name": name, "to": m.To, "to_name": m.ToName, "reason": fwd.Reason})
	return m, nil
}

// stageMove writes the command of moved/<name> into a live session's
// queue/ under a dot-name and records the forward. It returns the forward
// that won (another mover's, if it was first), or nil when no session can
// take the command now.
func (p *Pool) stageMove(views []SessionView, v SessionView, name string, to *SessionView, reason string) (*sessionio.Forward, error) {
	s := v.s
	seq, cmdID, err := protocol.ParseCommandName(name)
	if err != nil {
		return nil, err
	}
	raw, err := readSessionFile(s, DirMoved+"/"+name, maxPoolCommand)
	if errors.Is(err, os.ErrNotExist) {
		return s.Core().ReadForward(name) // Finished by another mover meanwhile.
	}
	if err != nil {
		raw = nil // Too large or unreadable: moved as is; the target's runner answers it as invalid.
	}
	var body map[string]json.RawMessage
	var affinity string
	if json.Unmarshal(raw, &body) == nil && body != nil {
		_ = json.Unmarshal(body["affinity"], &affinity) // Absent or not a string: no affinity.
	}
	var t SessionView
	if to != nil {
		t = *to
	} else if t, err = p.pick(views, affinity, v.Name); err != nil {
		return nil, nil // No live session now; the claim waits in moved/ for the next pass.
	}
	switch {
	case reason != "":
	case v.Dead:
		reason = v.Name + " dead: " + v.Why
	default: // A balancing move (Balance) a crashed mover left in moved/.
		reason = "an interrupted move out of " + v.Name + " finished"
	}
	for i := range views {
		if views[i].Name == t.Name {
			views[i].Queue++ // So that the next move of this pass sees the load it adds.
		}
	}
	newSeq, err := t.s.Core().AllocSeq()
	if err != nil {
		return nil, err
	}
	toName := protocol.CommandName(newSeq, cmdID)
	data := raw
	if body != nil {
		body["seq"], _ = json.Marshal(newSeq)
		body["moved_from"], _ = json.Marshal(map[string]any{"session": relPath(t.s.Dir(), s.Dir()), "name": name})
		data, _ = json.Marshal(body)
	}
	stage := ".mv_" + toName
	if err := writeSessionFile(t.s, protocol.DirQueue+"/"+stage, data, fsq.FileSynced); err != nil {
		return nil, fmt.Errorf("master: stage move of %s/%s: %w", v.Name, name, err)
	}
	fwd := &sessionio.Forward{ProtocolVersion: protocol.Version, CmdID: cmdID, Seq: seq, ToSession: relPath(s.Dir(), t.s.Dir()),
		ToName: toName, Stage: stage, Reason: reason, MovedAt: protocol.Now(), Mover: s.Core().Owner()}
	b, _ := json.MarshalIndent(fwd, "", "  ")
	if err := mkdirSession(s, sessionio.DirForward); err != nil {
		return nil, err
	}
	r, err := s.Core().Root()
	if err != nil {
		return nil, err
	}
	won, err := linkNew(r, sessionio.DirForward+"/"+name, append(b, '\n'))
	if err != nil || !won {
		_ = removeSession(t.s, protocol.DirQueue+"/"+stage) // Ours, never named by a forward.
		if err != nil {
			return nil, err
		}
		return s.Core().ReadForward(name)
	}
	_ = syncSessionDir(s, sessionio.DirForward) // Best effort: the forward outlives a machine crash.
	return fwd, nil
}

func relPath(from, to string) string {
	r, err := filepath.Rel(from, to)
	if err != nil {
		return to
	}
	return r
}

// Where is a command of a pool now.
type Where struct {
	Session string `json:"session"` // pool session name
	Name    string `json:"name"`
	State   string `json:"state"` // queued, claimed, moving, done, unknown
}

// Locate follows c's forwards to where the command is now.
func (p *Pool) Locate(c *master.Command) (Where, *master.Command) {
	cur := c.Resolve()
	w := Where{Session: filepath.Base(cur.Session().Dir()), Name: cur.Name, State: "unknown"}
	s := cur.Session()
	revalidate(s, protocol.DirResult)
	switch {
	case exists(s, protocol.DirResult+"/"+cur.Name):
		w.State = "done"
	case exists(s, protocol.DirInflight+"/"+cur.Name):
		w.State = "claimed"
	case exists(s, protocol.DirQueue+"/"+cur.Name):
		w.State = "queued"
	case exists(s, DirMoved+"/"+cur.Name):
		w.State = "moving"
	}
	return w, cur
}

// respawn relaunches the dead session v if its job is gone, it was not
// stopped on purpose (StopLaunched) and it has been launched at most
// MaxRespawns times before. It does not wait for the
// runner to serve.
func (p *Pool) respawn(ctx context.Context, v SessionView) (bool, error) {
	li, err := launch.Read(v.s)
	if err != nil || li.Launches > p.cfg.MaxRespawns {
		return false, nil
	}
	lo := p.launchOptions(v.Name)
	lo.NoWait, lo.Respawn = true, true
	res, err := launch.Launch(ctx, v.s.Dir(), lo)
	if errors.Is(err, launch.ErrAlreadyLaunched) || errors.Is(err, launch.ErrStoppedOnPurpose) {
		// Its job is still queued or running (e.g. respawned by another
		// process), or master stop / pool stop stopped it.
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("master: respawn %s: %w", v.Name, err)
	}
	p.event("respawned", map[string]any{"session": v.Name, "job_id": res.Info.JobID, "launches": res.Info.Launches, "why": v.Why})
	return true, nil
}

// forwardTarget is the session a forward record of session s moves its
// command to: a session of this pool ("../s02"), opened as the pool opens
// its sessions (never through a symlink in the pool directory).
func (p *Pool) forwardTarget(s *master.Session, fwd *sessionio.Forward) (*master.Session, error) {
	dir, name := filepath.Split(filepath.Clean(fwd.ToSession))
	if filepath.Clean(dir) != ".." || !isPoolSessionName(name) || filepath.Dir(s.Dir()) != p.dir {
		return nil, fmt.Errorf("forward to %q: not a session of the pool %s", fwd.ToSession, p.dir)
	}
	return p.session(name)
}

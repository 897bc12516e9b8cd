package pool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/skillpilot/skillpilot/fsq"
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
	for _, v := range views {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		if v.s == nil {
			continue
		}
		for _, name := range commandNames(sessionPath(v.s, DirMoved)) {
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
			for _, name := range commandNames(sessionPath(v.s, protocol.DirQueue)) {
				m, err := p.moveOne(views, v, name, now)
				if err != nil {
					errs = append(errs, err)
				} else if m != nil {
					rep.Moved = append(rep.Moved, *m)
				}
			}
		}
		if p.cfg.Respawn {
			if ok, err := p.respawn(ctx, v); err != nil {
				errs = append(errs, err)
			} else if ok {
				rep.Respawned = append(rep.Respawned, v.Name)
			}
		}
	}
	rep.Removed = p.sweepStages(views, now)
	return rep, errors.Join(errs...)
}

// commandNames lists the command files of dir in (seq, name) order.
func commandNames(dir string) []string {
	names, _ := fsq.ReadNames(dir)
	var out []string
	for _, n := range names {
		if isCommand(n) {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		si, _, _ := protocol.ParseCommandName(out[i])
		sj, _, _ := protocol.ParseCommandName(out[j])
		return si < sj || si == sj && out[i] < out[j]
	})
	return out
}

// moveOne claims queue/<name> of the dead session v (renaming it into
// moved/) and finishes the move. Losing the claim to the runner or another
// mover is not an error (nil, nil).
func (p *Pool) moveOne(views []SessionView, v SessionView, name string, now time.Time) (*Move, error) {
	q := sessionPath(v.s, filepath.Join(protocol.DirQueue, name))
	if fi, err := os.Lstat(q); err != nil || !fi.Mode().IsRegular() || now.Sub(fi.ModTime()) < minMoveAge {
		return nil, nil // Gone, not a plain file (the runner answers it), or maybe still being written.
	}
	if err := os.MkdirAll(sessionPath(v.s, DirMoved), 0o700); err != nil {
		return nil, err
	}
	ok, err := fsq.Claim(q, sessionPath(v.s, filepath.Join(DirMoved, name)))
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
	s := v.s
	fwdPath := sessionPath(s, filepath.Join(master.DirForward, name))
	fwd, err := master.ReadForward(fwdPath)
	if errors.Is(err, os.ErrNotExist) {
		fwd, err = p.stageMove(views, v, name)
	}
	if err != nil || fwd == nil {
		return nil, err
	}
	target := filepath.Join(s.Dir(), fwd.ToSession)
	ours, err := fsq.Claim(filepath.Join(target, protocol.DirQueue, fwd.Stage), filepath.Join(target, protocol.DirQueue, fwd.ToName))
	if err != nil {
		return nil, fmt.Errorf("master: move %s/%s: %w", v.Name, name, err)
	}
	_ = os.Remove(sessionPath(s, filepath.Join(DirMoved, name))) // Moved; an error leaves it for the next pass, which finds the forward.
	if !ours {
		return nil, nil // Another mover put it in place.
	}
	m := &Move{From: v.Name, Name: name, To: filepath.Base(target), ToName: fwd.ToName}
	p.event("moved", map[string]any{"from": m.From, "name": name, "to": m.To, "to_name": m.ToName, "reason": fwd.Reason})
	return m, nil
}

// stageMove writes the command of moved/<name> into a live session's
// queue/ under a dot-name and records the forward. It returns the forward
// that won (another mover's, if it was first), or nil when no session can
// take the command now.
func (p *Pool) stageMove(views []SessionView, v SessionView, name string) (*master.Forward, error) {
	s := v.s
	seq, cmdID, err := protocol.ParseCommandName(name)
	if err != nil {
		return nil, err
	}
	raw, _, err := fsq.ReadFile(sessionPath(s, filepath.Join(DirMoved, name)), maxPoolCommand)
	if errors.Is(err, os.ErrNotExist) {
		return master.ReadForward(sessionPath(s, filepath.Join(master.DirForward, name))) // Finished by another mover meanwhile.
	}
	if err != nil {
		raw = nil // Too large or unreadable: moved as is; the target's runner answers it as invalid.
	}
	var body map[string]json.RawMessage
	var affinity string
	if json.Unmarshal(raw, &body) == nil && body != nil {
		_ = json.Unmarshal(body["affinity"], &affinity) // Absent or not a string: no affinity.
	}
	t, err := p.pick(views, affinity, v.Name)
	if err != nil {
		return nil, nil // No live session now; the claim waits in moved/ for the next pass.
	}
	for i := range views {
		if views[i].Name == t.Name {
			views[i].Queue++ // So that the next move of this pass sees the load it adds.
		}
	}
	newSeq, err := master.AllocSeq(t.s.Dir())
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
	if err := fsq.WriteAtomic(sessionPath(t.s, filepath.Join(protocol.DirQueue, stage)), data, 0o660, fsq.FileSynced); err != nil {
		return nil, fmt.Errorf("master: stage move of %s/%s: %w", v.Name, name, err)
	}
	fwd := &master.Forward{ProtocolVersion: protocol.Version, CmdID: cmdID, Seq: seq, ToSession: relPath(s.Dir(), t.s.Dir()),
		ToName: toName, Stage: stage, Reason: v.Name + " dead: " + v.Why, MovedAt: protocol.Now(), Mover: s.Owner()}
	b, _ := json.MarshalIndent(fwd, "", "  ")
	if err := os.MkdirAll(sessionPath(s, master.DirForward), 0o700); err != nil {
		return nil, err
	}
	won, err := linkNew(sessionPath(s, filepath.Join(master.DirForward, name)), append(b, '\n'))
	if err != nil || !won {
		_ = os.Remove(sessionPath(t.s, filepath.Join(protocol.DirQueue, stage))) // Ours, never named by a forward.
		if err != nil {
			return nil, err
		}
		return master.ReadForward(sessionPath(s, filepath.Join(master.DirForward, name)))
	}
	_ = fsq.SyncDir(sessionPath(s, master.DirForward)) // Best effort: the forward outlives a machine crash.
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
	fsq.Revalidate(sessionPath(cur.Session(), protocol.DirResult))
	switch {
	case exists(sessionPath(cur.Session(), filepath.Join(protocol.DirResult, cur.Name))):
		w.State = "done"
	case exists(sessionPath(cur.Session(), filepath.Join(protocol.DirInflight, cur.Name))):
		w.State = "claimed"
	case exists(sessionPath(cur.Session(), filepath.Join(protocol.DirQueue, cur.Name))):
		w.State = "queued"
	case exists(sessionPath(cur.Session(), filepath.Join(DirMoved, cur.Name))):
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

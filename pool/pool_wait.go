package pool

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/skillpilot/skillpilot/internal/sessionio"
	"github.com/skillpilot/skillpilot/launch"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
)

// Wait waits for the command's result wherever it was moved, healing the
// pool once a second meanwhile (see Pool.WaitCommand).
func (pc *Command) Wait(ctx context.Context) (*protocol.Result, error) {
	return pc.pool.WaitCommand(ctx, pc.Command)
}

// WaitCommand waits for c's result, following moves. It looks for the
// result on a timer whose period starts at 250 µs and grows by half up to
// the Session's PollInterval, so a short command is seen done at once and
// a long wait costs no more reads than a plain poll. Once a second it runs
// Heal (so a command queued in a session that dies is moved, and with
// respawn the session is relaunched).
//
// It ends at once, without waiting out any grace, when the command cannot
// get a result without help (PROTOCOL.md section 18.6, the same rule and
// message in every master): with ErrSessionMissing when the directory of
// the session holding it is gone (deleted), and with ErrRunnerNotAlive
// when a dead session claimed it and the pool does not respawn. A command
// queued with no live session to move it to fails with ErrRunnerNotAlive
// once it has been stuck so for 10 s. The errors carry the context keys
// cmd_id, session and (runner_not_alive) reason.
func (p *Pool) WaitCommand(ctx context.Context, c *master.Command) (*protocol.Result, error) {
	lastHeal := time.Now() // Submit healed already: a wait that ends within a second needs no pass.
	// The first look at whether the command is stuck comes after
	// firstLook, so that a short command's wait costs no more reads
	// than before; then once a second, after the heal pass.
	checkAt := time.Now().Add(firstLook)
	var stuckSince time.Time
	d := 250 * time.Microsecond
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		if r, done, err := outcome(c); done {
			if errors.Is(err, master.ErrSessionMissing) {
				// Its session's directory is gone under the read (on
				// NFS: a stale handle): the pool's words for it.
				w, _ := p.Locate(c)
				return nil, p.goneErr(c, w.Session)
			}
			return r, err
		}
		if now := time.Now(); !now.Before(checkAt) {
			checkAt = now.Add(time.Second)
			if now.Sub(lastHeal) >= time.Second {
				lastHeal = now
				_, _ = p.Heal(ctx) // Errors show again on the next pass; the wait goes on.
			}
			why, final := p.stuck(c)
			if final != nil {
				if r, done, err := outcome(c); done { // Its result came meanwhile.
					return r, err
				}
				return nil, final
			}
			if why == "" {
				stuckSince = time.Time{}
			} else if stuckSince.IsZero() {
				stuckSince = time.Now()
			} else if time.Since(stuckSince) > poolDeadAfter {
				return nil, sessionio.WithContext(fmt.Errorf("%w: command %s: %s", master.ErrRunnerNotAlive, c.ID, why),
					map[string]any{"cmd_id": c.ID, "reason": why})
			}
		}
		select {
		case <-ctx.Done():
			return nil, sessionio.ContextEnd(ctx)
		case <-t.C:
		}
		poll := c.Session().PollInterval
		if poll <= 0 {
			poll = master.DefaultPollInterval
		}
		d = max(min(d+d/2, poll), 250*time.Microsecond)
		t.Reset(d)
	}
}

// outcome is what a wait returns once c has a result (done): the result,
// with a *master.ResultError when its status is not ok, as Command.Wait
// returns it. A result that cannot be read ends the wait too.
func outcome(c *master.Command) (*protocol.Result, bool, error) {
	r, err := c.Result()
	switch {
	case err != nil:
		return nil, true, err
	case r == nil:
		return nil, false, nil
	case r.Status != protocol.StatusOK:
		return r, true, &master.ResultError{Result: r}
	}
	return r, true, nil
}

// firstLook is when a pool wait first looks whether its command is stuck.
const firstLook = 50 * time.Millisecond

// GoneMessage and ClaimedDeadMessage are the texts every master's pool
// wait gives for a command whose session directory is gone and for one
// claimed by a dead session (PROTOCOL.md section 18.6); the conformance
// scenario pool_wait holds the Python and Tcl masters to the same words.
func GoneMessage(cmdID, session string) string {
	return fmt.Sprintf("command %s: session %s is gone (its directory was deleted); no result will come", cmdID, session)
}

// ClaimedDeadMessage: see GoneMessage.
func ClaimedDeadMessage(cmdID, session string) string {
	return fmt.Sprintf("command %s: claimed by %s, whose runner is gone; it gets its result (runner_restarted) when a runner starts on %s (master pool heal with respawn, or master launch)",
		cmdID, session, session)
}

// goneErr is the error of a wait for c, held by session, whose directory
// is gone.
func (p *Pool) goneErr(c *master.Command, session string) error {
	return sessionio.WithContext(fmt.Errorf("%w: %s", master.ErrSessionMissing, GoneMessage(c.ID, session)),
		map[string]any{"cmd_id": c.ID, "session": session, "dir": p.dirOf(session)})
}

// stuck says why c cannot get a result without help, or "" (a verdict
// that becomes final after 10 s); final is an error that ends the wait at
// once: the session holding c is gone, or a dead session claimed it and
// nothing will respawn it.
func (p *Pool) stuck(c *master.Command) (why string, final error) {
	w, _ := p.Locate(c)
	if !p.isSessionDir(w.Session) {
		return "", p.goneErr(c, w.Session)
	}
	ch, err := p.newChooser()
	if err != nil || !ch.has(w.Session) {
		return "", nil
	}
	here := ch.view(w.Session)
	switch {
	case !here.Dead:
		return "", nil
	case w.State == "claimed" && !p.cfg.Respawn:
		return "", sessionio.WithContext(fmt.Errorf("%w: %s", master.ErrRunnerNotAlive, ClaimedDeadMessage(c.ID, w.Session)),
			map[string]any{"cmd_id": c.ID, "session": w.Session, "reason": here.Why})
	case (w.State == "queued" || w.State == "moving") && !p.cfg.Respawn:
		for _, n := range ch.names {
			if ch.view(n).Alive {
				return "", nil
			}
		}
		return "no live session in the pool to move it to", nil
	}
	return "", nil
}

// FindCommand finds cmdID in the pool's sessions (where it was queued, or
// where it was moved to). Not found while sessions of the pool are missing
// (their directories deleted), it fails with ErrSessionMissing naming them.
func (p *Pool) FindCommand(cmdID string) (*master.Command, error) {
	for _, name := range p.SessionNames() {
		s, err := p.session(name)
		if err != nil {
			continue
		}
		if c, err := s.Command(cmdID); err == nil {
			return c, nil
		}
	}
	if gone := p.missingSessions(); len(gone) > 0 {
		// It may have been in a session whose directory was deleted: say
		// so (session_missing) rather than only that it is nowhere.
		list := strings.Join(gone, ", ")
		return nil, sessionio.WithContext(fmt.Errorf("%w: command %s is in none of the pool's sessions; session %s is gone (its directory was deleted): if it was there, no result will come",
			master.ErrSessionMissing, cmdID, list), map[string]any{"cmd_id": cmdID, "session": list})
	}
	return nil, fmt.Errorf("%w: no command %q in pool %s", os.ErrNotExist, cmdID, p.dir)
}

// SessionStatus is one line of pool status.
type SessionStatus struct {
	SessionView
	Launch           *launch.JobStatus `json:"launch,omitempty"`
	MovedOut         int               `json:"moved_out"`          // commands moved from this session to others
	MovedTo          map[string]int    `json:"moved_to,omitempty"` // by target session
	AwaitingRecovery int               `json:"awaiting_recovery"`  // claimed commands of a dead session
	Note             string            `json:"note,omitempty"`
	// Retired: stopped on purpose (launch.json has stopped_at: pool
	// shrink, adapt, pool stop, master stop), not crashed; Dead stays true.
	Retired bool `json:"retired,omitempty"`
	// Missing: the directory of a session the pool had is gone (deleted);
	// its row has only Name, Dead and Why.
	Missing bool `json:"missing,omitempty"`

	stoppedBy string
}

// Status reads every session and asks the scheduler about its job. It
// changes nothing (Heal does).
func (p *Pool) Status(ctx context.Context) ([]SessionStatus, error) {
	views, err := p.Views()
	if err != nil {
		return nil, err
	}
	out := make([]SessionStatus, len(views))
	var wg sync.WaitGroup
	for i, v := range views {
		out[i] = SessionStatus{SessionView: v}
		if v.s == nil {
			continue
		}
		wg.Add(1)
		go func(ps *SessionStatus) {
			defer wg.Done()
			ps.Launch = launch.Status(ctx, v.s)
			if li, err := launch.Read(v.s); err == nil && li.StoppedAt != nil {
				ps.Retired = true
				ps.stoppedBy = li.StoppedBy
			}
			fwds := commandNames(v.s, sessionio.DirForward)
			ps.MovedOut = len(fwds)
			for _, n := range fwds {
				if f, err := v.s.Core().ReadForward(n); err == nil {
					if ps.MovedTo == nil {
						ps.MovedTo = map[string]int{}
					}
					ps.MovedTo[filepath.Base(f.ToSession)]++
				}
			}
			ps.Note = p.note(ps)
		}(&out[i])
	}
	wg.Wait()
	for _, name := range p.missingSessions() {
		out = append(out, SessionStatus{SessionView: SessionView{Name: name, Dead: true, Why: "its directory is gone"}, Missing: true,
			Note: "missing: its directory is gone (deleted); commands it held get no result"})
	}
	slices.SortFunc(out, func(a, b SessionStatus) int { return sessionNumber(a.Name) - sessionNumber(b.Name) })
	return out, nil
}

// missingSessions names the sessions the pool had whose directories are
// gone: the gaps in the numbering below the highest session, and the
// numbers below pool.json's size. A deleted session numbered above all
// others and beyond the size cannot be told from one that never was.
func (p *Pool) missingSessions() []string {
	names := p.SessionNames()
	have := map[int]bool{}
	n, width := p.cfg.Size, 2
	for _, name := range names {
		i := sessionNumber(name)
		have[i] = true
		n = max(n, i+1)
		width = max(width, len(name)-len(poolNamePrefix))
	}
	var out []string
	for i := 0; i < n; i++ {
		if !have[i] {
			out = append(out, fmt.Sprintf("%s%0*d", poolNamePrefix, width, i))
		}
	}
	return out
}

func (p *Pool) note(ps *SessionStatus) string {
	var parts []string
	if ps.Retired && ps.Dead {
		parts = append(parts, "retired: stopped on purpose")
		if ps.stoppedBy != "" {
			parts[0] += " by " + ps.stoppedBy
		}
		parts[0] += "; " + ps.Why
		if ps.Queue > 0 {
			parts = append(parts, fmt.Sprintf("%d queued command(s) wait for master pool heal", ps.Queue))
		}
	} else if ps.Dead {
		parts = append(parts, "dead: "+ps.Why)
		if ps.Inflight > 0 {
			ps.AwaitingRecovery = ps.Inflight
			parts = append(parts, fmt.Sprintf("%d claimed command(s) get their result when a runner starts here", ps.Inflight))
		}
		if ps.Queue > 0 {
			parts = append(parts, fmt.Sprintf("%d queued command(s) wait for master pool heal", ps.Queue))
		}
	} else if !ps.Alive {
		parts = append(parts, ps.Why)
	}
	if ps.MovedOut > 0 {
		var to []string
		for _, name := range sortedKeys(ps.MovedTo) {
			to = append(to, fmt.Sprintf("%s:%d", name, ps.MovedTo[name]))
		}
		parts = append(parts, fmt.Sprintf("%d moved out (%s)", ps.MovedOut, strings.Join(to, " ")))
	}
	if ps.Launch != nil && ps.Launch.Launches > 1 {
		parts = append(parts, fmt.Sprintf("launch #%d", ps.Launch.Launches))
	}
	return strings.Join(parts, "; ")
}

func sortedKeys(m map[string]int) []string {
	return slices.Sorted(maps.Keys(m))
}

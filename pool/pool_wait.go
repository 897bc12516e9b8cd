package pool

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

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
// respawn the session is relaunched) and fails with ErrRunnerNotAlive when
// the command has been stuck for 10 s: claimed by a dead session that will
// not be respawned, or queued with no live session to move it to.
func (p *Pool) WaitCommand(ctx context.Context, c *master.Command) (*protocol.Result, error) {
	lastHeal := time.Now() // Submit healed already: a wait that ends within a second needs no pass.
	var stuckSince time.Time
	d := 250 * time.Microsecond
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		if r, done, err := c.Outcome(); done {
			return r, err
		}
		if time.Since(lastHeal) >= time.Second {
			lastHeal = time.Now()
			_, _ = p.Heal(ctx) // Errors show again on the next pass; the wait goes on.
			if why := p.stuck(c); why == "" {
				stuckSince = time.Time{}
			} else if stuckSince.IsZero() {
				stuckSince = time.Now()
			} else if time.Since(stuckSince) > poolDeadAfter {
				return nil, fmt.Errorf("%w: command %s: %s", master.ErrRunnerNotAlive, c.ID, why)
			}
		}
		select {
		case <-ctx.Done():
			return nil, master.ContextEndError(ctx)
		case <-t.C:
		}
		d = max(min(d+d/2, c.Session().PollInterval), 250*time.Microsecond)
		t.Reset(d)
	}
}

// stuck says why c cannot get a result without help, or "".
func (p *Pool) stuck(c *master.Command) string {
	w, _ := p.Locate(c)
	ch, err := p.newChooser()
	if err != nil || !ch.has(w.Session) {
		return ""
	}
	here := ch.view(w.Session)
	switch {
	case !here.Dead:
		return ""
	case w.State == "claimed" && !p.cfg.Respawn:
		return fmt.Sprintf("claimed by %s, whose runner is gone (%s); it gets its result (runner_restarted) when a runner starts on %s (master pool heal with respawn, or master launch)",
			w.Session, here.Why, w.Session)
	case (w.State == "queued" || w.State == "moving") && !p.cfg.Respawn:
		for _, n := range ch.names {
			if ch.view(n).Alive {
				return ""
			}
		}
		return "no live session in the pool to move it to"
	}
	return ""
}

// FindCommand finds cmdID in the pool's sessions (where it was queued, or
// where it was moved to).
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
	return nil, fmt.Errorf("%w: no command %q in pool %s", os.ErrNotExist, cmdID, p.dir)
}

// SessionStatus is one line of pool status.
type SessionStatus struct {
	SessionView
	Launch           *master.LaunchStatus `json:"launch,omitempty"`
	MovedOut         int                  `json:"moved_out"`          // commands moved from this session to others
	MovedTo          map[string]int       `json:"moved_to,omitempty"` // by target session
	AwaitingRecovery int                  `json:"awaiting_recovery"`  // claimed commands of a dead session
	Note             string               `json:"note,omitempty"`
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
			fwds := commandNames(v.s, master.DirForward)
			ps.MovedOut = len(fwds)
			for _, n := range fwds {
				if f, err := v.s.ReadForward(n); err == nil {
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
	return out, nil
}

func (p *Pool) note(ps *SessionStatus) string {
	var parts []string
	if ps.Dead {
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

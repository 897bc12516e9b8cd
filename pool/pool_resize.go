package pool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/internal/sessionio"
	"github.com/skillpilot/skillpilot/launch"
	"github.com/skillpilot/skillpilot/master"
)

// Members returns the sessions that make up the pool's size (those not
// stopped on purpose: launch.json without stopped_at) and the retired
// ones (stopped by Shrink, Stop or master stop), each in name order.
func (p *Pool) Members() (members, retired []string) {
	for _, name := range p.SessionNames() {
		s, err := p.session(name)
		var li *launch.Info
		if err == nil {
			li, err = launch.Read(s)
		}
		if err == nil && li.StoppedAt != nil {
			retired = append(retired, name)
		} else {
			members = append(members, name)
		}
	}
	return members, retired
}

// Grow adds k sessions to the pool and waits until they serve: retired
// sessions first (lowest names first: their directories, results and
// forwards are kept), then new ones numbered after the highest. Via a
// scheduler with job arrays the new sessions are one array.
func (p *Pool) Grow(ctx context.Context, k int, ready time.Duration) ([]SessionLaunch, error) {
	if k < 1 {
		return nil, sessionio.UsageError("--by must be at least 1")
	}
	unlock, err := p.lockResize(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	members, retired := p.Members()
	var names []string
	names = append(names, retired[:min(k, len(retired))]...)
	all := p.SessionNames()
	next, width := 0, 2
	for _, n := range all {
		next = max(next, sessionNumber(n)+1)
		width = max(width, len(n)-len(poolNamePrefix))
	}
	for len(names) < k {
		names = append(names, fmt.Sprintf("%s%0*d", poolNamePrefix, width, next))
		next++
	}
	sort.Slice(names, func(i, j int) bool { return sessionNumber(names[i]) < sessionNumber(names[j]) })
	if err := p.saveSize(len(members) + k); err != nil {
		return nil, err
	}
	out := p.launch(ctx, names, ready, p.Progress)
	var errs []error
	var grown []string
	for _, l := range out {
		switch {
		case l.Err == nil:
			grown = append(grown, l.Session)
		case errors.Is(l.Err, launch.ErrAlreadyLaunched):
			// Launched by someone else (pool start, master launch): this
			// grow did not add it, and says so.
			errs = append(errs, fmt.Errorf("%s: not grown by this call: %w", l.Session, l.Err))
		default:
			errs = append(errs, fmt.Errorf("%s: %w", l.Session, l.Err))
		}
	}
	p.event("grown", map[string]any{"sessions": grown})
	return out, errors.Join(errs...)
}

// Shrink retires sessions until to remain: dead ones first, then the
// least-loaded (queued plus claimed commands; ties to the highest name, so
// s00 stays). Each is stopped as Stop does (a graceful stop request by
// default: its running command finishes and gets its result there; then
// the scheduler's cancel of its own element), and its unclaimed commands
// are moved to the remaining sessions exactly once, as Heal moves those of
// a dead session (affinity keys pinned to it are pinned anew). It returns
// once the retired sessions' queues are empty or ctx ends. Retired
// sessions keep their directories (results, forwards); Grow relaunches
// them first.
func (p *Pool) Shrink(ctx context.Context, to int, opts launch.StopOptions) ([]SessionStop, HealReport, error) {
	return p.shrink(ctx, func(int) int { return to }, opts)
}

// ShrinkBy is Shrink to the number of members less by, counted under the
// pool's resize lock: two concurrent shrinks by 1 retire two sessions
// (master pool shrink --by).
func (p *Pool) ShrinkBy(ctx context.Context, by int, opts launch.StopOptions) ([]SessionStop, HealReport, error) {
	if by < 1 {
		return nil, HealReport{}, sessionio.UsageError("--by must be at least 1")
	}
	return p.shrink(ctx, func(members int) int { return members - by }, opts)
}

// shrink is Shrink to target(members), the number of members counted
// under the resize lock.
func (p *Pool) shrink(ctx context.Context, target func(members int) int, opts launch.StopOptions) ([]SessionStop, HealReport, error) {
	var rep HealReport
	if target(1<<30) < 1 { // Shrink's to, whatever the count.
		return nil, rep, sessionio.UsageError("a pool keeps at least one session (--to 1)")
	}
	unlock, err := p.lockResize(ctx)
	if err != nil {
		return nil, rep, err
	}
	defer unlock()
	members, _ := p.Members()
	to := target(len(members))
	if to < 1 {
		return nil, rep, sessionio.UsageError("a pool keeps at least one session: it has %d members", len(members))
	}
	if len(members) <= to {
		return nil, rep, nil
	}
	views, err := p.Views()
	if err != nil {
		return nil, rep, err
	}
	byName := map[string]SessionView{}
	for _, v := range views {
		byName[v.Name] = v
	}
	cand := append([]string(nil), members...)
	sort.SliceStable(cand, func(i, j int) bool {
		a, b := byName[cand[i]], byName[cand[j]]
		if a.Dead != b.Dead {
			return a.Dead
		}
		if a.Load() != b.Load() {
			return a.Load() < b.Load()
		}
		return cand[i] > cand[j]
	})
	retire := cand[:len(members)-to]
	sort.Strings(retire)
	if err := p.saveSize(to); err != nil {
		return nil, rep, err
	}
	p.event("shrinking", map[string]any{"retire": retire})
	stops, stopErr := p.stopSessions(ctx, retire, opts)
	var w shrinkWatch
	for {
		r, err := p.Heal(ctx)
		rep.Moved = append(rep.Moved, r.Moved...)
		rep.Respawned = append(rep.Respawned, r.Respawned...)
		left, where := 0, map[string]int{}
		var qerr error
		for _, name := range retire {
			if s, serr := p.session(name); serr == nil {
				q, err := s.QueueDepth()
				if err != nil {
					qerr = errors.Join(qerr, fmt.Errorf("%s: %w", name, err))
				}
				if n := q + len(commandNames(s, DirMoved)); n > 0 {
					left += n
					where[name] = n
				}
			}
		}
		if qerr != nil { // Whether commands are left is not known: they stay, a later heal moves them.
			return stops, rep, errors.Join(stopErr, err, qerr)
		}
		if left == 0 || ctx.Err() != nil {
			return stops, rep, errors.Join(stopErr, err, ctx.Err())
		}
		if gaveUp := w.check(p, retire, left, where); gaveUp != nil {
			p.event("shrink_stuck", map[string]any{"left": where, "why": gaveUp.Error()})
			return stops, rep, errors.Join(stopErr, err, gaveUp)
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond): // Queue files younger than minMoveAge wait a pass.
		}
	}
}

// Shrink gives up moving the retired sessions' commands (it
// retried for ever when the session it kept died) when no session outside
// the retired ones has been alive for shrinkNoTarget, or when the number
// of commands left has not gone down for shrinkNoProgress. The commands
// stay queued where they are; a later heal moves them.
var (
	shrinkNoTarget   = poolDeadAfter
	shrinkNoProgress = 2 * time.Minute
)

// shrinkWatch remembers, across Shrink's heal passes, since when no
// session could take the retired sessions' commands and since when their
// number last went down.
type shrinkWatch struct {
	noTarget, progress time.Time
	least              int
}

// check returns why Shrink should give up now, or nil.
func (w *shrinkWatch) check(p *Pool, retire []string, left int, where map[string]int) error {
	now := time.Now()
	if w.progress.IsZero() || left < w.least {
		w.progress, w.least = now, left
	}
	views, _ := p.Views()
	var kept []string
	alive := false
	for _, v := range views {
		if slices.Contains(retire, v.Name) {
			continue
		}
		state := "not alive"
		if v.Dead {
			state = "dead"
		}
		if v.Why != "" {
			state += ": " + v.Why
		}
		kept = append(kept, fmt.Sprintf("%s (%s)", v.Name, state))
		alive = alive || v.Alive
	}
	if alive {
		w.noTarget = time.Time{}
	} else if w.noTarget.IsZero() {
		w.noTarget = now
	}
	stays := fmt.Sprintf("%d commands stay queued in the retired sessions (%s)", left, leftText(where))
	switch {
	case !w.noTarget.IsZero() && now.Sub(w.noTarget) >= shrinkNoTarget:
		return fmt.Errorf("%w: no session of the pool can take them: %s; %s: master pool heal moves them once a session "+
			"serves (master pool grow, or respawn)", master.ErrRunnerNotAlive, strings.Join(kept, "; "), stays)
	case now.Sub(w.progress) >= shrinkNoProgress:
		return fmt.Errorf("master: pool shrink: no command moved for %v; %s: see master pool status", shrinkNoProgress, stays)
	}
	return nil
}

// leftText lists where commands are left: "s01: 3, s02: 1".
func leftText(where map[string]int) string {
	names := make([]string, 0, len(where))
	for n := range where {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s: %d", n, where[n])
	}
	return strings.Join(parts, ", ")
}

// saveSize rewrites pool.json with a new size.
func (p *Pool) saveSize(n int) error {
	p.mu.Lock()
	p.cfg.Size = n
	cfg := p.cfg
	p.mu.Unlock()
	b, _ := json.MarshalIndent(cfg, "", "  ")
	return p.writePoolFile(FilePool, append(b, '\n'), fsq.Durable)
}

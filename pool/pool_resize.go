package pool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/skillpilot/skillpilot/fsq"
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
		return nil, master.UsageError("--by must be at least 1")
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
			// grow did not add it, and says so (issue 34.9).
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
	var rep HealReport
	if to < 1 {
		return nil, rep, master.UsageError("a pool keeps at least one session (--to 1)")
	}
	unlock, err := p.lockResize(ctx)
	if err != nil {
		return nil, rep, err
	}
	defer unlock()
	members, _ := p.Members()
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
	for {
		r, err := p.Heal(ctx)
		rep.Moved = append(rep.Moved, r.Moved...)
		rep.Respawned = append(rep.Respawned, r.Respawned...)
		left := 0
		for _, name := range retire {
			if s, serr := p.session(name); serr == nil {
				left += s.QueueDepth() + len(commandNames(s, DirMoved))
			}
		}
		if left == 0 || ctx.Err() != nil {
			return stops, rep, errors.Join(stopErr, err, ctx.Err())
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond): // Queue files younger than minMoveAge wait a pass.
		}
	}
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

package pool

import (
	"context"
	"time"

	"github.com/skillpilot/skillpilot/launch"
)

// AdaptOptions bound and pace an [Adapter].
type AdaptOptions struct {
	Min, Max int           // the pool's size stays within [Min, Max] (Max 0: Min)
	Idle     time.Duration // a session idle (no queued or claimed command) this long may be retired (0: 60 s)
	Ready    time.Duration // how long a grow waits for new sessions to serve (0: as long as their jobs live)
	Stop     launch.StopOptions
}

// AdaptReport says what one Adapter step did.
type AdaptReport struct {
	Heal    HealReport `json:"heal"`
	Members int        `json:"members"` // before the step
	Waiting int        `json:"waiting"` // queued commands of serving sessions
	Grown   []string   `json:"grown,omitempty"`
	// Balanced lists the queued commands moved from long queues to grown
	// or idle sessions ([Pool.Balance]).
	Balanced []Move   `json:"balanced,omitempty"`
	Retired  []string `json:"retired,omitempty"`
}

// Adapter grows the pool while commands wait and shrinks it when sessions
// sit idle, within bounds, as dask-jobqueue's adapt does for workers: a
// farm pays for slots and licences only while there is work. Each Step is
// one heal pass and one decision:
//   - fewer members than Min: grow to Min;
//   - commands waiting (queued, not claimed, in serving sessions) and fewer
//     than Max members: grow by the number waiting, up to Max;
//   - nothing waiting: retire (Shrink) the sessions idle for Idle or more,
//     down to Min.
//
// While commands wait, each step (after a grow, once the new sessions
// serve) also balances the backlog: queued, unclaimed commands move from
// the longest queues to the least-loaded serving sessions ([Pool.Balance],
// exactly once, by the claim rules of Heal's moves), so that sessions
// grown for a backlog submitted at once run part of it.
//
// An Adapter remembers since when each session is idle; run one per pool
// (several would each act on what they see). Not safe for concurrent use.
type Adapter struct {
	p         *Pool
	opts      AdaptOptions
	idleSince map[string]time.Time
}

// NewAdapter returns an Adapter of p.
func NewAdapter(p *Pool, opts AdaptOptions) *Adapter {
	if opts.Max < opts.Min {
		opts.Max = opts.Min
	}
	if opts.Idle <= 0 {
		opts.Idle = time.Minute
	}
	return &Adapter{p: p, opts: opts, idleSince: map[string]time.Time{}}
}

// Step heals the pool once and grows or shrinks it once.
func (a *Adapter) Step(ctx context.Context) (AdaptReport, error) {
	var rep AdaptReport
	h, err := a.p.Heal(ctx)
	rep.Heal = h
	if err != nil {
		return rep, err
	}
	members, _ := a.p.Members()
	rep.Members = len(members)
	views, err := a.p.Views()
	if err != nil {
		return rep, err
	}
	isMember := map[string]bool{}
	for _, m := range members {
		isMember[m] = true
	}
	now := time.Now()
	var idle []string
	for _, v := range views {
		if !isMember[v.Name] {
			delete(a.idleSince, v.Name)
			continue
		}
		if v.Serving() {
			rep.Waiting += v.Queue
		}
		if !v.Serving() || v.Load() > 0 {
			delete(a.idleSince, v.Name)
			continue
		}
		if _, ok := a.idleSince[v.Name]; !ok {
			a.idleSince[v.Name] = now
		}
		if now.Sub(a.idleSince[v.Name]) >= a.opts.Idle {
			idle = append(idle, v.Name)
		}
	}
	grow := 0
	switch {
	case len(members) < a.opts.Min:
		grow = a.opts.Min - len(members)
	case rep.Waiting > 0 && len(members) < a.opts.Max:
		grow = min(rep.Waiting, a.opts.Max-len(members))
	}
	if grow > 0 {
		res, err := a.p.Grow(ctx, grow, a.opts.Ready)
		for _, r := range res {
			rep.Grown = append(rep.Grown, r.Session)
		}
		if err != nil {
			return rep, err
		}
	}
	if rep.Waiting > 0 {
		moved, err := a.p.Balance(ctx)
		rep.Balanced = moved
		return rep, err
	}
	if rep.Waiting == 0 && len(idle) > 0 && len(members) > a.opts.Min {
		to := max(a.opts.Min, len(members)-len(idle))
		stops, _, err := a.p.Shrink(ctx, to, a.opts.Stop)
		for _, s := range stops {
			rep.Retired = append(rep.Retired, s.Session)
			delete(a.idleSince, s.Session)
		}
		return rep, err
	}
	return rep, nil
}

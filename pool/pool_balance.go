package pool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
)

// Balance moves queued, unclaimed commands from the longest queues of the
// pool's serving sessions to the least-loaded serving sessions (a session
// just grown, or one gone idle) until no serving session's load (queued
// plus claimed commands) exceeds another's by more than one, or nothing
// more can move. Each move follows the rules of Heal's (PROTOCOL.md 18.4
// and 18.5, "Balancing"): the command is claimed by renaming queue/F into
// moved/F, so a runner's claim (the rename of queue/F into inflight/) and
// the move's cannot both succeed, and it is re-queued exactly once with a
// forward record. Commands are taken from the end of a queue (the highest
// seq: those that would wait longest), never one younger than 2 s on the
// filesystem's clock (a non-atomic writer may be writing it) and never
// one with an affinity key (its key keeps it with related commands).
// Balance is safe to run from many processes; a claim lost to the runner
// or another mover is not an error.
func (p *Pool) Balance(ctx context.Context) ([]Move, error) {
	now, err := p.fsNow()
	if err != nil {
		return nil, err
	}
	members, _ := p.Members()
	var views []SessionView
	for _, name := range members {
		views = append(views, p.view(name, now))
	}
	var serving []int // indexes into views
	for i, v := range views {
		if v.Serving() && v.s != nil {
			serving = append(serving, i)
		}
	}
	if len(serving) < 2 {
		return nil, nil
	}
	queues := map[string][]string{} // per session, its queue listed once this pass, highest seq first
	var moved []Move
	var errs []error
	for ctx.Err() == nil {
		src, dst := serving[0], serving[0]
		for _, i := range serving {
			if views[i].Queue > 0 && (views[src].Queue == 0 || views[i].Load() > views[src].Load()) {
				src = i
			}
			if views[i].Load() < views[dst].Load() || (views[i].Load() == views[dst].Load() && views[i].Name < views[dst].Name) {
				dst = i
			}
		}
		if views[src].Queue == 0 || views[src].Load()-views[dst].Load() <= 1 {
			break
		}
		name := p.balanceCandidate(views[src], now, queues)
		if name == "" {
			views[src].Queue = 0 // Nothing movable left there this pass.
			continue
		}
		m, err := p.balanceMove(views, views[src], name, views[dst])
		views[src].Queue-- // Moved, or claimed by its runner meanwhile: either way no longer waiting there.
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if m != nil {
			views[dst].Queue++
			moved = append(moved, *m)
		}
	}
	return moved, errors.Join(errs...)
}

// balanceCandidate returns the next queued command of v, highest seq
// first, that may be balanced (a plain file at least minMoveAge old by the
// filesystem's clock now, without an affinity key), or "". queues holds
// what is left of each session's listing (one listing per pass).
func (p *Pool) balanceCandidate(v SessionView, now time.Time, queues map[string][]string) string {
	names, listed := queues[v.Name]
	if !listed {
		names = commandNames(v.s, protocol.DirQueue)
		slices.Reverse(names) // commandNames sorts by seq.
	}
	defer func() { queues[v.Name] = names }()
	for len(names) > 0 {
		n := names[0]
		names = names[1:]
		q := protocol.DirQueue + "/" + n
		fi, err := lstat(v.s, q)
		if err != nil || !fi.Mode().IsRegular() || now.Sub(fi.ModTime()) < minMoveAge {
			continue
		}
		raw, err := readSessionFile(v.s, q, maxPoolCommand)
		if err != nil {
			continue // Claimed meanwhile, or not for us to judge: left where it is.
		}
		var body struct {
			Affinity string `json:"affinity"`
		}
		if json.Unmarshal(raw, &body) == nil && body.Affinity != "" {
			continue
		}
		return n
	}
	return ""
}

// balanceMove moves queue/<name> of the serving session from to the
// serving session to: the claim (queue/ into moved/; losing it to the
// runner or another mover gives nil, nil), then Heal's stage, record and
// publish. A crash after the claim leaves moved/<name>, which the next
// heal pass finishes (into a session it chooses).
func (p *Pool) balanceMove(views []SessionView, from SessionView, name string, to SessionView) (*Move, error) {
	if err := mkdirSession(from.s, DirMoved); err != nil {
		return nil, err
	}
	ok, err := claim(from.s, protocol.DirQueue+"/"+name, DirMoved+"/"+name)
	if err != nil || !ok {
		return nil, err
	}
	reason := fmt.Sprintf("balanced: %s had %d queued, %s %d", from.Name, from.Queue, to.Name, to.Load())
	return p.finishMoveTo(views, from, name, &to, reason)
}

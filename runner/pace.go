package runner

import "time"

// Polling only (a network filesystem), every poll tick is meant to list
// queue/: a tick is when a command written since the last one is seen. A
// tick that finds no listing started (the last one ended less than 9× its
// duration ago, scan.go; or one is still in flight, which may have begun
// before the command was written) would be lost until the next tick, and
// right after activity the ticks are 10 ms apart, about 9× a listing on
// NFS: half of them were lost (docs/benchmarks-log.md, "NFS: adaptive polling").
// Such a tick is owed instead: the listing starts as soon as the rule
// allows it (nextWake, onTimer), at most one per tick.

// pollTick starts a poll tick's listing of queue/ if one is due (maybeScan),
// or owes it.
func (q *cmdQueue) pollTick(inotify bool) {
	was := q.scan.inFlight
	q.maybeScan(inotify)
	q.oweScan(inotify, was)
}

// oweScan records, after a poll tick's maybeScan, whether the tick's
// listing is owed: wasInFlight says whether one was in flight before it.
func (q *cmdQueue) oweScan(inotify, wasInFlight bool) {
	if inotify {
		return
	}
	if wasInFlight || !q.scan.inFlight {
		q.scanOwed = true
	}
}

// owedScanIn returns how long until an owed listing may start (0: now),
// and false when none is owed or one is in flight (its result comes first).
func (q *cmdQueue) owedScanIn() (time.Duration, bool) {
	if !q.scanOwed || q.scan.inFlight {
		return 0, false
	}
	return max(q.scan.lastEnd.Add(9*q.scan.lastTook).Sub(q.scan.clk.Now()), 0), true
}

// payOwedScan starts an owed listing if it may start now.
func (q *cmdQueue) payOwedScan(inotify bool) {
	if d, ok := q.owedScanIn(); ok && d == 0 {
		q.maybeScan(inotify)
		if q.scan.inFlight {
			q.scanOwed = false
		}
	}
}

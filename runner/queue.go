package runner

import (
	"container/heap"
	"log/slog"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
)

// cmdQueue is the runner's part that reads queue/: the scanner that lists
// it, the pending names in running order, the cmd_ids that have a result
// and the names whose result is still being written, and the counts of
// files skipped, rejected and discarded. It is owned by the Run goroutine.
type cmdQueue struct {
	root       *sessionRoot
	log        *slog.Logger
	scan       *scanner
	pend       *pending
	more       bool                    // nextCommand stopped early; the loop comes back at once
	done       map[string]string       // cmd_ids that have a result: the name of its result file
	settling   map[string]bool         // names handed to results and not yet done
	openBegins map[beginKey]*openBegin // commands whose begin event has no end (recover.go)
	skipped    int64                   // names cleared because they already had a result
	rejected   int64                   // files answered as invalid
	discards   int64                   // entries moved into tmp/ to be deleted
	scanOwed   bool                    // polling only: a tick's listing is still to start (pace.go)
}

// add records a name listed in queue/ (seq, and the naming rule it
// breaks, "" for a good name); it reports false if it is already pending.
func (q *cmdQueue) add(name string, seq int64, misnamed string) bool {
	return q.pend.add(name, seq, misnamed)
}

// next takes the pending entry to run next in (seq, name) order, or nil.
func (q *cmdQueue) next() *pendingEntry { return q.pend.pop() }

// retryAt parks e, a file that could not be read yet, until at.
func (q *cmdQueue) retryAt(e *pendingEntry, at time.Time) { q.pend.deferUntil(e, at) }

// withdraw forgets a pending name (a cancelled queued command).
func (q *cmdQueue) withdraw(name string) { q.pend.remove(name) }

// promote makes the parked entries that are due at now ready, and returns
// the earliest retry time still ahead (zero if none).
func (q *cmdQueue) promote(now time.Time) time.Time { return q.pend.promote(now) }

// depth returns the number of pending names (state.json's queue_depth).
func (q *cmdQueue) depth() int { return q.pend.len() }

// setMore says whether nextCommand stopped early with commands left, so
// that the loop comes back at once (moreQueued).
func (q *cmdQueue) setMore(more bool) { q.more = more }

// moreQueued reports whether nextCommand stopped early (setMore).
func (q *cmdQueue) moreQueued() bool { return q.more }

// resultName returns the name of the result file of cmd_id id, "" if it
// has none (on disk or on its way there).
func (q *cmdQueue) resultName(id string) string { return q.done[id] }

// noteResult records that cmd_id id has a result, under name.
func (q *cmdQueue) noteResult(id, name string) { q.done[id] = name }

// settle notes that name's result was handed to the result writer.
func (q *cmdQueue) settle(name string) { q.settling[name] = true }

// settled notes that the result writer is done with name's result.
func (q *cmdQueue) settled(name string) { delete(q.settling, name) }

// isSettling reports whether name's result is still being written.
func (q *cmdQueue) isSettling(name string) bool { return q.settling[name] }

// anySettling reports whether any result is still being written.
func (q *cmdQueue) anySettling() bool { return len(q.settling) > 0 }

// countSkipped counts a name cleared because it already had a result.
func (q *cmdQueue) countSkipped() { q.skipped++ }

// countRejected counts a file answered as invalid.
func (q *cmdQueue) countRejected() { q.rejected++ }

// skippedCount returns the names cleared because they had a result.
func (q *cmdQueue) skippedCount() int64 { return q.skipped }

// rejectedCount returns the files answered as invalid.
func (q *cmdQueue) rejectedCount() int64 { return q.rejected }

// readOpenBegins notes the commands whose cmd_begin in the event log has
// no cmd_end (a dead runner's: recover.go).
func (q *cmdQueue) readOpenBegins() {
	q.openBegins = unendedBegins(q.root, protocol.FileMeta)
}

// openBeginsExcept returns the open begins (readOpenBegins) not in skip,
// in no particular order.
func (q *cmdQueue) openBeginsExcept(skip map[beginKey]bool) []beginKey {
	keys := make([]beginKey, 0, len(q.openBegins))
	for k := range q.openBegins {
		if !skip[k] {
			keys = append(keys, k)
		}
	}
	return keys
}

// openBegin returns what the log says of key's open begin, or nil.
func (q *cmdQueue) openBegin(key beginKey) *openBegin { return q.openBegins[key] }

// endBegin notes that the cmd_end of key is written; it reports whether
// key was open.
func (q *cmdQueue) endBegin(key beginKey) bool {
	if q.openBegins[key] == nil {
		return false
	}
	delete(q.openBegins, key)
	return true
}

// startScan starts the goroutine that lists dir (queue/) with list, and
// asks it for a first listing.
func (q *cmdQueue) startScan(dir string, list func(string) ([]string, error), clk clock) {
	q.scan = newScanner(dir, list, clk)
	q.scan.start()
}

// stopScan ends the listing goroutine (startScan).
func (q *cmdQueue) stopScan() { q.scan.close() }

// scanResults delivers the listings startScan's goroutine makes.
func (q *cmdQueue) scanResults() <-chan scanResult { return q.scan.results }

// scanLost notes that inotify lost events, which makes a listing due.
func (q *cmdQueue) scanLost(inotify bool) {
	q.scan.lost = true
	q.maybeScan(inotify)
}

// listed reports whether a full listing of queue/ completed since the
// start: nothing starts before (nextCommand).
func (q *cmdQueue) listed() bool { return q.scan.listed }

// pendingEntry is a command file name seen in queue/ and not yet handled.
type pendingEntry struct {
	name     string
	seq      int64
	misnamed string // the naming rule the name breaks ("" for a good name)
	// A file that did not parse is retried until it has been unchanged for
	// the grace period (a writer may still be writing it).
	firstBad time.Time
	lastSize int64
	lastMod  time.Time
	retryAt  time.Time
}

// pending orders command names by (seq, name). Adding a name is O(log n),
// taking the next one is O(log n); nothing here touches the disk, so a
// backlog of 100,000 files costs a listing once, not per command.
type pending struct {
	ready    entryHeap
	deferred map[string]*pendingEntry // waiting for retryAt
	known    map[string]bool          // in ready or deferred
}

func newPending() *pending {
	return &pending{deferred: map[string]*pendingEntry{}, known: map[string]bool{}}
}

// add records name; it reports false if it is already known.
func (p *pending) add(name string, seq int64, misnamed string) bool {
	if p.known[name] {
		return false
	}
	p.known[name] = true
	heap.Push(&p.ready, &pendingEntry{name: name, seq: seq, misnamed: misnamed})
	return true
}

// pop takes the lowest ready entry, or nil.
func (p *pending) pop() *pendingEntry {
	if len(p.ready) == 0 {
		return nil
	}
	e := heap.Pop(&p.ready).(*pendingEntry)
	delete(p.known, e.name)
	return e
}

// deferUntil parks e until at.
func (p *pending) deferUntil(e *pendingEntry, at time.Time) {
	e.retryAt = at
	p.known[e.name] = true
	p.deferred[e.name] = e
}

// promote moves deferred entries that are due back to ready, and returns
// the earliest retry time still ahead (zero if none).
func (p *pending) promote(now time.Time) time.Time {
	var next time.Time
	for name, e := range p.deferred {
		if !now.Before(e.retryAt) {
			delete(p.deferred, name)
			heap.Push(&p.ready, e)
			continue
		}
		if next.IsZero() || e.retryAt.Before(next) {
			next = e.retryAt
		}
	}
	return next
}

// remove removes an entry by name (used to cancel a queued command); it
// reports whether one was there.
func (p *pending) remove(name string) bool {
	if !p.known[name] {
		return false
	}
	delete(p.known, name)
	if _, ok := p.deferred[name]; ok {
		delete(p.deferred, name)
		return true
	}
	for i, e := range p.ready {
		if e.name == name {
			heap.Remove(&p.ready, i)
			return true
		}
	}
	return true
}

func (p *pending) len() int { return len(p.ready) + len(p.deferred) }

type entryHeap []*pendingEntry

func (h entryHeap) Len() int { return len(h) }
func (h entryHeap) Less(i, j int) bool {
	if h[i].seq != h[j].seq {
		return h[i].seq < h[j].seq
	}
	return h[i].name < h[j].name
}
func (h entryHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *entryHeap) Push(x any)   { *h = append(*h, x.(*pendingEntry)) }
func (h *entryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}

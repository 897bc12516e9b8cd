package runner

import (
	"container/heap"
	"log/slog"
	"time"

	"github.com/skillpilot/skillpilot/fsq"
)

// cmdQueue is the runner's part that reads queue/: the scanner that lists
// it, the pending names in running order, the cmd_ids that have a result
// and the names whose result is still being written, and the counts of
// files skipped, rejected and discarded. It is owned by the Run goroutine.
type cmdQueue struct {
	root     *fsq.Root
	log      *slog.Logger
	scan     *scanner
	list     func(dir string) ([]string, error) // lists queue/ (the scanner's, and a cancel's)
	dir      string                             // queue/'s path, for list
	pend     *pending
	more     bool              // nextCommand stopped early; the loop comes back at once
	done     map[string]string // cmd_ids that have a result: the name of its result file
	pruned   prunedIndex       // cmd_ids whose result retention removed (retain.go)
	settling map[string]bool   // names handed to results and not yet done
	// handOver holds result jobs the writer's queue had no room for, in
	// order: the loop hands them over as it takes them, so the owner never
	// waits on the writer (nor handles its completions inside a submit).
	handOver   []resultJob
	openBegins map[beginKey]*openBegin // commands whose begin event has no end (recover.go)
	skipped    int64                   // names cleared because they already had a result
	rejected   int64                   // files answered as invalid
	discards   int64                   // entries moved into tmp/ to be deleted
	scanOwed   bool                    // polling only: a tick's listing is still to start (pace.go)
	notBegun   map[string]int          // names put back because the tool died before they began (rerun)
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
	q.list, q.dir = list, dir
	q.scan = newScanner(dir, list, clk)
	q.scan.start()
}

// scanLost notes that inotify lost events, which makes a listing due.
func (q *cmdQueue) scanLost(inotify bool) {
	q.scan.lost = true
	q.maybeScan(inotify)
}

// pendingEntry is a command file name seen in queue/ and not yet handled.
type pendingEntry struct {
	name     string
	seq      int64
	misnamed string // the naming rule the name breaks ("" for a good name)
	// A file that did not parse (or could not be read) is retried until it
	// has been unchanged for the grace period (a writer may still be
	// writing it): seen.at is when it was first found so.
	seen    fileSeen
	retryAt time.Time
	// holds: the entry was parked because it may still become a valid
	// command (not yet valid JSON, or a transient read error, within
	// --parse-grace): nothing that sorts after it starts meanwhile.
	holds bool
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

// pop takes the lowest ready entry, or nil: nil too when a parked entry
// that holds (a file still being written) sorts before it, so that a
// command never overtakes one written before it (PROTOCOL.md 6.1).
func (p *pending) pop() *pendingEntry {
	if len(p.ready) == 0 {
		return nil
	}
	if h := p.holding(); h != nil && entryLess(h, p.ready[0]) {
		return nil
	}
	e := heap.Pop(&p.ready).(*pendingEntry)
	delete(p.known, e.name)
	return e
}

// holding returns the lowest parked entry that holds, or nil. Parked
// entries are few (files caught half-written, or unreadable for a
// moment), so a scan is cheap.
func (p *pending) holding() *pendingEntry {
	var low *pendingEntry
	for _, e := range p.deferred {
		if e.holds && (low == nil || entryLess(e, low)) {
			low = e
		}
	}
	return low
}

// deferUntil parks e until at; with holds, nothing that sorts after it
// is taken meanwhile (pop).
func (p *pending) deferUntil(e *pendingEntry, at time.Time, holds bool) {
	e.retryAt, e.holds = at, holds
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

// len is how many commands are pending (state.json's queue_depth).
func (p *pending) len() int { return len(p.ready) + len(p.deferred) }

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

type entryHeap []*pendingEntry

func (h entryHeap) Len() int           { return len(h) }
func (h entryHeap) Less(i, j int) bool { return entryLess(h[i], h[j]) }

// entryLess is the queue's order: by seq, then by name.
func entryLess(a, b *pendingEntry) bool {
	if a.seq != b.seq {
		return a.seq < b.seq
	}
	return a.name < b.name
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

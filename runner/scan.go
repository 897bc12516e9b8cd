package runner

import (
	"time"

	"github.com/skillpilot/skillpilot/protocol"
)

// Listing queue/ costs time proportional to its size (≈190 ms for 100,000
// names here), so the owner goroutine never lists it itself: a scanner
// goroutine does, and hands back the command names. How often:
//
//   - with inotify working, names arrive one by one as events; a full
//     listing is a safety net, run when the queue looks empty (cheap then),
//     after inotify reported lost events, and every safetyScan regardless;
//   - polling only (network filesystems), on every poll tick;
//
// and in both cases no sooner than 9× the last listing's duration after it,
// so listings take at most a tenth of the runner's time whatever the
// backlog.
const safetyScan = 30 * time.Second

type scanResult struct {
	names []nameSeq
	took  time.Duration
	err   error
}

type nameSeq struct {
	name string
	seq  int64
	rule string // the naming rule it breaks, if any
}

// scanner lists queue/ on request.
type scanner struct {
	dir      string
	clk      clock // the runner's: listings are timed and paced on it
	req      chan struct{}
	results  chan scanResult
	done     chan struct{} // closed when the goroutine has returned
	inFlight bool
	lastEnd  time.Time
	lastTook time.Duration
	lastFull time.Time
	lost     bool // inotify lost events since the last listing
	listed   bool // a full listing completed since the start
}

func newScanner(dir string, list func(string) ([]string, error), clk clock) *scanner {
	// At most one listing is in flight, so the send on results (capacity
	// one) never blocks, whether or not the owner still reads.
	s := &scanner{dir: dir, clk: clk, req: make(chan struct{}), results: make(chan scanResult, 1), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for range s.req {
			t0 := clk.Now()
			names, err := list(dir)
			out := queueNames(names)
			if err == nil && len(out) > 0 {
				// A second listing, for seq order against a writer that
				// raced with the first (order.go).
				if again, err2 := list(dir); err2 == nil {
					out, _ = settled(out, queueNames(again), nameSeq.key)
				}
			}
			s.results <- scanResult{names: out, took: clk.Now().Sub(t0), err: err}
		}
	}()
	return s
}

// queueNames keeps the command names of a listing of queue/.
func queueNames(names []string) []nameSeq {
	var out []nameSeq
	for _, n := range names {
		if seq, rule, ok := protocol.CheckQueueName(n); ok {
			out = append(out, nameSeq{n, seq, rule})
		}
	}
	return out
}

func (n nameSeq) key() seqKey { return seqKey{n.seq, n.name} }

// close ends the goroutine and waits for it.
func (s *scanner) close() {
	close(s.req)
	<-s.done
}

// due reports whether a listing should start now.
func (s *scanner) due(now time.Time, inotify, queueEmpty bool) bool {
	if s.inFlight || now.Sub(s.lastEnd) < 9*s.lastTook {
		return false
	}
	return !inotify || s.lost || queueEmpty || now.Sub(s.lastFull) >= safetyScan
}

// start asks the goroutine for a listing.
func (s *scanner) start() {
	s.inFlight, s.lost = true, false
	s.req <- struct{}{}
}

// onScan adds a listing's names to the pending set.
func (r *Runner) onScan(res scanResult) {
	if err := r.queue.scanned(res); err != nil {
		r.log.Warn("list queue", "err", err)
		return
	}
	for _, ns := range res.names {
		if r.cur != nil && r.cur.name == ns.name {
			continue
		}
		if r.queue.pend.add(ns.name, ns.seq, ns.rule) {
			r.noteQueued(ns.name, ns.seq, ns.rule)
		}
	}
}

// noteQueued records a name newly pending in queue/: status changes, and
// a well-named command file gets its cmd_queued event (PROTOCOL.md section
// 22): the runner learns of a command when it lists queue/ or inotify
// names it, once per file. A misnamed one gets its cmd_rejected instead.
func (r *Runner) noteQueued(name string, seq int64, rule string) {
	r.status.dirty = true
	if rule != "" {
		return
	}
	if _, id, err := protocol.ParseCommandName(name); err == nil {
		r.event(protocol.Event{Event: protocol.EvCmdQueued, CmdID: id, Seq: seq,
			Detail: map[string]any{"file": rel(protocol.DirQueue, name)}})
	}
}

// scanned records the end of a listing and returns its error; without
// one, the listing was full (listed).
func (q *cmdQueue) scanned(res scanResult) error {
	s := q.scan
	now := s.clk.Now()
	s.inFlight, s.lastEnd, s.lastTook, s.lastFull = false, now, res.took, now
	if res.err != nil {
		return res.err
	}
	s.listed = true
	return nil
}

// maybeScan starts a listing if one is due (inotify: the watcher gets
// inotify events for queue/).
func (q *cmdQueue) maybeScan(inotify bool) {
	if q.scan.due(q.scan.clk.Now(), inotify, q.pend.len() == 0) {
		q.scan.start()
	}
}

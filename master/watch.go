package master

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
)

// watchHub is the one watcher a Session shares among all its waits: one
// inotify instance (where inotify works) for every directory any wait
// watches, plus a poll tick that rings every waiter (the safety net, and
// the only mechanism on network filesystems, where inotify never sees
// another host's changes). A wait costs a map entry, not an inotify
// instance: the kernel allows few per user (max_user_instances, 128 by
// default), and setting one up costs milliseconds.
type watchHub struct {
	mu    sync.Mutex // guards subs and added
	subs  map[string]map[chan struct{}]struct{}
	added map[string]bool
	fw    *fsnotify.Watcher // nil: polling only
	mode  watchMode
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
	// closeErr is why closing fw failed; written by run before done is
	// closed, read after.
	closeErr error
}

// watchMode says how a Session's waits learn about changes.
type watchMode struct {
	Inotify bool          // inotify (plus a poll tick as a safety net); false: polling only
	Poll    time.Duration // the poll period
	// Degraded says why inotify is not used although the filesystem is
	// local (e.g. the user's inotify instances are exhausted), "" when it
	// is used or the filesystem is a network one.
	Degraded string
}

// WatchDegraded starts the Session's shared watcher if needed and says
// why its waits poll although the filesystem is local (the user's inotify
// instances are exhausted, say), or "": the master CLI says so on stderr.
func (s *Session) WatchDegraded() string { return s.watching().Degraded }

// watching starts the Session's shared watcher if needed and reports how
// waits learn about changes.
func (s *Session) watching() watchMode {
	return s.hub().mode
}

// hub returns the Session's watcher, starting it on first use.
func (s *Session) hub() *watchHub {
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	if s.wh != nil {
		return s.wh
	}
	h := &watchHub{subs: map[string]map[chan struct{}]struct{}{}, added: map[string]bool{},
		stop: make(chan struct{}), done: make(chan struct{})}
	h.mode.Poll = s.pollInterval()
	if !s.io.OnNetworkFS() {
		fw, err := fsnotify.NewBufferedWatcher(1024)
		if err != nil {
			h.mode.Degraded = fmt.Sprintf("inotify unavailable (%v): waits poll every %v", err, h.mode.Poll)
		} else {
			h.fw, h.mode.Inotify = fw, true
		}
	}
	go h.run()
	s.wh = h
	// A Session dropped without Close does not keep its watcher alive: the
	// hub's goroutine holds the hub, never the Session.
	runtime.AddCleanup(s, func(h *watchHub) { h.close() }, h)
	return h
}

func (h *watchHub) run() {
	defer close(h.done)
	t := time.NewTicker(h.mode.Poll)
	defer t.Stop()
	var events chan fsnotify.Event
	var errs chan error
	if h.fw != nil {
		defer func() {
			if err := h.fw.Close(); err != nil {
				h.closeErr = fmt.Errorf("close the session's inotify watcher: %w", err)
			}
		}()
		events, errs = h.fw.Events, h.fw.Errors
	}
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
			h.ring("")
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			h.ring(filepath.Dir(ev.Name))
		case _, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			h.ring("") // Events may have been lost (overflow): everyone looks again.
		}
	}
}

// ring wakes the waiters of dir ("" for all). A waiter's bell holds one
// ring; more before it looks are one.
func (h *watchHub) ring(dir string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for d, set := range h.subs {
		if dir != "" && d != dir {
			continue
		}
		for ch := range set {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

// subscribe returns a bell for changes in dir and its cancel.
func (h *watchHub) subscribe(dir string) (chan struct{}, func()) {
	bell := make(chan struct{}, 1)
	h.mu.Lock()
	if h.subs[dir] == nil {
		h.subs[dir] = map[chan struct{}]struct{}{}
	}
	h.subs[dir][bell] = struct{}{}
	if h.fw != nil && !h.added[dir] {
		// A failure (the directory is missing, or the user's inotify
		// watches are exhausted) leaves this directory to the poll tick.
		if err := h.fw.Add(dir); err == nil {
			h.added[dir] = true
		}
	}
	h.mu.Unlock()
	return bell, func() {
		h.mu.Lock()
		delete(h.subs[dir], bell)
		h.mu.Unlock()
	}
}

// close stops the hub; waits still subscribed are no longer rung. It is
// idempotent.
func (h *watchHub) close() error {
	h.once.Do(func() {
		close(h.stop)
		<-h.done
	})
	return h.closeErr
}

// watch returns a doorbell that rings when something changes in the
// session's directory rel and at least every PollInterval, and the
// function that stops it. Callers check their file after calling watch, so
// that a change between the check and the watch is not missed.
//
// For its first QuickPoll the doorbell rings on a timer whose period
// starts at 100 µs and grows by an eighth each time (about an eighth of
// the time waited so far, so a result is noticed within ~12% of the time
// it took: a round trip of 1.5 ms is seen within about 0.2 ms, where gaps
// growing by half from 250 µs saw it up to 0.5 ms late; some twenty looks
// in the first 10 ms, each an open that fails); only a wait that lasts
// longer joins the Session's shared watcher (see watchHub). A process that
// waits once and exits (the CLI) thereby never pays for an inotify
// instance: setting one up costs about a millisecond, and tearing it down
// at exit blocks the process for several (the kernel waits for an RCU
// grace period).
//
// On a network filesystem, where polling is the only way to see another
// host's files, every wait starts that way (adaptive polling), but paced
// to the time waited so far rather than racing ahead of it: it looks after
// 2 ms, then each gap an eighth longer than the last (about an
// eighth of the time waited so far, so a result is noticed within ~12% of
// the time it took), until the gap reaches PollInterval (about 0.8 s at
// the default 100 ms; QuickPoll, if longer, stands). A round trip across
// NFS clients takes tens of milliseconds, when the gap is a few
// milliseconds; the 250 µs start growing by half reached 32 ms gaps by
// then (docs/benchmarks-log.md, "NFS: adaptive polling"). A long wait costs what it
// cost before: PollInterval's polls.
func (s *Session) watch(ctx context.Context, rel string) (<-chan struct{}, func()) {
	poll := s.pollInterval()
	quick := s.QuickPoll
	if quick <= 0 && !s.io.OnNetworkFS() {
		return s.hub().subscribe(s.io.Path(rel))
	}
	bell := make(chan struct{}, 1)
	ring := func() {
		select {
		case bell <- struct{}{}:
		default:
		}
	}
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		end := time.Now().Add(quick)
		for d := firstLook(s.io.OnNetworkFS()); time.Now().Before(end) || (s.io.OnNetworkFS() && d < poll); d = nextLook(d, s.io.OnNetworkFS()) {
			wait := min(d, poll)
			if !s.io.OnNetworkFS() {
				wait = min(wait, time.Until(end))
			}
			t := time.NewTimer(wait)
			select {
			case <-quit:
				t.Stop()
				return
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
				ring()
			}
		}
		hb, stop := s.hub().subscribe(s.io.Path(rel))
		defer stop()
		ring() // Anything that changed while joining is looked at again.
		for {
			select {
			case <-quit:
				return
			case <-ctx.Done():
				return
			case <-hb:
				ring()
			}
		}
	}()
	return bell, func() { close(quit); <-done }
}

// firstLook is a quick wait's first gap between looks (see watch): 100 µs
// locally, 2 ms on a network filesystem (a file another host writes takes
// longer than that to show up there).
func firstLook(network bool) time.Duration {
	if network {
		return 2 * time.Millisecond
	}
	return 100 * time.Microsecond
}

// nextLook returns the gap between a quick wait's looks after gap d: an
// eighth longer (see watch).
func nextLook(d time.Duration, network bool) time.Duration {
	return d + d/8
}

// Close releases the Session's watcher (one goroutine and, where inotify
// works, one inotify instance) and waits for it to end: this Session's,
// never another's. Waits still running on the Session fall back to
// nothing but their own timeouts; close a Session only when done with it.
// Close is a no-op on a Session that never waited, and safe to call more
// than once. Its error is the inotify instance's, when closing it failed.
func (s *Session) Close() error {
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	if s.wh == nil {
		return nil
	}
	err := s.wh.close()
	s.wh = nil
	return err
}

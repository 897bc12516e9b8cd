package fsq

import (
	"context"
	"errors"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Change names one file that may have appeared or changed in a watched
// directory.
type Change struct {
	Dir  string // the watched directory, as given to Watch
	Name string // base name
}

// Watcher reports changes in a set of directories. Changes carries
// individual names seen by inotify; Rescan is a doorbell (capacity one) that
// rings on every poll tick and whenever inotify may have lost events, after
// which the owner should list the directories again. Names are hints, never
// a complete list: only a rescan is authoritative.
//
// Polling only (no inotify: a network filesystem), the poll tick adapts:
// Hurry, called by the owner on activity (a command taken or ended, a
// request), makes it tick every HurryPoll, after which each tick's period
// grows by a quarter back to the poll period given to Watch (about fifteen
// ticks, 1.2 s, from 10 ms to 250 ms). Work that comes in bursts is seen
// within milliseconds, and an idle watcher costs what a fixed poll costs.
type Watcher struct {
	Changes <-chan Change
	Rescan  <-chan struct{}
	// Lost rings (capacity one) when inotify reported an overflow or an
	// error: names may have been missed and a full listing is needed.
	Lost <-chan struct{}
	// Inotify reports whether fsnotify is active (false: polling only).
	Inotify bool
	done    chan struct{}
	hurry   chan struct{}
}

// HurryPoll is the poll period right after Hurry.
const HurryPoll = 10 * time.Millisecond

// Hurry makes a polling watcher tick fast for a while (see Watcher). With
// inotify it does nothing: changes are seen as they happen.
func (w *Watcher) Hurry() {
	if w == nil || w.Inotify {
		return
	}
	select {
	case w.hurry <- struct{}{}:
	default:
	}
}

// pacer is the adaptive poll period: fast after hurry, then a quarter
// longer each tick up to slow.
type pacer struct {
	fast, slow, cur time.Duration
}

func newPacer(fast, slow time.Duration) pacer {
	return pacer{fast: min(fast, slow), slow: slow, cur: slow}
}

// hurry restarts from the fast period.
func (p *pacer) hurry() { p.cur = p.fast }

// next returns the period until the next tick and moves on.
func (p *pacer) next() time.Duration {
	d := p.cur
	p.cur = min(p.cur+p.cur/4, p.slow)
	return d
}

// Done is closed when the watcher's goroutines have exited.
func (w *Watcher) Done() <-chan struct{} { return w.done }

// Warner is where Watch reports that it fell back to polling or rescans
// (a *slog.Logger is one). An interface, so that fsq's importers that never
// watch (the master) do not link log/slog.
type Warner interface {
	Warn(msg string, args ...any)
}

// Watch starts watching dirs until ctx ends. With useInotify false, or when
// fsnotify cannot be set up, only the poll ticker rings Rescan. poll must be
// positive.
func Watch(ctx context.Context, dirs []string, poll time.Duration, useInotify bool, log Warner) *Watcher {
	changes := make(chan Change, 1024)
	rescan := make(chan struct{}, 1)
	lost := make(chan struct{}, 1)
	w := &Watcher{Changes: changes, Rescan: rescan, Lost: lost, done: make(chan struct{}), hurry: make(chan struct{}, 1)}
	ring := func(ch chan struct{}) {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	var fw *fsnotify.Watcher
	if useInotify {
		var err error
		fw, err = fsnotify.NewBufferedWatcher(4096)
		if err == nil {
			for _, d := range dirs {
				if err = fw.Add(d); err != nil {
					break
				}
			}
		}
		if err != nil {
			log.Warn("inotify unavailable, polling only", "err", err)
			if fw != nil {
				_ = fw.Close() // Best effort; polling takes over.
			}
			fw = nil
		}
	}
	w.Inotify = fw != nil
	go func() {
		defer close(w.done)
		pace := newPacer(HurryPoll, poll)
		t := time.NewTimer(pace.next())
		defer t.Stop()
		due := time.Now().Add(poll)
		var events chan fsnotify.Event
		var errs chan error
		if fw != nil {
			defer fw.Close()
			events, errs = fw.Events, fw.Errors
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				ring(rescan)
				d := pace.next()
				t.Reset(d)
				due = time.Now().Add(d)
			case <-w.hurry:
				pace.hurry()
				if d := pace.next(); time.Until(due) > d {
					t.Reset(d)
					due = time.Now().Add(d)
				}
			case ev, ok := <-events:
				if !ok {
					events = nil
					continue
				}
				if ev.Op&(fsnotify.Create|fsnotify.Write) == 0 {
					continue
				}
				c := Change{Dir: filepath.Dir(ev.Name), Name: filepath.Base(ev.Name)}
				select {
				case changes <- c:
				case <-ctx.Done():
					return
				}
			case err, ok := <-errs:
				if !ok {
					errs = nil
					continue
				}
				if errors.Is(err, fsnotify.ErrEventOverflow) {
					log.Warn("inotify queue overflowed, rescanning")
				} else {
					log.Warn("inotify error, rescanning", "err", err)
				}
				ring(lost)
				ring(rescan)
			}
		}
	}()
	return w
}

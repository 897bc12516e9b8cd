package fsq

import (
	"context"
	"errors"
	"log/slog"
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
type Watcher struct {
	Changes <-chan Change
	Rescan  <-chan struct{}
	// Lost rings (capacity one) when inotify reported an overflow or an
	// error: names may have been missed and a full listing is needed.
	Lost <-chan struct{}
	// Inotify reports whether fsnotify is active (false: polling only).
	Inotify bool
	done    chan struct{}
}

// Done is closed when the watcher's goroutines have exited.
func (w *Watcher) Done() <-chan struct{} { return w.done }

// Watch starts watching dirs until ctx ends. With useInotify false, or when
// fsnotify cannot be set up, only the poll ticker rings Rescan. poll must be
// positive.
func Watch(ctx context.Context, dirs []string, poll time.Duration, useInotify bool, log *slog.Logger) *Watcher {
	changes := make(chan Change, 1024)
	rescan := make(chan struct{}, 1)
	lost := make(chan struct{}, 1)
	w := &Watcher{Changes: changes, Rescan: rescan, Lost: lost, done: make(chan struct{})}
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
		t := time.NewTicker(poll)
		defer t.Stop()
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

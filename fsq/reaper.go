package fsq

import (
	"errors"
	"io/fs"
	"sync"
)

// Reaper removes files off its callers' paths: a background goroutine
// unlinks the names handed to Reap, in order. Deleting a file that has
// blocks waits for the disk where the filesystem discards freed blocks at
// once; WriteAtomicReaped hands the file it replaced here instead of
// deleting it itself. Root.NewReaper starts one.
type Reaper struct {
	remove func(name string)
	ch     chan string
	done   chan struct{}

	mu     sync.Mutex
	closed bool
}

// NewReaper starts a reaper for files of s; at most n names wait for it
// (Reap removes a name itself when n are waiting). A name it cannot
// remove is left to RemoveOrLater.
func (s *Root) NewReaper(n int) *Reaper {
	return newReaper(n, func(name string) {
		if err := s.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.RemoveOrLater(name)
		}
	})
}

func newReaper(n int, remove func(string)) *Reaper {
	r := &Reaper{remove: remove, ch: make(chan string, n), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for name := range r.ch {
			r.remove(name)
		}
	}()
	return r
}

// Reap has name removed, by the reaper's goroutine: the caller does not
// wait for the disk, except when the reaper's queue is full or the reaper
// closed, when Reap removes name itself.
func (r *Reaper) Reap(name string) {
	r.mu.Lock()
	if !r.closed {
		select {
		case r.ch <- name:
			r.mu.Unlock()
			return
		default:
		}
	}
	r.mu.Unlock()
	r.remove(name)
}

// Close removes what is still queued and stops the reaper. Reap after
// Close removes the name itself.
func (r *Reaper) Close() {
	r.mu.Lock()
	if !r.closed {
		r.closed = true
		close(r.ch)
	}
	r.mu.Unlock()
	<-r.done
}

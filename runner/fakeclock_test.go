package runner

import (
	"sync"
	"time"
)

// fakeClock is a clock that moves only when a test calls Advance. Timers
// and tickers fire (non-blocking sends on channels of capacity one, like
// the real ones) when Advance passes their time.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters map[*fakeWaiter]bool
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), waiters: map[*fakeWaiter]bool{}}
}

type fakeWaiter struct {
	clk    *fakeClock
	c      chan time.Time
	at     time.Time
	period time.Duration // tickers
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTimer(d time.Duration) clockTimer { return c.add(d, 0) }

func (c *fakeClock) NewTicker(d time.Duration) clockTicker { return c.add(d, d) }

// Sleep waits d in real time (what Open waits for is another process or
// the filesystem) and moves the clock by d, so that a loop bounded on the
// clock ends.
func (c *fakeClock) Sleep(d time.Duration) {
	time.Sleep(d)
	c.Advance(d)
}

func (c *fakeClock) add(d, period time.Duration) *fakeWaiter {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := &fakeWaiter{clk: c, c: make(chan time.Time, 1), at: c.now.Add(d), period: period}
	c.waiters[w] = true
	c.fireLocked()
	return w
}

// Advance moves the clock forward by d and fires what is due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.fireLocked()
}

func (c *fakeClock) fireLocked() {
	for w := range c.waiters {
		if w.at.After(c.now) {
			continue
		}
		select {
		case w.c <- c.now:
		default:
		}
		if w.period > 0 {
			w.at = c.now.Add(w.period)
		} else {
			delete(c.waiters, w)
		}
	}
}

func (w *fakeWaiter) C() <-chan time.Time { return w.c }

func (w *fakeWaiter) Reset(d time.Duration) {
	w.clk.mu.Lock()
	defer w.clk.mu.Unlock()
	select {
	case <-w.c:
	default:
	}
	w.at = w.clk.now.Add(d)
	w.clk.waiters[w] = true
	w.clk.fireLocked()
}

func (w *fakeWaiter) Stop() {
	w.clk.mu.Lock()
	defer w.clk.mu.Unlock()
	delete(w.clk.waiters, w)
	select {
	case <-w.c:
	default:
	}
}

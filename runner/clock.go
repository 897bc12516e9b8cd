package runner

import "time"

// clock is where the owner goroutine gets the time and its timers from: the
// real clock, or a fake one that a unit test advances by hand, so that
// timeouts, kill escalation and restart backoff are tested without
// sleeping and without depending on the machine's speed.
//
// Every deadline the owner sets or compares (command timeouts, mailbox
// rechecks, the lease, timers) is on this clock. Timestamps written on the
// wire (result end_ts, event and reply ts, heartbeat and state times) come
// from the real clock whichever clock governs; result start_ts is this
// clock's (the same thing outside tests). The pacing of queue listings is
// on this clock too (their cost is measured on it: nothing, on a fake
// clock), and so are Open's waits on another process or on the
// filesystem's mtime (Sleep). Only the result writer's and the syncer's
// own goroutines pace the disk on real time (TestStructure lists them),
// and wallNow reads the machine's clock for names and for comparisons
// with file times.
type clock interface {
	Now() time.Time
	// NewTimer returns a stopped-or-running one-shot timer like
	// time.NewTimer.
	NewTimer(d time.Duration) clockTimer
	// NewTicker returns a ticker like time.NewTicker.
	NewTicker(d time.Duration) clockTicker
	// Sleep waits d, like time.Sleep; the fake clock also moves by d.
	// Only Open sleeps, before the loop runs (a lock a master's probe
	// holds for microseconds, another runner's heartbeat, the
	// filesystem's mtime).
	Sleep(d time.Duration)
}

// clockTimer is the part of *time.Timer the runner uses. As with
// time.Timer since Go 1.23, Reset and Stop discard a pending fire.
type clockTimer interface {
	C() <-chan time.Time
	Reset(d time.Duration)
	Stop()
}

// clockTicker is the part of *time.Ticker the runner uses.
type clockTicker interface {
	C() <-chan time.Time
	Stop()
}

// realClock is the system clock.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTimer(d time.Duration) clockTimer { return realTimer{time.NewTimer(d)} }

func (realClock) NewTicker(d time.Duration) clockTicker { return realTicker{time.NewTicker(d)} }

func (realClock) Sleep(d time.Duration) { time.Sleep(d) }

// wallNow is the machine's clock, for what is compared with the
// filesystem's times or names a date; never for a deadline (those are on
// the runner's clock).
func wallNow() time.Time { return time.Now() }

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time   { return t.t.C }
func (t realTimer) Reset(d time.Duration) { t.t.Reset(d) }
func (t realTimer) Stop()                 { t.t.Stop() }

type realTicker struct{ t *time.Ticker }

func (t realTicker) C() <-chan time.Time { return t.t.C }
func (t realTicker) Stop()               { t.t.Stop() }

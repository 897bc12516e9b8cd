package runner

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// toolLife is the tool's life as the runner sees it: the running process
// (if any), the phase it is in (toolphase.go), and the counts that decide
// when the next one starts after a death or a failed start (toolctl.go).
// It is owned by the Run goroutine, like the rest of the Runner; term is
// nil when no tool runs.
type toolLife struct {
	start termStarter  // starts a tool on a terminal
	procs *procStarter // nil when a test injects start

	term         toolTerm  // nil when no tool runs
	typist       *typist   // types into term; nil when no tool runs
	eof          bool      // term's output channel was closed
	born         time.Time // when term started (clk)
	lastOut      time.Time // when it last printed (clk)
	atPrompt     bool      // what it printed last is an unfinished line (a prompt, a question)
	promptHeld   time.Time // when the prompt held at the end of the command's unfinished line is output (flushBuffers); zero: none held
	noActivity   bool      // /proc could not be read for the stuck rule's proof; warned once
	tail         []byte    // the last promptHold bytes it printed, raw (a line driver's: is it at its prompt?)
	phase        toolPhase
	starts       int64        // tools started by this runner
	fastDeaths   int          // consecutive deaths of a ready tool soon after its start
	failStreak   int          // consecutive failed starts (backoff)
	failedStarts []time.Time  // failed starts within RestartWindow (clk)
	gaveUp       string       // why the runner gave up starting the tool
	failure      string       // why the last start failed, with the restart to come ("" once a tool is ready)
	wasReady     bool         // a tool reached its prompt under this runner
	diedBusy     bool         // the last ready tool died running a command
	rejecting    bool         // the start failing now was rejected at the prompt
	rejections   int          // consecutive failed starts that were rejections
	exiting      *pendingExit // the tool exited; its last output is being read (endExit)
	syncTokens   map[string]bool
}

// keepTail keeps the last promptHold bytes the tool printed.
func (t *toolLife) keepTail(b []byte) {
	if len(b) >= promptHold {
		t.tail = append(t.tail[:0], b[len(b)-promptHold:]...)
		return
	}
	t.tail = append(t.tail, b...)
	if over := len(t.tail) - promptHold; over > 0 {
		t.tail = append(t.tail[:0], t.tail[over:]...)
	}
}

// ready reports whether the tool waits at its prompt.
func (t *toolLife) ready() bool {
	_, ok := t.phase.(*phaseReady)
	return ok && t.exiting == nil
}

// newSyncToken returns a fresh sync token and accepts it from now on,
// with every token given out since syncTokens was last cleared. Its number
// is drawn at random (12 digits), not counted: a payload still running in
// the tool's event loop after a cancel, which knows the session_id from
// state.json, cannot print a sync line the runner would take for the
// prompt's answer. The form stays sync-<last 8 of session_id>-<digits>,
// which master tail --clean recognises.
func (t *toolLife) newSyncToken(sessionID string) string {
	tok := fmt.Sprintf("sync-%s-%d", sessionID[len(sessionID)-8:], syncNumber())
	t.syncTokens[tok] = true
	return tok
}

// syncNumber is a sync token's number: 12 random digits, never 0-led.
func syncNumber() int64 { return 100_000_000_000 + rand.Int64N(900_000_000_000) }

// restartDelay counts a death of the tool that had been ready and returns
// how long to wait before the next start: nothing, unless it died by itself
// while idle within fastDeath of its start (again and again); then a
// backoff.
func (t *toolLife) restartDelay(hadCmd bool, now time.Time) time.Duration {
	t.diedBusy = hadCmd
	if !hadCmd && now.Sub(t.born) < fastDeath {
		t.fastDeaths++
		return backoff(t.fastDeaths)
	}
	t.fastDeaths = 0
	return 0
}

// failedStart counts a failed start at now, keeping only those within
// window in failedStarts. It returns how many failed starts fall within
// window and the backoff before the next start.
func (t *toolLife) failedStart(now time.Time, window time.Duration) (recent int, delay time.Duration) {
	t.failStreak++
	keep := t.failedStarts[:0]
	for _, f := range t.failedStarts {
		if now.Sub(f) < window {
			keep = append(keep, f)
		}
	}
	t.failedStarts = append(keep, now)
	return len(t.failedStarts), backoff(t.failStreak)
}

// isSync reports whether l is the done marker (under prefix) of a sync
// token given out since syncTokens was last cleared.
func (t *toolLife) isSync(l []byte, prefix string) bool {
	for tok := range t.syncTokens {
		if _, ok := matchDone(l, prefix, tok); ok {
			return true
		}
	}
	return false
}

// newToolLife returns a toolLife with no tool, whose tools start with
// start, or on a PTY when start is nil.
func newToolLife(start termStarter) toolLife {
	t := toolLife{start: start, phase: &phaseDown{}, syncTokens: map[string]bool{}}
	if t.start == nil {
		t.procs = newProcStarter()
		t.start = ptyStarter(t.procs)
	}
	return t
}

// close releases what starting tools needs (the PTY starter's helper).
func (t *toolLife) close() {
	if t.procs != nil {
		t.procs.close()
	}
}

// launch starts a tool with spec and makes it the running one, stamped
// with clk's time, accepting no sync token yet. It returns the tool's pid
// and how many tools this runner has started, this one included.
func (t *toolLife) launch(spec termSpec, clk clock) (pid int, n int64, err error) {
	s, err := t.start(spec)
	if err != nil {
		return 0, t.starts, err
	}
	t.term, t.typist, t.eof, t.born = s, newTypist(s), false, clk.Now()
	t.starts++
	t.syncTokens = map[string]bool{}
	return s.Pid(), t.starts, nil
}

// identity is the running tool's pid and start time, for state.json; ok
// is false when no tool runs.
func (t *toolLife) identity() (pid int, start uint64, ok bool) {
	if t.term == nil {
		return 0, 0, false
	}
	return t.term.Pid(), t.term.StartTime(), true
}

// output is the channel the tool's output arrives on: nil when no tool
// runs or its output ended (outputEnded).
func (t *toolLife) output() <-chan chunk {
	if t.term == nil || t.eof {
		return nil
	}
	return t.term.Output()
}

// exited is the channel the tool's exit arrives on; nil when no tool runs.
func (t *toolLife) exited() <-chan toolExit {
	if t.term == nil || t.exiting != nil {
		return nil
	}
	return t.term.Exited()
}

// write types p into the tool's terminal after what was typed before it,
// without waiting (typist); nothing when no tool runs.
func (t *toolLife) write(p []byte) error {
	if t.term == nil {
		return nil
	}
	return t.typist.typeBytes(p)
}

// typing is where the typist's write under way reports its end; nil when
// none is.
func (t *toolLife) typing() <-chan inputDone {
	if t.term == nil {
		return nil
	}
	return t.typist.done()
}

// flushInput drops everything typed that the tool has not read: what the
// typist still holds and the terminal's input queue. It returns the
// terminal's error, if any.
func (t *toolLife) flushInput() error {
	if t.term == nil {
		return nil
	}
	t.typist.flush()
	return t.term.FlushInput()
}

// inputRead reports whether the tool has read everything typed into its
// terminal (nothing left with the typist or in the terminal's queue).
func (t *toolLife) inputRead() (bool, error) {
	if t.term == nil || t.typist.busy() {
		return false, nil
	}
	n, err := t.term.PendingInput()
	return n == 0 && err == nil, err
}

// activity looks at what the tool's terminal's foreground process group
// is doing (toolTerm.Activity).
func (t *toolLife) activity() (fgActivity, error) {
	if t.term == nil {
		return fgActivity{}, errors.New("no tool")
	}
	return t.term.Activity()
}

// startInput writes p into the terminal as typed input on its own
// goroutine, which reports on done; abort cuts it off. A tool must run.
func (t *toolLife) startInput(p []byte, abort <-chan struct{}, done chan<- inputDone) {
	s := t.term
	go func() {
		n, err := s.Input(p, abort)
		done <- inputDone{n, err}
	}()
}

// restoreModes puts the terminal's modes back (toolTerm.RestoreModes);
// nothing when no tool runs.
func (t *toolLife) restoreModes() (string, error) {
	if t.term == nil {
		return "", nil
	}
	return t.term.RestoreModes()
}

// reap clears the dead tool's process group (orphans it left), closes its
// terminal and forgets it. It returns its pid. A tool must run.
func (t *toolLife) reap() (pid int) {
	s := t.term
	_ = s.Signal(sigKill) // Orphans the tool left in its group.
	_ = s.Close()
	pid = s.Pid()
	t.typist.flush()
	t.term, t.typist = nil, nil
	return pid
}

// enter switches the phase and returns the one it leaves.
func (t *toolLife) enter(p toolPhase) (prev toolPhase) {
	prev, t.phase = t.phase, p
	return prev
}

// observe shows the current phase what the tool printed, if it watches.
func (t *toolLife) observe(b []byte, now time.Time) {
	if o, ok := t.phase.(interface{ observe([]byte, time.Time) }); ok {
		o.observe(b, now)
	}
}

// due is when the current phase's timer runs next; zero means never.
// While the runner stops, a down tool's restart never comes.
func (t *toolLife) due(stopping bool) time.Time {
	if t.exiting != nil {
		return t.exiting.until // The phase's timers wait for the exit's end.
	}
	if _, down := t.phase.(*phaseDown); down && stopping {
		return time.Time{}
	}
	return t.phase.due()
}

// timer runs the current phase's timer when it is due at now.
func (t *toolLife) timer(r *Runner, now time.Time) {
	if t.exiting != nil {
		if !now.Before(t.exiting.until) {
			r.endExit()
		}
		return
	}
	if d := t.phase.due(); !d.IsZero() && !now.Before(d) {
		t.phase.timer(r, now)
	}
}

// escalate handles a kill while the tool is already being killed: hard
// turns SIGTERM into SIGKILL at once, and failure, if set, is kept. It
// reports whether the tool was being killed (if not, it does nothing).
func (t *toolLife) escalate(hard bool, failure string) bool {
	k, ok := t.phase.(*phaseKilling)
	if !ok {
		return false
	}
	if hard && !k.hard {
		k.hard = true
		_ = t.term.Signal(sigKill)
	}
	if failure != "" {
		k.failure = failure
	}
	return true
}

// prompted records that the tool reached its prompt: the run of failed
// starts is over.
func (t *toolLife) prompted() {
	t.failStreak, t.rejections, t.rejecting = 0, 0, false
	t.failure, t.wasReady = "", true
}

// countRejection counts the failed start being recorded and reports how
// many consecutive failed starts were rejections (0: this one was not).
func (t *toolLife) countRejection() int {
	if !t.rejecting {
		t.rejections = 0
		return 0
	}
	t.rejecting = false
	t.rejections++
	return t.rejections
}

// giveUp records that the runner gives up starting the tool after last
// failed (within window, more than maxRestarts), and returns why.
func (t *toolLife) giveUp(window time.Duration, maxRestarts int, last string) string {
	t.gaveUp = fmt.Sprintf("gave up after %d failed starts of the tool within %v (--max-restarts %d): %s",
		len(t.failedStarts), window, maxRestarts, last)
	return t.gaveUp
}

// gaveUpErr is the error Run returns after giveUp (nil before).
func (t *toolLife) gaveUpErr() error {
	if t.gaveUp != "" {
		return gaveUpError(t.gaveUp)
	}
	return nil
}

package runner

import (
	"fmt"
	"time"
)

// toolLife is the tool's life as the runner sees it: the running process
// (if any), the phase it is in (toolphase.go), and the counts that decide
// when the next one starts after a death or a failed start (toolctl.go).
// It is owned by the Run goroutine, like the rest of the Runner.
type toolLife struct {
	start sessionStarter // starts a tool on a terminal
	procs *procStarter   // nil when a test injects start

	sess         toolSession // nil when no tool runs
	eof          bool        // sess's output channel was closed
	born         time.Time   // when sess started (clk)
	phase        toolPhase
	starts       int64       // tools started by this runner
	fastDeaths   int         // consecutive deaths of a ready tool soon after its start
	failStreak   int         // consecutive failed starts (backoff)
	failedStarts []time.Time // failed starts within RestartWindow (clk)
	gaveUp       string      // why the runner gave up starting the tool
	syncTokens   map[string]bool
	syncSeq      int64
}

// ready reports whether the tool waits at its prompt.
func (t *toolLife) ready() bool {
	_, ok := t.phase.(*phaseReady)
	return ok
}

// newSyncToken returns a fresh sync token and accepts it from now on,
// with every token given out since syncTokens was last cleared.
func (t *toolLife) newSyncToken(sessionID string) string {
	t.syncSeq++
	tok := fmt.Sprintf("sync-%s-%d", sessionID[len(sessionID)-8:], t.syncSeq)
	t.syncTokens[tok] = true
	return tok
}

// restartDelay counts a death of the tool that had been ready and returns
// how long to wait before the next start: nothing, unless it died by itself
// while idle within fastDeath of its start (again and again); then a
// backoff.
func (t *toolLife) restartDelay(hadCmd bool, now time.Time) time.Duration {
	if !hadCmd && now.Sub(t.born) < fastDeath {
		t.fastDeaths++
		return backoff(t.fastDeaths)
	}
	t.fastDeaths = 0
	return 0
}

// failedStart counts a failed start at now, keeping only those within
// window in failedStarts.
func (t *toolLife) failedStart(now time.Time, window time.Duration) {
	t.failStreak++
	keep := t.failedStarts[:0]
	for _, f := range t.failedStarts {
		if now.Sub(f) < window {
			keep = append(keep, f)
		}
	}
	t.failedStarts = append(keep, now)
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

package sessiontest

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
)

// BusyFlow runs about n commands through a real runner on tclsh in dir,
// with everything a timeline marks: batches queued at once (queue waits),
// idle gaps, Tcl errors, tool restarts (payloads that call exit), cancels
// of running and of queued commands, a timeout, a runner killed mid-command
// and restarted (a runner_restarted result), and at the end a lease that
// expires (cancelling the last command and stopping the runner). It returns
// every command it submitted; each has a result when it returns.
func BusyFlow(t testing.TB, dir string, n int) []Cmd {
	t.Helper()
	RequireTclsh(t)
	r := Start(t, dir, "--", "tclsh")
	var all []Cmd
	seq := int64(0)
	next := func(payload string) Cmd {
		seq++
		c := Cmd{Seq: seq, ID: fmt.Sprintf("c%06d", seq), Payload: payload}
		all = append(all, c)
		return c
	}
	submit := func(c Cmd) Cmd { Submit(t, dir, c); return c }
	run := func(c Cmd) *protocol.Result { Submit(t, dir, c); return WaitResult(t, dir, c) }
	// cancelRunning starts a long command, waits for its first output and
	// cancels it (plain tclsh dies of the Ctrl-C: a tool restart).
	cancelRunning := func() {
		c := submit(next("puts started; flush stdout; after 60000"))
		WaitOutput(t, dir, c, 7)
		Cancel(t, dir, c.ID)
		WaitResult(t, dir, c)
	}
	const special = 8 // commands outside the batches
	const after = 2   // of which after the last batch
	batches := 8
	per := max((n-special)/batches, 1)
	for b := 0; b < batches; b++ {
		if b == batches-1 {
			per = max(n-after-len(all), 1)
		}
		var last Cmd
		for i := 0; i < per; i++ {
			k := seq + 1
			var p string
			switch {
			case i == per/2 && b%2 == 0:
				p = "exit 1" // the tool dies: restarted, init rerun
			case k%97 == 0:
				p = fmt.Sprintf("error {step %d failed}", k)
			case k%50 == 0:
				p = fmt.Sprintf("after 25; puts {report %d}; expr {%d*2}", k, k)
			case k%3 == 0:
				p = fmt.Sprintf("puts {line %d of the batch}", k)
			default:
				p = fmt.Sprintf("expr {%d*%d}", k, k)
			}
			last = submit(next(p))
		}
		WaitResult(t, dir, last)
		switch b {
		case 1:
			cancelRunning()
		case 2:
			// Cancel a queued command behind a blocker, then the blocker.
			blocker := submit(next("puts blocking; flush stdout; after 60000"))
			queued := submit(next("puts never"))
			WaitOutput(t, dir, blocker, 8)
			Cancel(t, dir, queued.ID)
			WaitResult(t, dir, queued)
			Cancel(t, dir, blocker.ID)
			WaitResult(t, dir, blocker)
		case 3:
			c := next("after 60000")
			c.TimeoutS = 0.3
			run(c)
		case 4:
			// The runner crashes mid-command; the next one settles it.
			c := submit(next("puts crash; flush stdout; after 60000"))
			WaitOutput(t, dir, c, 5)
			r.Kill()
			r = Start(t, dir, "--", "tclsh")
			WaitResult(t, dir, c)
		case 5:
			cancelRunning()
		}
		time.Sleep(300 * time.Millisecond) // An idle gap.
	}
	run(next("puts {all batches done}"))
	// A lease that is never renewed: it expires while the last command
	// runs; the runner cancels it and stops.
	last := submit(next("puts {waiting for the lease}; flush stdout; after 60000"))
	WaitOutput(t, dir, last, 10)
	lease := `{"protocol_version":1,"lease_id":"flow","ttl_ms":800,"counter":1,"owner":"sessiontest"}`
	if err := WriteAtomic(filepath.Join(dir, protocol.FileLease), []byte(lease)); err != nil {
		t.Fatal(err)
	}
	r.Wait()
	WaitResult(t, dir, last)
	return all
}

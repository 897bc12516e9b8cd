package pool

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
)

// TestWithdrawRacesHeal races withdraws against heal moves (issue 34.4):
// commands queued in a dead session are moved by two concurrent healers
// while each is withdrawn, by cmd_id or by its file's name, from the
// session it was queued in. Whatever the interleaving, a withdraw that
// answers "withdrawn" or "unknown" is about a command that never runs;
// only "not queued" (claimed: it runs) and "already finished" come with a
// run. Every command runs at most once.
func TestWithdrawRacesHeal(t *testing.T) {
	p, pool := newPoolDir(t, "s00", "s01", "s02")
	runnerIn(t, filepath.Join(pool, "s01"))
	runnerIn(t, filepath.Join(pool, "s02"))
	side := filepath.Join(t.TempDir(), "ran")
	dead := filepath.Join(pool, "s00")
	type outcome struct {
		c   *master.Command
		err error
	}
	var all []outcome
	for round := 0; round < 12; round++ {
		cmds := queueSideEffects(t, dead, side, 8)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for h := 0; h < 2; h++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, _ = p.Heal(ctx(t)) // Errors: a lost race of movers; the final heals below finish.
			}()
		}
		res := make([]outcome, len(cmds))
		for i, c := range cmds {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, err := master.Open(dead)
				if err != nil {
					res[i] = outcome{c, err}
					return
				}
				ref := c.ID
				if i%2 == 1 {
					ref = protocol.DirQueue + "/" + c.Name // The name form, as ls shows it.
				}
				<-start
				time.Sleep(time.Duration(rand.IntN(40)) * time.Millisecond)
				res[i] = outcome{c, withdrawRef(s, ref)}
			}()
		}
		close(start)
		wg.Wait()
		all = append(all, res...)
	}
	// Let every move finish and every moved command run.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if _, err := p.Heal(ctx(t)); err != nil {
			t.Logf("heal: %v", err)
		}
		busy := len(commandsIn(filepath.Join(dead, protocol.DirQueue))) + len(commandsIn(filepath.Join(dead, DirMoved)))
		for _, n := range []string{"s01", "s02"} {
			for _, d := range []string{protocol.DirQueue, protocol.DirInflight} {
				busy += len(commandsIn(filepath.Join(pool, n, d)))
			}
		}
		if busy == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d commands still queued, moving or running", busy)
		}
		time.Sleep(100 * time.Millisecond)
	}
	b, _ := os.ReadFile(side)
	ran := map[string]int{}
	for _, l := range strings.Fields(string(b)) {
		ran[l]++
	}
	count := map[string]int{}
	for _, o := range all {
		code, _ := master.Classify(o.err)
		if o.err == nil {
			code = "withdrawn"
		}
		count[code]++
		switch {
		case ran[o.c.ID] > 1:
			t.Errorf("%s ran %d times", o.c.ID, ran[o.c.ID])
		case ran[o.c.ID] == 1 && (o.err == nil || errors.Is(o.err, master.ErrUnknownCmdID)):
			t.Errorf("%s: withdraw answered %q (%v), and then it ran", o.c.ID, code, o.err)
		case ran[o.c.ID] == 0 && !(o.err == nil || errors.Is(o.err, master.ErrUnknownCmdID)):
			t.Errorf("%s: withdraw answered %q (%v), and it never ran", o.c.ID, code, o.err)
		}
	}
	t.Logf("withdraw outcomes: %v", count)
}

// withdrawRef withdraws the command ref (a cmd_id, or queue/<name>) of s,
// as master withdraw does.
func withdrawRef(s *master.Session, ref string) error {
	_, err := s.Withdraw(ref)
	return err
}

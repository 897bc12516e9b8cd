package pool

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gofrs/flock"
	"github.com/skillpilot/skillpilot/protocol"
)

// idlePool makes a pool of n sessions without runners that look idle and
// alive (fresh heartbeat, runner.lock held by the test), with queued[i]
// commands in session i.
func idlePool(t testing.TB, queued []int) string {
	t.Helper()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, FilePool), []byte(`{"protocol_version":1,"size":1,"via":"local"}`), 0o600)
	for i, q := range queued {
		name := SessionName(i, len(queued))
		sd := filepath.Join(dir, name)
		for _, d := range protocol.Dirs {
			if err := os.MkdirAll(filepath.Join(sd, d), 0o700); err != nil {
				t.Fatal(err)
			}
		}
		st, _ := json.Marshal(protocol.State{ProtocolVersion: 1, Phase: protocol.PhaseIdle, SessionID: "session_" + name, Hostname: "h", Kind: protocol.KindTcl})
		hb, _ := json.Marshal(protocol.Heartbeat{ProtocolVersion: 1, Counter: 1, IntervalMS: 600000, Phase: protocol.PhaseIdle, SessionID: "session_" + name})
		os.WriteFile(filepath.Join(sd, protocol.FileState), st, 0o600)
		os.WriteFile(filepath.Join(sd, protocol.FileHeartbeat), hb, 0o600)
		for j := 0; j < q; j++ {
			os.WriteFile(filepath.Join(sd, protocol.DirQueue, protocol.CommandName(int64(j+1), "q"+name)), []byte("{}"), 0o600)
		}
		l := flock.New(filepath.Join(sd, protocol.FileLock))
		if ok, err := l.TryLock(); !ok || err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Unlock() })
	}
	return dir
}

// Choosing judges two sessions when every session serves, whatever the
// pool's size (PROTOCOL.md section 18.3), and takes the less loaded one.
func TestChooseJudgesTwo(t *testing.T) {
	queued := make([]int, 40)
	for i := range queued {
		queued[i] = i % 5
	}
	p, err := Open(idlePool(t, queued))
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		ch, err := p.newChooser()
		if err != nil {
			t.Fatal(err)
		}
		v, err := p.choose(ch, "", "")
		if err != nil {
			t.Fatal(err)
		}
		seen := ch.seen()
		if len(seen) != 2 {
			t.Fatalf("judged %d sessions, want 2", len(seen))
		}
		for _, o := range seen {
			if o.Load() < v.Load() || o.Load() == v.Load() && o.Name < v.Name {
				t.Errorf("chose %s (load %d) over %s (load %d)", v.Name, v.Load(), o.Name, o.Load())
			}
		}
	}
}

// With one serving session only, every session is judged and that one is
// taken; an affinity pin to a live session is judged alone.
func TestChooseFallbackAndPin(t *testing.T) {
	p, err := Open(idlePool(t, []int{0, 0, 0, 0}))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"s00", "s01", "s03"} { // Leave s02 alone alive: the others stop.
		st, _ := json.Marshal(protocol.State{ProtocolVersion: 1, Phase: protocol.PhaseStopped, SessionID: "session_" + name})
		os.WriteFile(filepath.Join(p.Dir(), name, protocol.FileState), st, 0o600)
	}
	ch, err := p.newChooser()
	if err != nil {
		t.Fatal(err)
	}
	v, err := p.choose(ch, "", "")
	if err != nil || v.Name != "s02" || len(ch.seen()) != 4 {
		t.Fatalf("chose %s %v after judging %d", v.Name, err, len(ch.seen()))
	}
	writePinFile(t, p.Dir(), "k", "s02")
	ch, _ = p.newChooser()
	if v, err := p.choose(ch, "k", ""); err != nil || v.Name != "s02" || len(ch.seen()) != 1 {
		t.Fatalf("pinned: chose %s %v after judging %d", v.Name, err, len(ch.seen()))
	}
}

// Commands spread over the pool: with nothing draining the queues, 8 per
// session on average, no session stays empty and none gets twice the mean.
func TestSubmitSpreads(t *testing.T) {
	p, err := Open(idlePool(t, make([]int, 16)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for range 8 * 16 {
		if _, err := p.Submit(ctx, "expr 1", SubmitOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	views, err := p.Views()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range views {
		if v.Queue < 1 || v.Queue > 16 {
			t.Errorf("%s: %d queued of 128 over 16 sessions", v.Name, v.Queue)
		}
	}
}

// BenchmarkChoose: choosing a session (touching the clock file, listing
// the pool, judging two sessions) in pools of 4, 64 and 256 sessions that
// all serve, and the listing alone, which is the part that grows with the
// pool (BENCHMARKS.md).
func BenchmarkChoose(b *testing.B) {
	for _, n := range []int{4, 64, 256} {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) {
			p, err := Open(idlePool(b, make([]int, n)))
			if err != nil {
				b.Fatal(err)
			}
			b.Run("choose", func(b *testing.B) {
				for b.Loop() {
					ch, err := p.newChooser()
					if err != nil {
						b.Fatal(err)
					}
					if _, err := p.choose(ch, "", ""); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("list", func(b *testing.B) {
				for b.Loop() {
					p.SessionNames()
				}
			})
		})
	}
}

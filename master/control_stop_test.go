package master

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/protocol"
)

// reqNames is the set of request names in ctl/ and ctl/ack/ together: a
// request is in one or both (the runner deletes it after its reply).
func reqNames(t *testing.T, dir string) map[string]bool {
	t.Helper()
	set := map[string]bool{}
	for _, d := range []string{protocol.DirCtl, protocol.DirAck} {
		names, err := readNames(filepath.Join(dir, d))
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			if strings.HasPrefix(n, "req_") {
				set[n] = true
			}
		}
	}
	return set
}

// Stop writes the stop request and returns without waiting for the
// reply: a caller that gives up then leaves the request in place (it is
// not withdrawn), and PendingStop.Wait later gets the reply and waits for
// the runner to stop. The request is one mailbox request with a seq of
// its own and the hint rewritten (in the background) to it. Alive says
// what Status says. With no live runner Stop writes nothing.
func TestStopThenWait(t *testing.T) {
	dir := startRunner(t)
	s := readyIn(t, dir)
	if alive, why := s.Alive(ctx(t)); !alive {
		t.Fatalf("Alive: false (%s) with a runner serving", why)
	}
	c, err := s.Submit(ctx(t), "after 300; expr 2", SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Claimed before the stop: a runner polling (no inotify left on a busy
	// machine) can see the stop request first, and the command then rightly
	// stays queued.
	for deadline := time.Now().Add(longWait); ; time.Sleep(10 * time.Millisecond) {
		if !s.io.Exists(protocol.DirQueue + "/" + c.Name) { // Claimed.
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s was never claimed", c.ID)
		}
	}
	before := reqNames(t, dir)
	sendCtx, cancel := context.WithCancel(ctx(t))
	p, err := s.Stop(sendCtx, protocol.StopGraceful)
	cancel() // Writing is all Stop does: nothing waits on this context.
	if err != nil {
		t.Fatal(err)
	}
	after := reqNames(t, dir)
	var added []string
	for n := range after {
		if !before[n] {
			added = append(added, n)
		}
	}
	if len(added) != 1 || added[0] != p.name {
		t.Fatalf("Stop wrote %v, want its request %s alone", added, p.name)
	}
	rep, err := p.Wait(ctx(t))
	if err != nil || rep.Outcome != protocol.OutcomeAccepted || rep.Op != protocol.OpStop {
		t.Fatalf("Wait: %+v, %v", rep, err)
	}
	if st, err := s.ReadState(); err != nil || st.Phase != protocol.PhaseStopped {
		t.Fatalf("after Wait: phase %s (%v)", st.Phase, err)
	}
	if res, err := c.Wait(ctx(t), WaitOptions{}); err != nil || *res.Value != "2" {
		t.Fatalf("the graceful stop must let the running command finish: %+v %v", res, err)
	}
	if _, err := os.Lstat(filepath.Join(dir, protocol.DirAck, p.name)); err != nil {
		t.Fatalf("no reply to %s: %v", p.name, err)
	}
	seq, _, err := protocol.ParseRequestName(p.name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(dir, protocol.DirSeq, protocol.SeqName(seq))); err != nil {
		t.Fatalf("the request's seq %d was not reserved in seq/: %v", seq, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, protocol.DirSeq, "hint")); err != nil || strings.TrimSpace(string(b)) != strconv.FormatInt(seq, 10) {
		t.Fatalf("seq/hint %q (%v), want %d", b, err, seq)
	}
	alive, why := s.Alive(ctx(t))
	st, _ := s.Status(ctx(t))
	if alive || why == "" || st.Alive || st.AliveReason != why {
		t.Fatalf("Alive after the stop: %v %q; Status: %v %q", alive, why, st.Alive, st.AliveReason)
	}
	stopped := reqNames(t, dir)
	if _, err := s.Stop(ctx(t), protocol.StopGraceful); !errors.Is(err, ErrRunnerNotAlive) {
		t.Fatalf("Stop with no runner: %v", err)
	}
	if again := reqNames(t, dir); len(again) != len(stopped) {
		t.Fatalf("Stop with no runner wrote %v (before: %v)", again, stopped)
	}
}

// readNames lists the directory dir through a fsq.Root of it.
func readNames(dir string) ([]string, error) {
	r, err := fsq.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.ReadNames(".")
}

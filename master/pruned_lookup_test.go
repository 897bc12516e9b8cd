package master

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
)

func prunedSession(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{"log", "log/rejected", "queue", "inflight", "result", "output", "archive", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// A lookup races the runner's rotation of the pruned index (log/pruned.log
// renamed to log/pruned.log.1, then a new log/pruned.log): a command whose
// line is in one of the two files for the whole lookup is pruned, never
// unknown. The writer below rotates as the runner does, a fresh cmd_id
// each round; a lookup counts only when no rotation that drops its line
// (the next one) began before it ended. Before, log/pruned.log.1 was read
// first, and a rotation between the two reads hid the line.
func TestPrunedLookupAcrossRotation(t *testing.T) {
	dir := prunedSession(t)
	cur := filepath.Join(dir, protocol.FilePruned)
	old := filepath.Join(dir, protocol.FilePrunedOld)
	line := func(i int64) string { return fmt.Sprintf("cmd_%010d_x%d.json ok 2026-12-06T17:07:12.743Z\n", i, i) }
	var published, dropping atomic.Int64 // the last id written to pruned.log; the id whose rotation began last
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := int64(1); !stop.Load(); i++ {
			tmp := filepath.Join(dir, "tmp", "put")
			if err := os.WriteFile(tmp, []byte(line(i)), 0o644); err != nil {
				t.Error(err)
				return
			}
			if err := os.Rename(tmp, cur); err != nil {
				t.Error(err)
				return
			}
			published.Store(i)
			for range 50 {
				runtime.Gosched()
			}
			dropping.Store(i) // This rename drops x<i-1>'s line (pruned.log.1 before).
			if err := os.Rename(cur, old); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	counted, unknown := 0, 0
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); {
		i := published.Load()
		if i == 0 {
			continue
		}
		_, err := s.Command(fmt.Sprintf("x%d", i))
		if dropping.Load() > i {
			continue // x<i>'s line may have left with the next rotation: legitimately unknown.
		}
		counted++
		switch {
		case errors.Is(err, ErrPruned):
		case errors.Is(err, ErrUnknownCmdID):
			unknown++
		default:
			t.Fatalf("lookup: %v", err)
		}
	}
	stop.Store(true)
	<-done
	if unknown > 0 {
		t.Fatalf("a command in the pruned index for the whole lookup was unknown in %d of %d lookups", unknown, counted)
	}
	t.Logf("%d lookups counted", counted)
}

// A retry of a cmd_id whose command retention removed gets a
// duplicate_cmd_id refusal under a higher seq (the documented retry). A
// lookup by that cmd_id answers pruned, with the original's status, as it
// answers with the original while the original's result is there. Before,
// it answered with the refusal: wait said error, output printed nothing.
func TestPrunedOriginalBehindRetry(t *testing.T) {
	dir := prunedSession(t)
	write := func(rel, s string) {
		if err := os.WriteFile(filepath.Join(dir, rel), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(protocol.FilePruned, "cmd_0000000002_x.json ok 2026-12-06T17:07:12.743Z\n")
	refusal := `{"protocol_version":1,"cmd_id":"x","seq":5,"status":"error","end_ts":"2026-12-06T17:08:00.000Z","exit_reason":"invalid_request","stats":{"bytes":0,"lines":0,"duration_ms":0},"error":{"code":"duplicate_cmd_id","message":"cmd_id \"x\" already had a result","context":{"cmd_id":"x","other_result":"result/cmd_0000000002_x.json","pruned":%s}},"command_path":"log/rejected/cmd_0000000005_x.json"}`
	write("result/cmd_0000000005_x.json", fmt.Sprintf(refusal, "true"))
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Command("x")
	if !errors.Is(err, ErrPruned) {
		t.Fatalf("lookup of x: %v, %+v; want pruned (the original, seq 2)", err, c)
	}
	if ctx := ErrorContext(err); ctx["status"] != "ok" {
		t.Errorf("the pruned error's context %v: want the original's status ok", ctx)
	}
	// The same refusal without pruned (its original's result was there
	// when it was refused, and nothing says it left): the lookup finds
	// the refusal, as before.
	write("result/cmd_0000000005_x.json", fmt.Sprintf(refusal, "false"))
	if c, err := s.Command("x"); err != nil || c.Seq != 5 {
		t.Errorf("lookup of x with a refusal that names no pruned result: %v, %+v", err, c)
	}
	// By name, the refusal is itself.
	if c, err := s.Command("cmd_0000000005_x.json"); err != nil || c.Seq != 5 {
		t.Errorf("lookup by name: %v, %+v", err, c)
	}
}

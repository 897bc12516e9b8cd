package runner

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/skillpilot/skillpilot/fsq"
)

// A round on a local filesystem is one syncfs; one whose syncfs fails
// fsyncs the log and the directories instead, and says why; the last
// round (at the stop) never waits for the whole filesystem.
func TestSyncerRounds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		whole    bool
		fail     error
		wantFS   int // syncfs calls in one round and the close
		wantWarn bool
	}{
		{"local", true, nil, 1, false},
		{"local, syncfs fails", true, syscall.EIO, 1, true},
		{"network", false, nil, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root, meta := syncerSession(t, "d")
			var mu sync.Mutex
			var warned []string
			calls := 0
			s := newSyncer(root, meta, []string{"d"}, nil, tc.whole, func(msg string, err error) {
				mu.Lock()
				defer mu.Unlock()
				warned = append(warned, msg+": "+err.Error())
			})
			s.syncFS = func() error {
				mu.Lock()
				defer mu.Unlock()
				calls++
				return tc.fail
			}
			s.round(s.whole)
			s.close()
			mu.Lock()
			defer mu.Unlock()
			if calls != tc.wantFS {
				t.Errorf("syncfs called %d times, want %d", calls, tc.wantFS)
			}
			if got := len(warned) > 0; got != tc.wantWarn || (got && !strings.Contains(warned[0], "syncfs")) {
				t.Errorf("warnings %q, want some: %v", warned, tc.wantWarn)
			}
		})
	}
}

// A syncfs that keeps failing is said once a streak, not every round: a
// busy runner runs a round every 20 ms.
func TestSyncerFailureSaidOnce(t *testing.T) {
	t.Parallel()
	root, meta := syncerSession(t)
	var said []string
	s := newSyncer(root, meta, nil, nil, true, func(msg string, err error) { said = append(said, msg) })
	defer s.close()
	var results []error
	s.syncFS = func() error {
		err := results[0]
		results = results[1:]
		return err
	}
	// round is called here directly, not by ringing: the syncer's own
	// goroutine stays idle, so nothing else reads said or results.
	results = []error{syscall.EIO, syscall.EIO, syscall.EIO, nil, syscall.EIO}
	for range 5 {
		s.round(true)
	}
	if len(said) != 2 {
		t.Errorf("said %d times over a streak of three failures, a success and a failure, want 2: %q", len(said), said)
	}
}

// syncerSession is a directory with the given subdirectories, its root and
// an event log, closed at the test's end.
func syncerSession(t *testing.T, dirs ...string) (*fsq.Root, *fsq.Log) {
	t.Helper()
	dir := t.TempDir()
	for _, d := range dirs {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	root, err := fsq.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	meta, _, err := root.OpenLog("meta.log", 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { meta.Close() })
	return root, meta
}

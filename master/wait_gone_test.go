package master

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
)

// A wait on a session whose directory is deleted meanwhile ends with
// ErrSessionMissing at once, not after the grace (here 10 minutes), and
// its message suggests nothing in the directory that is gone.
func TestWaitSessionDeleted(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s")
	for _, d := range protocol.Dirs {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	s.WaitForRunner = 10 * time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := s.Submit(ctx, "expr 1", SubmitOptions{CmdID: "g1"})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		once := false
		_, err := c.Wait(ctx, WaitOptions{Progress: func() {
			if !once {
				once = true
				close(started)
			}
		}})
		errc <- err
	}()
	<-started
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	err = <-errc
	if !errors.Is(err, ErrSessionMissing) || !strings.Contains(err.Error(), "is gone") || strings.Contains(err.Error(), "withdraw") {
		t.Fatalf("wait on a deleted session: %v", err)
	}
	if got := ErrorContext(err); got["cmd_id"] != "g1" || got["dir"] != dir {
		t.Errorf("context %v", got)
	}
}

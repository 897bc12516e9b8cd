package master

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
)

// What no file may hold is a usage error before anything is
// written: a lease under 1 ms (a ttl of 0 wrote a lease already expired,
// which stopped the runner), and options a command file cannot hold
// (SubmitOptions.Check, which a pool door runs before it chooses).
func TestNumbersRefusedBeforeWriting(t *testing.T) {
	s, dir := bareSession(t)
	defer s.Close()
	for _, ttl := range []time.Duration{0, -time.Second, time.Microsecond} {
		if _, err := s.WriteLease("x", ttl); !errors.Is(err, ErrUsage) {
			t.Errorf("ttl %v: %v, want a usage error", ttl, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, protocol.FileLease)); !os.IsNotExist(err) {
		t.Errorf("a lease was written: %v", err)
	}
	if _, err := s.WriteLease("x", time.Millisecond); err != nil {
		t.Errorf("1ms: %v", err)
	}
	for _, bad := range []SubmitOptions{{Timeout: -time.Second}, {MaxOutputBytes: -1}, {CancelPolicy: "nope"},
		{Kind: "Perl 5"}, {CmdID: "a/b"}, {TraceID: "a b"}, {Extra: map[string]any{"cmd_id": "x"}}} {
		if err := bad.Check(); !errors.Is(err, ErrUsage) {
			t.Errorf("%+v: %v, want a usage error", bad, err)
		}
	}
	if err := (SubmitOptions{Timeout: 500 * time.Millisecond, MaxOutputBytes: 4096, CancelPolicy: protocol.PolicyTerminateTool}).Check(); err != nil {
		t.Error(err)
	}
}

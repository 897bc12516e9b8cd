package pool

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/launch"
	"github.com/skillpilot/skillpilot/protocol"
)

// pool start --via local with a member's state/launch.out planted as a
// symlink to a file outside: that member is refused
// with the reason, nothing is written through the link, and the other
// member is launched.
func TestStartLocalLaunchOutSymlink(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "p")
	victim := filepath.Join(t.TempDir(), "victim")
	must(t, os.WriteFile(victim, []byte("theirs\n"), 0o600))
	bad := filepath.Join(dir, SessionName(1, 2))
	for _, d := range protocol.Dirs {
		must(t, os.MkdirAll(filepath.Join(bad, d), 0o700))
	}
	must(t, os.Symlink(victim, filepath.Join(bad, launch.FileLaunchOutput)))
	for i := 0; i < 2; i++ {
		member := filepath.Join(dir, SessionName(i, 2))
		t.Cleanup(func() { killLaunched(t, member) })
	}
	_, out, err := Start(ctx(t), dir, Options{Size: 2, Via: "local", RunnerArgs: []string{"--heartbeat", "200ms", "--kill-grace", "1s"}})
	if !errors.Is(err, fsq.ErrSymlink) {
		t.Errorf("Start: %v, want ErrSymlink for %s", err, SessionName(1, 2))
	}
	for _, l := range out {
		switch l.Session {
		case SessionName(0, 2):
			if l.Err != nil {
				t.Errorf("%s: %v", l.Session, l.Err)
			}
		case SessionName(1, 2):
			if !errors.Is(l.Err, fsq.ErrSymlink) {
				t.Errorf("%s: %v, want ErrSymlink", l.Session, l.Err)
			}
		}
	}
	if b, _ := os.ReadFile(victim); string(b) != "theirs\n" {
		t.Errorf("written through the symlink: %q", b)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

package launch

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/protocol"
)

// A session whose state/ is a symlink to a directory outside it, or
// whose state/launch.lock is a symlink to a file outside it: launch, read
// and stop refuse, and nothing outside is read, locked or written.
func TestLaunchFilesNotFollowed(t *testing.T) {
	t.Run("state dir", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "s")
		outside := t.TempDir()
		li, _ := json.Marshal(Info{ProtocolVersion: protocol.Version, Via: "local", JobID: "1@nowhere:1", Launches: 1})
		if err := os.WriteFile(filepath.Join(outside, "launch.json"), li, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, d := range protocol.Dirs {
			if d != protocol.DirState {
				if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := os.Symlink(outside, filepath.Join(dir, protocol.DirState)); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadLaunch(dir); !errors.Is(err, fsq.ErrLayout) {
			t.Errorf("ReadLaunch through a symlinked state/: %v, want ErrLayout", err)
		}
		if _, err := StopLaunched(ctx(t), dir, StopOptions{}); err == nil {
			t.Errorf("StopLaunched through a symlinked state/ succeeded")
		}
		if _, err := Launch(ctx(t), dir, Options{Via: "local", NoWait: true}); !errors.Is(err, fsq.ErrLayout) {
			t.Errorf("Launch through a symlinked state/: %v, want ErrLayout", err)
		}
		entries, _ := os.ReadDir(outside)
		if len(entries) != 1 {
			t.Errorf("files appeared outside the session: %v", entries)
		}
		if b, _ := os.ReadFile(filepath.Join(outside, "launch.json")); string(b) != string(li) {
			t.Errorf("launch.json outside the session was changed: %s", b)
		}
	})
	t.Run("lock file", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "s")
		for _, d := range protocol.Dirs {
			if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
				t.Fatal(err)
			}
		}
		outside := filepath.Join(t.TempDir(), "lock")
		if err := os.WriteFile(outside, []byte("theirs"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, filepath.Join(dir, fileLaunchLock)); err != nil {
			t.Fatal(err)
		}
		if _, err := Launch(ctx(t), dir, Options{Via: "local", NoWait: true}); !errors.Is(err, fsq.ErrSymlink) {
			t.Errorf("Launch with a symlinked launch.lock: %v, want ErrSymlink", err)
		}
		if _, err := os.Lstat(filepath.Join(dir, FileLaunch)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("launched with a symlinked lock: launch.json %v", err)
		}
	})
	// state/launch.out planted as a symlink or a hard link to a file
	// outside: launch --via local refuses with the
	// reason and writes nothing through it; no runner is started.
	for _, kind := range []string{"symlink", "hard link"} {
		t.Run("output "+kind, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "s")
			for _, d := range protocol.Dirs {
				if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
					t.Fatal(err)
				}
			}
			outside := filepath.Join(filepath.Dir(dir), "victim")
			if err := os.WriteFile(outside, []byte("theirs\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			plant := os.Symlink
			if kind == "hard link" {
				plant = os.Link
			}
			if err := plant(outside, filepath.Join(dir, FileLaunchOutput)); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { killLaunched(t, dir) })
			_, err := Launch(ctx(t), dir, Options{Via: "local", NoWait: true, RunnerArgs: []string{"--heartbeat", "200ms"}})
			want := fsq.ErrSymlink
			if kind == "hard link" {
				want = fsq.ErrHardLink
			}
			if !errors.Is(err, want) || !strings.Contains(err.Error(), FileLaunchOutput) {
				t.Errorf("Launch with %s at %s: %v, want %v naming the file", kind, FileLaunchOutput, err, want)
			}
			if _, err := ReadLaunch(dir); err == nil {
				killLaunched(t, dir)
				t.Errorf("a job was launched and recorded")
			}
			time.Sleep(300 * time.Millisecond) // A runner started anyway would have written by now.
			if b, _ := os.ReadFile(outside); string(b) != "theirs\n" {
				t.Errorf("written through the %s: %q", kind, b)
			}
		})
	}
}

package runner

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/skillpilot/skillpilot/protocol"
)

// Links the session root did not stop: a hard link
// planted at a file the runner appends to, locks or chmods; a bind mount
// over a session directory; result/ replaced by another user's directory.

// A hard link planted at log/meta.log, log/session.out or
// state/runner.lock before the runner starts: refused with a message saying
// what to remove, and the other name's file is neither written nor chmodded.
func TestLinksHardLinkAtStart(t *testing.T) {
	t.Parallel()
	for _, rel := range []string{protocol.FileMeta, protocol.FileSpool, protocol.FileLock} {
		t.Run(strings.ReplaceAll(rel, "/", "_"), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			h.noCheck = true
			target := filepath.Join(filepath.Dir(h.dir), "precious")
			must(t, os.WriteFile(target, []byte("precious\n"), 0o644))
			must(t, os.Chmod(target, 0o644))
			must(t, os.Link(target, filepath.Join(h.dir, rel)))
			r, err := openGuarded(t, h.cfg)
			if err == nil {
				r.release()
				t.Fatalf("Open with a hard link at %s succeeded", rel)
			}
			if !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), rel) || !strings.Contains(err.Error(), "remove it") {
				t.Errorf("Open: %v", err)
			}
			fi, _ := os.Stat(target)
			if b, _ := os.ReadFile(target); string(b) != "precious\n" || fi.Mode().Perm() != 0o644 {
				t.Errorf("the linked file was changed: %q %v", b, fi.Mode())
			}
		})
	}
}

// bindMount mounts src over dst (mount --bind), undone at the end of the
// test whatever happens.
func bindMount(t *testing.T, src, dst string) (unmount func()) {
	t.Helper()
	if err := syscall.Mount(src, dst, "", syscall.MS_BIND, ""); err != nil {
		t.Fatalf("mount --bind %s %s: %v (these tests run as root)", src, dst, err)
	}
	done := false
	unmount = func() {
		if !done {
			done = true
			if err := syscall.Unmount(dst, syscall.MNT_DETACH); err != nil {
				t.Errorf("umount %s: %v", dst, err)
			}
		}
	}
	t.Cleanup(unmount)
	return unmount
}

// A bind mount over output/ or log/ under a live runner: nothing is
// written into the mounted directory (RESOLVE_BENEATH alone crosses mount
// points); the runner reports the layout (phase error) and goes on once it
// is unmounted.
func TestLinksBindMountOverDir(t *testing.T) {
	t.Parallel()
	for _, d := range []string{protocol.DirOutput, protocol.DirLog, protocol.DirResult} {
		t.Run(d, func(t *testing.T) {
			t.Parallel()
			out := t.TempDir()
			h := newHarness(t).start()
			h.result(h.submit("expr 1"))
			unmount := bindMount(t, out, filepath.Join(h.dir, d))
			a := h.submit("puts hello; expr 2")
			h.waitFor("phase error naming "+d+"/", func() bool {
				st := h.state()
				return st.Phase == protocol.PhaseError && strings.Contains(st.Reason, d)
			})
			time.Sleep(5 * h.cfg.Heartbeat)
			assertEmptyBut(t, out)
			unmount()
			if r := h.result(a); r.Status != protocol.StatusOK || r.Value == nil || *r.Value != "2" {
				t.Fatalf("after the unmount: %+v", r)
			}
			h.waitFor("usable again", func() bool { return h.state().Phase == protocol.PhaseIdle })
			assertEmptyBut(t, out)
		})
	}
}

// result/ or output/ replaced by another user's mode-000 directory under a
// root runner with commands flowing: nothing is written into it (root
// passes its mode); the commands and results wait, and come once the
// directory is the runner's again.
func TestLinksForeignResultDir(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root (to chown a directory to another user), as CI has")
	}
	for _, d := range []string{protocol.DirResult, protocol.DirOutput} {
		t.Run(d, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t).start()
			h.result(h.submit("expr 1"))
			foreign := filepath.Join(h.dir, ".foreign")
			must(t, os.Mkdir(foreign, 0o700))
			must(t, os.Chown(foreign, 4242, 4242))
			must(t, os.Chmod(foreign, 0))
			res := filepath.Join(h.dir, d)
			must(t, unix.Renameat2(unix.AT_FDCWD, foreign, unix.AT_FDCWD, res, unix.RENAME_EXCHANGE))
			var names []string
			for i := 0; i < 5; i++ {
				names = append(names, h.submit("puts x; expr 3"))
			}
			h.waitFor("phase error", func() bool { return h.state().Phase == protocol.PhaseError })
			time.Sleep(5 * h.cfg.Heartbeat)
			if ents, _ := os.ReadDir(res); len(ents) != 0 {
				t.Fatalf("files written into another user's %s/: %v", d, ents)
			}
			must(t, unix.Renameat2(unix.AT_FDCWD, foreign, unix.AT_FDCWD, res, unix.RENAME_EXCHANGE))
			must(t, os.Remove(foreign))
			for _, n := range names {
				if r := h.result(n); r.Status != protocol.StatusOK || h.output(n) != "x\n" {
					t.Fatalf("%s: %+v", n, r)
				}
			}
		})
	}
}

// A file bind-mounted over log/meta.log, log/session.out or
// state/runner.lock before the runner starts: refused (it would append
// through the mount, or run without a lock of the session's), and the
// mounted file is untouched.
func TestLinksBindMountOverFileAtStart(t *testing.T) {
	t.Parallel()
	for _, rel := range []string{protocol.FileMeta, protocol.FileSpool, protocol.FileLock} {
		t.Run(strings.ReplaceAll(rel, "/", "_"), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			h.noCheck = true
			victim := filepath.Join(t.TempDir(), "victim")
			must(t, os.WriteFile(victim, []byte("precious\n"), 0o644))
			must(t, os.WriteFile(filepath.Join(h.dir, rel), nil, 0o600))
			bindMount(t, victim, filepath.Join(h.dir, rel))
			r, err := openGuarded(t, h.cfg)
			if err == nil {
				r.release()
				t.Errorf("Open with a bind mount at %s succeeded", rel)
			} else if !strings.Contains(err.Error(), rel) {
				t.Errorf("Open: %v, want the reason naming %s", err, rel)
			}
			fi, _ := os.Stat(victim)
			if b, _ := os.ReadFile(victim); string(b) != "precious\n" || fi.Mode().Perm() != 0o644 {
				t.Errorf("the mounted file was changed: %q %v", b, fi.Mode())
			}
		})
	}
}

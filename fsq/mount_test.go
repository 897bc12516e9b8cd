package fsq

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/skillpilot/skillpilot/internal/testenv"
)

// bindMount mounts src over dst (mount --bind) until the test ends; it
// skips the test where mounting is not allowed (not root), and fails it
// under CI=true, which runs as root.
func bindMount(t *testing.T, src, dst string) {
	t.Helper()
	if err := syscall.Mount(src, dst, "", syscall.MS_BIND, ""); err != nil {
		testenv.Unavailable(t, "mount --bind: %v (needs root)", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dst, syscall.MNT_DETACH); err != nil {
			t.Errorf("umount %s: %v", dst, err)
		}
	})
}

// A file with a bind mount over it is not read, neither through the root
// nor through a root opened inside it (Root.OpenRoot), by openat2 or by
// the component walk.
func TestRootRefusesBindMountedFile(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	os.Mkdir(filepath.Join(dir, "sub"), 0o700)
	os.WriteFile(filepath.Join(dir, "sub", "f"), []byte("session"), 0o600)
	os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o600)
	r := openTestRoot(t, dir)
	sub, err := r.OpenRoot("sub")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	bindMount(t, filepath.Join(outside, "secret"), filepath.Join(dir, "sub", "f"))
	defer ForceWalk(false)
	for _, walk := range []bool{false, true} {
		ForceWalk(walk)
		if b, _, err := r.ReadFile("sub/f", 100); !errors.Is(err, ErrLayout) {
			t.Errorf("walk %v: root read %q %v", walk, b, err)
		}
		if b, _, err := sub.ReadFile("f", 100); !errors.Is(err, ErrLayout) {
			t.Errorf("walk %v: sub-root read %q %v", walk, b, err)
		}
		if _, err := sub.Lstat("f"); !errors.Is(err, ErrLayout) {
			t.Errorf("walk %v: sub-root Lstat: %v", walk, err)
		}
	}
}

// RemoveAll does not descend into a directory with a bind mount over it:
// nothing of the mounted tree is removed.
func TestRootRemoveAllStopsAtMount(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(dir, "d", "m"), 0o700)
	os.WriteFile(filepath.Join(dir, "d", "x"), nil, 0o600)
	os.WriteFile(filepath.Join(outside, "keep"), []byte("keep"), 0o600)
	r := openTestRoot(t, dir)
	bindMount(t, outside, filepath.Join(dir, "d", "m"))
	if err := r.RemoveAll("d"); !errors.Is(err, ErrLayout) {
		t.Errorf("RemoveAll over a mount point: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(outside, "keep")); err != nil || string(b) != "keep" {
		t.Errorf("the mounted tree was changed: %q %v", b, err)
	}
}

package fsq

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// WriteAtomic gives the file exactly the mode asked for, whatever the
// umask narrows (the chmod is skipped only when the umask took nothing).
func TestRootWriteAtomicModeUnderUmask(t *testing.T) {
	dir := t.TempDir()
	r, err := OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	for _, tc := range []struct {
		umask int
		perm  os.FileMode
	}{{0o077, 0o640}, {0o022, 0o600}, {0o022, 0o640}, {0o027, 0o660}, {0, 0o600}} {
		syscall.Umask(tc.umask)
		for _, d := range []Durability{Volatile, Durable} {
			if err := r.WriteAtomic("f", []byte("x"), tc.perm, d); err != nil {
				t.Fatal(err)
			}
			if err := r.WriteAtomicVia(".", "g", []byte("x"), tc.perm); err != nil {
				t.Fatal(err)
			}
			for _, n := range []string{"f", "g"} {
				fi, err := os.Lstat(filepath.Join(dir, n))
				if err != nil {
					t.Fatal(err)
				}
				if fi.Mode().Perm() != tc.perm {
					t.Errorf("umask %o, perm %o: %s has mode %o", tc.umask, tc.perm, n, fi.Mode().Perm())
				}
			}
		}
	}
}

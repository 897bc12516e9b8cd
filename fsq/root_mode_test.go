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

// MkdirPerm gives a directory exactly its mode whatever the umask, and
// keeps the setgid bit a group-shared parent passes on; SetMode a file
// made by OpenFile.
func TestRootMkdirPermAndSetModeUnderUmask(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o770|os.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	r, err := OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	if err := r.MkdirPerm("shared", 0o770); err != nil {
		t.Fatal(err)
	}
	if err := r.MkdirPerm("private", 0o700); err != nil {
		t.Fatal(err)
	}
	if err := r.MkdirPerm("shared", 0o700); !os.IsExist(err) {
		t.Errorf("an existing directory: %v, want ErrExist", err)
	}
	f, err := r.OpenFile("shared/f", os.O_WRONLY|os.O_CREATE, 0o660)
	if err != nil {
		t.Fatal(err)
	}
	if err := SetMode(f, 0o660); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for n, want := range map[string]os.FileMode{"shared": 0o770 | os.ModeSetgid | os.ModeDir, "private": 0o700 | os.ModeSetgid | os.ModeDir, "shared/f": 0o660} {
		fi, err := os.Lstat(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode() & (os.ModePerm | os.ModeSetgid | os.ModeDir); got != want {
			t.Errorf("%s: mode %v, want %v", n, got, want)
		}
	}
}

package fsq

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) {
	if os.Getenv("FSQ_CLAIM_HELPER") != "" {
		claimHelper()
		return
	}
	os.Exit(m.Run())
}

// claimHelper claims, through a root on $DIR, every file it can from
// queue/ into inflight/ and prints the names it won.
func claimHelper() {
	r, err := OpenRoot(os.Getenv("DIR"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for {
		names, _ := r.ReadNames("queue")
		if len(names) == 0 {
			return
		}
		sort.Strings(names)
		for _, n := range names {
			ok, err := r.Claim("queue/"+n, "inflight/"+n)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			if ok {
				fmt.Println(n)
			}
		}
	}
}

// Several processes race to claim the same files by rename (Root.Claim):
// each file is won by exactly one of them, and losing is not an error.
func TestClaimRaceBetweenProcesses(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "queue"), filepath.Join(dir, "inflight")
	os.Mkdir(src, 0o700)
	os.Mkdir(dst, 0o700)
	const files, procs = 2000, 4
	for i := 0; i < files; i++ {
		os.WriteFile(filepath.Join(src, fmt.Sprintf("f%05d", i)), []byte("x"), 0o600)
	}
	var outs []*bytes.Buffer
	var cmds []*exec.Cmd
	for p := 0; p < procs; p++ {
		c := exec.Command(os.Args[0], "-test.run=^$")
		c.Env = append(os.Environ(), "FSQ_CLAIM_HELPER=1", "DIR="+dir)
		b := &bytes.Buffer{}
		c.Stdout, c.Stderr = b, os.Stderr
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		outs, cmds = append(outs, b), append(cmds, c)
	}
	won := map[string]int{}
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("helper: %v", err)
		}
		for _, n := range strings.Fields(outs[i].String()) {
			won[n]++
		}
	}
	if len(won) != files {
		t.Fatalf("%d files claimed, want %d", len(won), files)
	}
	for n, c := range won {
		if c != 1 {
			t.Errorf("%s claimed %d times", n, c)
		}
	}
	if names, _ := readNames(dst); len(names) != files {
		t.Errorf("%d files in inflight/, want %d", len(names), files)
	}
}

// A claim of a file that is gone is a lost race: false, and no error.
func TestClaimLostRace(t *testing.T) {
	r := openTestRoot(t, t.TempDir())
	ok, err := r.Claim("gone", "x")
	if ok || err != nil {
		t.Fatalf("claim of a missing file: %v %v", ok, err)
	}
}

// readNames lists the directory dir through a root of it.
func readNames(dir string) ([]string, error) {
	r, err := OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.ReadNames(".")
}

// openTestRoot opens a root on dir, closed when the test ends.
func openTestRoot(t *testing.T, dir string) *Root {
	t.Helper()
	r, err := OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// A reader polling the file while it is replaced never sees a mix, and
// no temporary file is left.
func TestWriteAtomicNeverPartial(t *testing.T) {
	for _, via := range []string{"root"} {
		t.Run(via, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "state.json")
			r := openTestRoot(t, dir)
			write := func(data []byte, d Durability) error { return r.WriteAtomic("state.json", data, 0o600, d) }
			a, b := bytes.Repeat([]byte("a"), 1<<16), bytes.Repeat([]byte("b"), 1<<17)
			if err := write(a, Durable); err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				for i := 0; i < 200; i++ {
					d := []Durability{Durable, FileSynced, Volatile}[i%3]
					if err := write([][]byte{a, b}[i%2], d); err != nil {
						t.Error(err)
						return
					}
				}
			}()
			for {
				select {
				case <-done:
					names, _ := os.ReadDir(dir)
					if len(names) != 1 {
						t.Errorf("temp files left: %v", names)
					}
					return
				default:
				}
				got, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, a) && !bytes.Equal(got, b) {
					t.Fatalf("read a partial file of %d bytes", len(got))
				}
			}
		})
	}
}

// ReadFile reads a regular file up to its limit, and refuses a bigger
// file, a symlink, a directory and a FIFO (without blocking on it): by
// path and through a root.
func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "f"), []byte("hello"), 0o600)
	os.Symlink(filepath.Join(dir, "f"), filepath.Join(dir, "l"))
	os.Mkdir(filepath.Join(dir, "d"), 0o700)
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := openTestRoot(t, dir)
	for _, via := range []string{"root"} {
		t.Run(via, func(t *testing.T) {
			read := func(name string, limit int64) ([]byte, error) {
				b, _, err := r.ReadFile(name, limit)
				return b, err
			}
			if b, err := read("f", 5); err != nil || string(b) != "hello" {
				t.Fatalf("%q %v", b, err)
			}
			if _, err := read("f", 4); err != ErrTooLarge {
				t.Errorf("limit: %v", err)
			}
			if _, err := read("l", 100); !errors.Is(err, ErrSymlink) {
				t.Errorf("symlink: %v", err)
			}
			if _, err := read("d", 100); err == nil {
				t.Error("a directory was read")
			}
			if _, err := read("fifo", 100); !errors.Is(err, ErrNotRegular) {
				t.Errorf("FIFO: %v", err)
			}
		})
	}
}

// Corruptions of the log's tail, each repaired when Root.OpenLog opens it.
func TestLogRepair(t *testing.T) {
	good := "{\"a\":1}\n{\"a\":2}\n"
	for _, tc := range []struct {
		name, content, want, torn string
	}{
		{"clean", good, good, ""},
		{"empty", "", "", ""},
		{"torn line", good + "{\"a\":", good, "{\"a\":"},
		{"garbage terminated", good + "{\"a\n", good, "{\"a\n"},
		{"only torn", "{\"a", "", "{\"a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			r := openTestRoot(t, dir)
			p := filepath.Join(dir, "meta.log")
			os.WriteFile(p, []byte(tc.content), 0o600)
			l, torn, err := r.OpenLog("meta.log", 0o600)
			if err != nil {
				t.Fatal(err)
			}
			if string(torn) != tc.torn {
				t.Errorf("torn = %q, want %q", torn, tc.torn)
			}
			if err := l.Append(map[string]int{"a": 3}); err != nil {
				t.Fatal(err)
			}
			l.Close()
			got, _ := os.ReadFile(p)
			if want := tc.want + "{\"a\":3}\n"; string(got) != want {
				t.Errorf("log = %q, want %q", got, want)
			}
			// Reopening a repaired log changes nothing.
			l, torn, _ = r.OpenLog("meta.log", 0o600)
			l.Close()
			if len(torn) != 0 {
				t.Errorf("second open repaired %q", torn)
			}
		})
	}
}

func TestWatchInotifyAndPoll(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, inotify := range []bool{true, false} {
		t.Run("inotify="+strconv.FormatBool(inotify), func(t *testing.T) {
			dir := t.TempDir()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			w := Watch(ctx, []string{dir}, 50*time.Millisecond, inotify, log)
			if w.Inotify != inotify {
				t.Fatalf("Inotify = %v", w.Inotify)
			}
			os.WriteFile(filepath.Join(dir, "x"), nil, 0o600)
			deadline := time.After(30 * time.Second)
			for {
				select {
				case c := <-w.Changes:
					if !inotify {
						t.Fatal("a change without inotify")
					}
					if c.Name == "x" && c.Dir == dir {
						return
					}
				case <-w.Rescan:
					// A poller lists the directory when the bell rings: the
					// ring counts only once that listing shows the file.
					if names, _ := readNames(dir); !inotify && len(names) == 1 && names[0] == "x" {
						return
					}
				case <-deadline:
					t.Fatal("no notification that shows the file")
				}
			}
		})
	}
	// Polling keeps ringing: a file written after the first ring is seen
	// at a later one.
	t.Run("poll rings again", func(t *testing.T) {
		dir := t.TempDir()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		w := Watch(ctx, []string{dir}, 20*time.Millisecond, false, log)
		<-w.Rescan
		os.WriteFile(filepath.Join(dir, "late"), nil, 0o600)
		deadline := time.After(30 * time.Second)
		for {
			select {
			case <-w.Rescan:
				if names, _ := readNames(dir); len(names) == 1 {
					return
				}
			case <-deadline:
				t.Fatal("the poll bell stopped ringing")
			}
		}
	})
}

// RenameNoReplace never replaces an existing target (a file or a dangling
// symlink), by path and through a root, on renameat2 and on the link(2)
// fallback (ForceLink, as on NFS).
func TestRenameNoReplace(t *testing.T) {
	for _, via := range []string{"root", "root-link"} {
		t.Run(via, func(t *testing.T) {
			dir := t.TempDir()
			rename := openTestRoot(t, dir).RenameNoReplace
			if via == "root-link" {
				forceLink.Store(true)
				defer forceLink.Store(false)
			}
			os.WriteFile(filepath.Join(dir, "a"), []byte("new"), 0o600)
			os.WriteFile(filepath.Join(dir, "b"), []byte("old"), 0o600)
			if err := rename("a", "b"); !errors.Is(err, os.ErrExist) {
				t.Fatalf("over an existing file: %v", err)
			}
			if got, _ := os.ReadFile(filepath.Join(dir, "b")); string(got) != "old" {
				t.Fatalf("target replaced: %q", got)
			}
			os.Symlink(filepath.Join(dir, "nowhere"), filepath.Join(dir, "l"))
			if err := rename("a", "l"); !errors.Is(err, os.ErrExist) {
				t.Fatalf("over a dangling symlink: %v", err)
			}
			if _, err := os.Lstat(filepath.Join(dir, "nowhere")); !os.IsNotExist(err) {
				t.Fatalf("created through the symlink: %v", err)
			}
			if err := rename("a", "c"); err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(filepath.Join(dir, "c")); string(got) != "new" {
				t.Fatalf("moved content %q", got)
			}
			if _, err := os.Lstat(filepath.Join(dir, "a")); !os.IsNotExist(err) {
				t.Fatalf("source left behind: %v", err)
			}
		})
	}
}

// Files planted where a writer expects its own regular file are refused
// without blocking (a FIFO) and without following (a symlink); CreateNew
// and WriteAtomicVia replace a planted symlink instead of writing through
// it.
func TestOpenRefusesPlantedFiles(t *testing.T) {
	dir := t.TempDir()
	r := openTestRoot(t, dir)
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, "target")
	os.WriteFile(target, []byte("keep\n"), 0o600)
	link := filepath.Join(dir, "link")
	os.Symlink(target, link)
	if _, err := r.OpenAppend("fifo", 0o600); !errors.Is(err, ErrNotRegular) {
		t.Errorf("OpenAppend(fifo): %v", err)
	}
	if _, err := r.OpenAppend("link", 0o600); !errors.Is(err, ErrSymlink) {
		t.Errorf("OpenAppend(symlink): %v", err)
	}
	if _, _, err := r.OpenLog("fifo", 0o600); !errors.Is(err, ErrNotRegular) {
		t.Errorf("OpenLog(fifo): %v", err)
	}
	if _, _, err := r.OpenLog("link", 0o600); !errors.Is(err, ErrSymlink) {
		t.Errorf("OpenLog(symlink): %v", err)
	}
	if _, err := r.OpenRegular("fifo"); !errors.Is(err, ErrNotRegular) {
		t.Errorf("OpenRegular(fifo): %v", err)
	}
	if _, err := r.OpenRegular("link"); !errors.Is(err, ErrSymlink) {
		t.Errorf("OpenRegular(symlink): %v", err)
	}
	// A hard link to a file elsewhere is neither appended to nor chmodded.
	os.Link(target, filepath.Join(dir, "hard"))
	if _, err := r.OpenAppend("hard", 0o600); !errors.Is(err, ErrHardLink) {
		t.Errorf("OpenAppend(hard link): %v", err)
	}
	if _, _, err := r.OpenLog("hard", 0o600); !errors.Is(err, ErrHardLink) {
		t.Errorf("OpenLog(hard link): %v", err)
	}
	if err := r.Chmod("hard", 0o666); !errors.Is(err, ErrHardLink) {
		t.Errorf("Chmod(hard link): %v", err)
	}
	if fi, _ := os.Stat(target); fi.Mode().Perm() != 0o600 {
		t.Errorf("Chmod changed the linked file: %v", fi.Mode())
	}
	f, err := r.CreateNew("link", 0o600)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("mine")
	f.Close()
	if got, _ := os.ReadFile(target); string(got) != "keep\n" {
		t.Errorf("CreateNew wrote through a symlink: %q", got)
	}
	if got, _ := os.ReadFile(link); string(got) != "mine" {
		t.Errorf("CreateNew content %q", got)
	}
	// CreateNew creates exclusively: a file in the way is replaced by a
	// new one, never opened.
	f, err = r.CreateNew("link", 0o600)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if got, err := os.ReadFile(link); err != nil || len(got) != 0 {
		t.Errorf("CreateNew over a file: %q %v", got, err)
	}
	// WriteAtomicVia replaces a planted symlink instead of writing through
	// it, and leaves nothing in tmp/.
	os.Mkdir(filepath.Join(dir, "tmp"), 0o700)
	for _, via := range []string{"root"} {
		os.Remove(link)
		os.Symlink(target, link)
		write := func() error { return r.WriteAtomicVia("tmp", "link", []byte("x"), 0o600) }
		if err := write(); err != nil {
			t.Fatal(via, err)
		}
		if got, _ := os.ReadFile(target); string(got) != "keep\n" {
			t.Errorf("WriteAtomicVia (%s) wrote through a symlink: %q", via, got)
		}
		if fi, err := os.Lstat(link); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("WriteAtomicVia (%s) left %v %v", via, fi, err)
		}
		if names, _ := readNames(filepath.Join(dir, "tmp")); len(names) != 0 {
			t.Errorf("temp files left in tmp (%s): %v", via, names)
		}
	}
}

// The filesystem under a root is named (Statfs, FSTypeOf); a test's
// temporary directory is not a network filesystem.
func TestFSType(t *testing.T) {
	r := openTestRoot(t, t.TempDir())
	var st unix.Statfs_t
	if err := r.Statfs(".", &st); err != nil {
		t.Fatal(err)
	}
	if name, network := FSTypeOf(&st); name == "" || network {
		t.Fatalf("%s %v", name, network)
	}
}

// Spares: a taken spare is an empty file under SparePrefix in its
// directory; Close removes the spares not taken; a directory swapped for
// a symlink gets no spare (nothing is made outside the session).
func TestRootSpares(t *testing.T) {
	dir := t.TempDir()
	r := openTestRoot(t, dir)
	os.Mkdir(filepath.Join(dir, "tmp"), 0o700)
	sp := r.NewSpares("tmp", 3, 0o600)
	f, err := sp.Take()
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := f.Stat(); err != nil || fi.Size() != 0 || !fi.Mode().IsRegular() ||
		filepath.Dir(f.Name()) != filepath.Join(dir, "tmp") || !strings.HasPrefix(filepath.Base(f.Name()), SparePrefix) {
		t.Fatalf("spare %s: %v %v", f.Name(), fi, err)
	}
	f.WriteString("out")
	f.Close()
	if err := r.Rename(r.RelOf(f.Name()), "out"); err != nil {
		t.Fatal(err)
	}
	sp.Close()
	if names, _ := r.ReadNames("tmp"); len(names) != 0 {
		t.Errorf("spares left after Close: %v", names)
	}

	outside := t.TempDir()
	os.Symlink(outside, filepath.Join(dir, "away"))
	sp = r.NewSpares("away", 2, 0o600)
	defer sp.Close()
	if f, err := sp.Take(); !errors.Is(err, ErrLayout) {
		t.Errorf("a spare in a symlinked directory: %v %v", f, err)
	}
	if names, _ := readNames(outside); len(names) != 0 {
		t.Errorf("spares made outside the session: %v", names)
	}
}

// TouchDir sets a directory's modification time to now; on a symlink it
// touches the link, never what it points to.
func TestRootTouchDir(t *testing.T) {
	dir := t.TempDir()
	r := openTestRoot(t, dir)
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	for _, n := range []string{"d", "target"} {
		os.Mkdir(filepath.Join(dir, n), 0o700)
		os.Chtimes(filepath.Join(dir, n), old, old)
	}
	os.Symlink(filepath.Join(dir, "target"), filepath.Join(dir, "l"))
	if err := r.TouchDir("d"); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(filepath.Join(dir, "d")); !fi.ModTime().After(old.Add(30 * time.Minute)) {
		t.Errorf("mtime after TouchDir: %v", fi.ModTime())
	}
	r.TouchDir("l")
	if fi, _ := os.Stat(filepath.Join(dir, "target")); !fi.ModTime().Equal(old) {
		t.Errorf("TouchDir followed a symlink: target's mtime %v", fi.ModTime())
	}
}

// Listing the root's own directory twice lists it twice: each listing
// reads a file of its own, not one sharing the root's offset.
func TestRootListsItselfAgain(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"a", "b"} {
		if err := os.Mkdir(filepath.Join(dir, n), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	r, err := OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i := 0; i < 3; i++ {
		names, err := r.ReadNames(".")
		entries, derr := r.ReadDir(".")
		if err != nil || derr != nil || len(names) != 2 || len(entries) != 2 {
			t.Fatalf("listing %d: %v %v, %d entries (%v %v)", i, names, err, len(entries), derr, entries)
		}
	}
}

// An FSSync flushes the filesystem the session is on, through a file
// description of its own.
func TestFSSync(t *testing.T) {
	t.Parallel()
	r, err := OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	h, err := r.NewFSSync()
	if err != nil {
		t.Fatalf("NewFSSync on this kernel: %v", err)
	}
	defer h.Close()
	if err := r.WriteAtomic("x", []byte("x"), 0o600, Volatile); err != nil {
		t.Fatal(err)
	}
	if err := h.Sync(); err != nil {
		t.Fatalf("syncfs of an open session: %v", err)
	}
}

func TestKernelAtLeast(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		rel  string
		want bool
	}{
		{"5.8.0", true}, {"5.7.19", false}, {"6.1.0-18-amd64", true}, {"4.19.0", false},
		{"5.10", true}, {"10.0", true}, {"", false}, {"five", false}, {"5", false},
	} {
		if got := kernelAtLeast(tc.rel, 5, 8); got != tc.want {
			t.Errorf("kernelAtLeast(%q, 5, 8) = %v, want %v", tc.rel, got, tc.want)
		}
	}
}

// Overwrite writes in place over a plain file no longer than the data
// (the same inode after) and refuses everything else, changing nothing:
// a missing file, a longer one, a symlink, a FIFO (without blocking on
// it), a directory, a file with a second link.
func TestOverwrite(t *testing.T) {
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	os.WriteFile(p("short"), []byte("12\n"), 0o600)
	os.WriteFile(p("long"), []byte("this is longer than the record\n"), 0o600)
	os.WriteFile(p("target"), []byte("x\n"), 0o600)
	os.Symlink(p("target"), p("link"))
	os.Link(p("target"), p("hard"))
	os.Mkdir(p("d"), 0o700)
	if err := syscall.Mkfifo(p("fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := openTestRoot(t, dir)
	rec := []byte("1234      \n")
	for _, tc := range []struct {
		name string
		want error // nil: written in place
	}{
		{"short", nil},
		{"missing", fs.ErrNotExist},
		{"long", ErrTooLarge},
		{"link", ErrSymlink},
		{"fifo", ErrNotRegular},
		{"hard", ErrHardLink},
		{"d", nil}, // Refused by the open; errors.Is below is skipped for it.
	} {
		t.Run(tc.name, func(t *testing.T) {
			read := func() ([]byte, error) {
				if tc.name == "fifo" {
					return nil, nil // A read would block: its content is not the point.
				}
				return os.ReadFile(p(tc.name))
			}
			before, berr := read()
			var st0 syscall.Stat_t
			syscall.Lstat(p(tc.name), &st0)
			err := r.Overwrite(tc.name, rec)
			switch {
			case tc.name == "d":
				if err == nil {
					t.Fatal("a directory was written")
				}
				return
			case tc.want == nil && err != nil:
				t.Fatal(err)
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			after, aerr := read()
			if tc.want != nil {
				if string(after) != string(before) || (berr == nil) != (aerr == nil) {
					t.Errorf("refused, yet %s changed: %q -> %q", tc.name, before, after)
				}
				return
			}
			var st1 syscall.Stat_t
			syscall.Lstat(p(tc.name), &st1)
			if string(after) != string(rec) || st1.Ino != st0.Ino {
				t.Errorf("got %q (inode %d -> %d), want %q in place", after, st0.Ino, st1.Ino, rec)
			}
		})
	}
	if b, _ := os.ReadFile(p("target")); string(b) != "x\n" {
		t.Errorf("the file behind the symlink and the hard link was written: %q", b)
	}
}

// WriteAtomicReaped replaces the file as WriteAtomic does, but the old
// one is exchanged into the temporary name and removed by the reaper:
// a reader holding the old file reads it whole, nothing is left in the
// temporary directory once the reaper closes, the file behind a planted
// symlink is never written, and a missing target or no reaper is a plain
// replace.
func TestWriteAtomicReaped(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"tmp", "state"} {
		os.Mkdir(filepath.Join(dir, d), 0o700)
	}
	r := openTestRoot(t, dir)
	rp := r.NewReaper(4)
	p := filepath.Join(dir, "state", "s.json")
	if err := r.WriteAtomicReaped("tmp", "state/s.json", []byte("one"), 0o600, rp); err != nil { // Missing: a rename.
		t.Fatal(err)
	}
	old, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	var st0 syscall.Stat_t
	syscall.Lstat(p, &st0)
	for _, content := range []string{"two", "three"} {
		if err := r.WriteAtomicReaped("tmp", "state/s.json", []byte(content), 0o600, rp); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(p); string(b) != content {
			t.Fatalf("s.json = %q, want %q", b, content)
		}
	}
	if b, _ := io.ReadAll(old); string(b) != "one" {
		t.Errorf("a reader of the old file read %q, want %q", b, "one")
	}
	var st1 syscall.Stat_t
	syscall.Lstat(p, &st1)
	if st1.Ino == st0.Ino {
		t.Error("the file was written in place, not replaced")
	}
	// A symlink planted at the target is exchanged away and removed, its
	// target untouched.
	outside := filepath.Join(t.TempDir(), "outside")
	os.WriteFile(outside, []byte("keep"), 0o600)
	os.Remove(p)
	os.Symlink(outside, p)
	if err := r.WriteAtomicReaped("tmp", "state/s.json", []byte("four"), 0o600, rp); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("s.json after a planted symlink: %v %v", fi, err)
	}
	if b, _ := os.ReadFile(outside); string(b) != "keep" {
		t.Errorf("the symlink's target was written: %q", b)
	}
	rp.Close()
	if names, _ := os.ReadDir(filepath.Join(dir, "tmp")); len(names) != 0 {
		t.Errorf("tmp/ after the reaper closed: %v", names)
	}
	rp.Reap("state/s.json") // After Close: removed at once, not lost.
	if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Reap after Close did not remove: %v", err)
	}
	if err := r.WriteAtomicReaped("tmp", "state/s.json", []byte("five"), 0o600, nil); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "five" {
		t.Errorf("without a reaper: %q", b)
	}
}

// The file WriteAtomicReaped replaces reaches its reaper under the
// temporary name, holding the old content: the rename deleted nothing.
func TestWriteAtomicReapedHandsOverTheOldFile(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "tmp"), 0o700)
	os.WriteFile(filepath.Join(dir, "f"), []byte("old"), 0o600)
	r := openTestRoot(t, dir)
	var got []string
	rp := newReaper(1, func(name string) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		got = append(got, fmt.Sprintf("%s:%s:%v", filepath.Dir(name), b, err))
		os.Remove(filepath.Join(dir, name))
	})
	if err := r.WriteAtomicReaped("tmp", "f", []byte("new"), 0o600, rp); err != nil {
		t.Fatal(err)
	}
	rp.Close()
	if want := []string{"tmp:old:<nil>"}; !slices.Equal(got, want) {
		t.Errorf("reaped %q, want %q", got, want)
	}
}

// Where the filesystem cannot exchange (NFS), WriteAtomicReaped replaces
// the file by a rename, and Exchange says errors.ErrUnsupported.
func TestWriteAtomicReapedWithoutExchange(t *testing.T) {
	noExchange.Store(true)
	defer noExchange.Store(false)
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "tmp"), 0o700)
	os.WriteFile(filepath.Join(dir, "f"), []byte("old"), 0o600)
	r := openTestRoot(t, dir)
	var reaped []string
	rp := newReaper(1, func(name string) { reaped = append(reaped, name) })
	if err := r.WriteAtomicReaped("tmp", "f", []byte("new"), 0o600, rp); err != nil {
		t.Fatal(err)
	}
	rp.Close()
	if b, _ := os.ReadFile(filepath.Join(dir, "f")); string(b) != "new" || len(reaped) != 0 {
		t.Errorf("f = %q, reaped %q; want new, nothing reaped", b, reaped)
	}
	if err := r.Exchange("f", "tmp"); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Exchange without support: %v", err)
	}
}

// A directory planted at the target of WriteAtomicReaped is never moved:
// the exchange is undone, the write fails as a rename over a directory
// does, and the directory and what it holds stay where they were.
func TestWriteAtomicReapedLeavesADirectory(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "tmp"), 0o700)
	os.MkdirAll(filepath.Join(dir, "state.json", "sub"), 0o700)
	os.WriteFile(filepath.Join(dir, "state.json", "sub", "f"), []byte("x"), 0o600)
	r := openTestRoot(t, dir)
	var reaped []string
	rp := newReaper(1, func(name string) { reaped = append(reaped, name) })
	err := r.WriteAtomicReaped("tmp", "state.json", []byte("{}"), 0o600, rp)
	rp.Close()
	if err == nil {
		t.Fatal("a write over a directory succeeded")
	}
	if b, err := os.ReadFile(filepath.Join(dir, "state.json", "sub", "f")); err != nil || string(b) != "x" {
		t.Errorf("the planted directory's file: %q %v", b, err)
	}
	if names, _ := os.ReadDir(filepath.Join(dir, "tmp")); len(names) != 0 || len(reaped) != 0 {
		t.Errorf("tmp/ holds %v, reaped %q: want nothing", names, reaped)
	}
}

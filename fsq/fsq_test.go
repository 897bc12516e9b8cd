package fsq

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	if os.Getenv("FSQ_CLAIM_HELPER") != "" {
		claimHelper()
		return
	}
	os.Exit(m.Run())
}

// claimHelper claims every file it can from $SRC into $DST/<name> and
// prints the names it won.
func claimHelper() {
	src, dst := os.Getenv("SRC"), os.Getenv("DST")
	for {
		f, _ := os.Open(src)
		names, _ := f.Readdirnames(-1)
		f.Close()
		if len(names) == 0 {
			return
		}
		sort.Strings(names)
		for _, n := range names {
			ok, err := Claim(filepath.Join(src, n), filepath.Join(dst, n))
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

// Several processes race to claim the same files by rename: each file is
// won by exactly one of them, and losing is not an error.
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
		c.Env = append(os.Environ(), "FSQ_CLAIM_HELPER=1", "SRC="+src, "DST="+dst)
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
}

func TestClaimLostRace(t *testing.T) {
	dir := t.TempDir()
	ok, err := Claim(filepath.Join(dir, "gone"), filepath.Join(dir, "x"))
	if ok || err != nil {
		t.Fatalf("claim of a missing file: %v %v", ok, err)
	}
}

// A reader polling the file while it is replaced never sees a mix.
func TestWriteAtomicNeverPartial(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "state.json")
	a, b := bytes.Repeat([]byte("a"), 1<<16), bytes.Repeat([]byte("b"), 1<<17)
	WriteAtomic(p, a, 0o600, Durable)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 200; i++ {
			d := []Durability{Durable, FileSynced, Volatile}[i%3]
			if err := WriteAtomic(p, [][]byte{a, b}[i%2], 0o600, d); err != nil {
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
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	os.WriteFile(p, []byte("hello"), 0o600)
	if b, _, err := ReadFile(p, 5); err != nil || string(b) != "hello" {
		t.Fatalf("%q %v", b, err)
	}
	if _, _, err := ReadFile(p, 4); err != ErrTooLarge {
		t.Fatalf("limit: %v", err)
	}
	os.Symlink(p, filepath.Join(dir, "l"))
	if _, _, err := ReadFile(filepath.Join(dir, "l"), 100); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Fatalf("symlink: %v", err)
	}
	if _, _, err := ReadFile(dir, 100); err == nil {
		t.Fatal("a directory was read")
	}
}

// Corruptions of the log's tail, each repaired at open.
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
			p := filepath.Join(t.TempDir(), "meta.log")
			os.WriteFile(p, []byte(tc.content), 0o600)
			l, torn, err := OpenLog(p, 0o600)
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
			l, torn, _ = OpenLog(p, 0o600)
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
					if names, _ := ReadNames(dir); !inotify && len(names) == 1 && names[0] == "x" {
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
				if names, _ := ReadNames(dir); len(names) == 1 {
					return
				}
			case <-deadline:
				t.Fatal("the poll bell stopped ringing")
			}
		}
	})
}

// RenameNoReplace never replaces an existing target, on every path.
func TestRenameNoReplace(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	os.WriteFile(a, []byte("new"), 0o600)
	os.WriteFile(b, []byte("old"), 0o600)
	if err := RenameNoReplace(a, b); !errors.Is(err, os.ErrExist) {
		t.Fatalf("over an existing file: %v", err)
	}
	if got, _ := os.ReadFile(b); string(got) != "old" {
		t.Fatalf("target replaced: %q", got)
	}
	os.Symlink(filepath.Join(dir, "nowhere"), filepath.Join(dir, "l"))
	if err := RenameNoReplace(a, filepath.Join(dir, "l")); !errors.Is(err, os.ErrExist) {
		t.Fatalf("over a dangling symlink: %v", err)
	}
	if err := RenameNoReplace(a, filepath.Join(dir, "c")); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "c")); string(got) != "new" {
		t.Fatalf("moved content %q", got)
	}
	if _, err := os.Lstat(a); !os.IsNotExist(err) {
		t.Fatalf("source left behind: %v", err)
	}
}

// Files planted where a writer expects its own regular file are refused
// without blocking (a FIFO) and without following (a symlink).
func TestOpenRefusesPlantedFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, "target")
	os.WriteFile(target, []byte("keep\n"), 0o600)
	link := filepath.Join(dir, "link")
	os.Symlink(target, link)
	if _, err := OpenAppend(fifo, 0o600); !errors.Is(err, ErrNotRegular) {
		t.Errorf("OpenAppend(fifo): %v", err)
	}
	if _, err := OpenAppend(link, 0o600); !errors.Is(err, ErrSymlink) {
		t.Errorf("OpenAppend(symlink): %v", err)
	}
	if _, _, err := OpenLog(fifo, 0o600); !errors.Is(err, ErrNotRegular) {
		t.Errorf("OpenLog(fifo): %v", err)
	}
	if _, _, err := OpenLog(link, 0o600); !errors.Is(err, ErrSymlink) {
		t.Errorf("OpenLog(symlink): %v", err)
	}
	if _, _, err := ReadFile(fifo, 10); !errors.Is(err, ErrNotRegular) {
		t.Errorf("ReadFile(fifo): %v", err)
	}
	f, err := CreateNew(link, 0o600)
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
	// WriteAtomicVia replaces a planted symlink instead of writing through it.
	os.Remove(link)
	os.Symlink(target, link)
	tmp := filepath.Join(dir, "tmp")
	os.Mkdir(tmp, 0o700)
	if err := WriteAtomicVia(tmp, link, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(target); string(got) != "keep\n" {
		t.Errorf("WriteAtomicVia wrote through a symlink: %q", got)
	}
	if names, _ := ReadNames(tmp); len(names) != 0 {
		t.Errorf("temp files left in tmp: %v", names)
	}
}

func TestFSType(t *testing.T) {
	name, network, err := FSType(t.TempDir())
	if err != nil || name == "" || network {
		t.Fatalf("%s %v %v", name, network, err)
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

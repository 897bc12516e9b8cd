package master

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/protocol"
)

// WaitFor streams the spool: a 256 MiB spool (sparse, so the test costs no
// disk) is searched with bounded memory, a match at its very end is found
// at the right offset, and a wait that finds nothing ends with ctx.
func TestWaitForStreamsLargeSpool(t *testing.T) {
	dir := t.TempDir()
	for _, d := range protocol.Dirs {
		os.MkdirAll(filepath.Join(dir, d), 0o700)
	}
	const size = 256 << 20
	f, err := os.Create(filepath.Join(dir, protocol.FileSpool))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("NEEDLE-42\n"), size-10); err != nil {
		t.Fatal(err)
	}
	f.Close()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.WaitForRunner = time.Hour // No runner here: only the spool matters.

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	m, err := s.WaitFor(context.Background(), regexp.MustCompile(`NEEDLE-\d+`), 0)
	runtime.ReadMemStats(&after)
	if err != nil || m.Start != size-10 || m.Text != "NEEDLE-42" || m.ResumeCursor != size-1 {
		t.Fatalf("%+v %v", m, err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 50<<20 {
		t.Errorf("WaitFor allocated %d MiB for a %d MiB spool", alloc>>20, size>>20)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	m, err = s.WaitFor(ctx, regexp.MustCompile(`never there`), 0)
	if !errors.Is(err, ErrWaitTimeout) || m.ResumeCursor != size {
		t.Fatalf("%+v %v", m, err)
	}
}

// A match is never cut short by where a read happened to end: the bytes
// after it are looked at before it is returned.
func TestWaitForDoesNotCutAMatchAtAChunkEdge(t *testing.T) {
	dir := t.TempDir()
	for _, d := range protocol.Dirs {
		os.MkdirAll(filepath.Join(dir, d), 0o700)
	}
	spool := make([]byte, 1<<20-3)
	for i := range spool {
		spool[i] = '.'
	}
	spool = append(spool, []byte("xxxxxx;")...) // The x run straddles the first 1 MiB read.
	os.WriteFile(filepath.Join(dir, protocol.FileSpool), spool, 0o600)
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.WaitForRunner = time.Hour
	m, err := s.WaitFor(context.Background(), regexp.MustCompile(`x+`), 0)
	if err != nil || m.Text != "xxxxxx" {
		t.Fatalf("%+v %v", m, err)
	}
}

// A spool that is a FIFO or a symlink is an I/O error at once: WaitFor
// neither blocks on it nor reads the file a symlink points to.
func TestWaitForHostileSpool(t *testing.T) {
	for _, kind := range []string{"fifo", "symlink"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			for _, d := range protocol.Dirs {
				os.MkdirAll(filepath.Join(dir, d), 0o700)
			}
			spool := filepath.Join(dir, protocol.FileSpool)
			if kind == "fifo" {
				if err := syscall.Mkfifo(spool, 0o600); err != nil {
					t.Fatal(err)
				}
			} else {
				target := filepath.Join(t.TempDir(), "elsewhere")
				os.WriteFile(target, []byte("NEEDLE\n"), 0o600)
				if err := os.Symlink(target, spool); err != nil {
					t.Fatal(err)
				}
			}
			s, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			s.WaitForRunner = time.Hour
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			m, err := s.WaitFor(ctx, regexp.MustCompile("NEEDLE"), 0)
			if err == nil || errors.Is(err, ErrWaitTimeout) || !(errors.Is(err, fsq.ErrSymlink) || errors.Is(err, fsq.ErrNotRegular)) {
				t.Fatalf("WaitFor on a %s spool: %+v, %v", kind, m, err)
			}
			if m.ResumeCursor != 0 {
				t.Fatalf("resume cursor %d: the symlink's target was read", m.ResumeCursor)
			}
		})
	}
}

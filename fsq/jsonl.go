package fsq

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
)

// Log is an append-only JSON Lines file. Every Append is one write(2) of a
// whole line, so a crash can tear at most the last line, and OpenLog repairs
// that. An append that fails part-way (a full disk) is cut off again at
// once, so a failed append never leaves a torn line in the middle of the
// log. Appends are not fsynced one by one: call Sync.
type Log struct {
	mu      sync.Mutex // guards f, size and retired
	f       *os.File
	size    int64    // end of the last complete line
	retired *os.File // the file before the last Adopt: closed at the next one, or by Close
}

// OpenLog opens (creating it with perm if needed) the JSON Lines file
// name. It refuses a symlink (ErrSymlink), anything but a regular file
// (ErrNotRegular; a FIFO does not block the open) and a file with more
// than one link (ErrHardLink). A last line that is not terminated by a
// newline or not valid JSON (a torn append) is cut off; the bytes removed
// are returned so the caller can report them.
func (s *Root) OpenLog(name string, perm os.FileMode) (*Log, []byte, error) {
	f, err := s.openRegular(name, os.O_RDWR|os.O_CREATE|os.O_APPEND, perm)
	if err != nil {
		return nil, nil, err
	}
	return adoptLog(f)
}

// adoptLog makes a Log of f, opened by Root.OpenLog (read-write, append,
// checked to be a regular file), repairing a torn last line first; the
// bytes removed are returned. The Log owns f from then on, and closes it
// on error.
func adoptLog(f *os.File) (*Log, []byte, error) {
	torn, err := repairTail(f)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("fsq: repair %s: %w", f.Name(), err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return &Log{f: f, size: fi.Size()}, torn, nil
}

// repairTail truncates f after its last complete, valid line.
func repairTail(f *os.File) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return nil, err
	}
	const window = 1 << 20
	off := max(fi.Size()-window, 0)
	tail := make([]byte, fi.Size()-off)
	if _, err := f.ReadAt(tail, off); err != nil && err != io.EOF {
		return nil, err
	}
	keep := len(tail)
	if tail[len(tail)-1] != '\n' {
		keep = bytes.LastIndexByte(tail, '\n') + 1
	} else {
		// Terminated, but the last line may still be garbage (a torn
		// write followed by a crash while a newline was already out).
		prev := bytes.LastIndexByte(tail[:len(tail)-1], '\n') + 1
		if !json.Valid(tail[prev : len(tail)-1]) {
			keep = prev
		}
	}
	if keep == len(tail) {
		return nil, nil
	}
	if keep == 0 && off > 0 {
		return nil, fmt.Errorf("last line longer than %d bytes", window)
	}
	torn := bytes.Clone(tail[keep:])
	if err := f.Truncate(off + int64(keep)); err != nil {
		return nil, err
	}
	return torn, f.Sync()
}

// Append writes v as one JSON line. If the write fails part-way, the
// partial line is truncated away again (best effort), so the next append
// starts on a line boundary. It is safe for concurrent use.
func (l *Log) Append(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	n, err := l.f.Write(b)
	if err != nil {
		if n > 0 {
			_ = l.f.Truncate(l.size) // Best effort: OpenLog repairs what remains.
		}
		return err
	}
	l.size += int64(n)
	return nil
}

// Sync flushes appended lines to stable storage. It may run concurrently
// with Append (the runner syncs off its critical path) and with Adopt.
func (l *Log) Sync() error {
	l.mu.Lock()
	f := l.f
	l.mu.Unlock()
	return f.Sync()
}

// Size is the length of the log's complete lines.
func (l *Log) Size() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.size
}

// Adopt makes l append to next's file from now on (a rotation: the caller
// renamed l's file away and opened a new one) and closes l's old file;
// next must not be used afterwards. Whoever holds l (a syncer) keeps
// using it; a Sync that took the old file just before is still served (it
// is closed at the next Adopt, or by Close).
func (l *Log) Adopt(next *Log) {
	next.mu.Lock()
	f, size := next.f, next.size
	next.f = nil
	next.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.retired != nil {
		_ = l.retired.Close() // Synced before its rename.
	}
	l.retired, l.f, l.size = l.f, f, size
}

// Close closes the log.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.retired != nil {
		_ = l.retired.Close()
		l.retired = nil
	}
	return l.f.Close()
}

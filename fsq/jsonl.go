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
// whole line followed by fsync, so a crash can tear at most the last line,
// and OpenLog repairs that.
type Log struct {
	mu   sync.Mutex // guards f and sync
	f    *os.File
	sync bool
}

// OpenLog opens (creating if needed) the JSON Lines file at path. A last line
// that is not terminated by a newline or not valid JSON (a torn append) is
// cut off; the bytes removed are returned so the caller can report them.
// With sync false, appends are not fsynced (tests and benchmarks only).
func OpenLog(path string, sync bool) (*Log, []byte, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, err
	}
	torn, err := repairTail(f)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("fsq: repair %s: %w", path, err)
	}
	return &Log{f: f, sync: sync}, torn, nil
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

// Append writes v as one JSON line and, for a synced log, fsyncs it before
// returning. It is safe for concurrent use.
func (l *Log) Append(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.f.Write(b); err != nil {
		return err
	}
	if l.sync {
		return l.f.Sync()
	}
	return nil
}

// Sync flushes appended lines to stable storage. It may run concurrently
// with Append (the runner syncs off its critical path).
func (l *Log) Sync() error { return l.f.Sync() }

// Close closes the log.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Close()
}

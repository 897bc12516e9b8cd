package master

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"time"

	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/protocol"
	"golang.org/x/sys/unix"
)

// Output reads up to n bytes (n <= 0: all) of the command's output file
// from byte offset off (negative: ErrUsage, as in every master). While the command runs the file grows (the runner
// flushes it at least once per heartbeat); offsets are stable.
//
// Once the command has a result, Output never answers with fewer bytes
// than the result says the file holds (stats.bytes): an output file that
// is missing (deleted, or moved out of output/) or shorter is an error
// naming it, not an empty or short success; where the result carries a
// whole copy of the output (output_inline), the copy is served and the
// file is not opened. Before
// the result, a missing file is os.ErrNotExist (queued, or not started).
func (c *Command) Output(off, n int64) ([]byte, error) {
	if off < 0 {
		return nil, withContext(usageErr("output offset %d: must not be negative", off), map[string]any{"field": "offset", "cmd_id": c.ID})
	}
	// The result is read before the file: a result committed while the
	// file is being read would make a read of a still running command's
	// output look short.
	before, _ := c.Result()
	return c.outputAfter(before, off, n)
}

// outputAfter is Output with the command's result as read just before
// (nil: none yet). A result that carries the whole output (output_inline)
// answers without the file: the copy and the file hold the same bytes,
// and the file costs a CLI wait an open and three more system calls.
func (c *Command) outputAfter(before *protocol.Result, off, n int64) ([]byte, error) {
	if res := before; res != nil && res.Stats.Bytes > 0 && int64(len(res.OutputInline)) == res.Stats.Bytes {
		return window(res.OutputInline, off, n), nil
	}
	name := protocol.DirOutput + "/" + protocol.OutputName(c.Name)
	f, err := c.s.io.OpenRegular(name, true)
	if errors.Is(err, os.ErrNotExist) {
		if fc := c.forwarded(); fc != nil { // Moved by a pool: forward.go.
			return fc.Output(off, n)
		}
		if perr := c.gone(); perr != nil {
			return nil, perr // Its files left with the session's retention, or it was withdrawn.
		}
		if res := before; res != nil && res.Stats.Bytes > 0 {
			if want := wantEnd(res, off, n); want > off {
				return nil, fmt.Errorf("master: %s is gone (deleted or moved out of the session), and the result of %s says it held %d bytes: its output is not in this session any more",
					c.s.io.Path(name), c.ID, res.Stats.Bytes)
			}
		}
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return nil, err
	}
	var r io.Reader = f
	if n > 0 {
		r = io.LimitReader(f, n)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return b, err
	}
	testHookOutputRead()
	if res := before; res != nil {
		if want := wantEnd(res, off, n); off+int64(len(b)) < want {
			return nil, fmt.Errorf("master: %s holds %d bytes, but the result of %s says %d: the rest is not in this session",
				c.s.io.Path(name), off+int64(len(b)), c.ID, res.Stats.Bytes)
		}
	}
	return b, nil
}

// testHookOutputRead runs between reading an output file and judging its
// length; a test commits a result there.
var testHookOutputRead = func() {}

// wantEnd is the offset up to which a read of n bytes (n <= 0: all) from
// off must reach in an output file the result res describes.
func wantEnd(res *protocol.Result, off, n int64) int64 {
	end := res.Stats.Bytes
	if n > 0 {
		end = min(end, off+n)
	}
	return end
}

// window is b[off:off+n] (n <= 0: to the end), clamped to b.
func window(b []byte, off, n int64) []byte {
	if off >= int64(len(b)) {
		return nil
	}
	b = b[off:]
	if n > 0 && n < int64(len(b)) {
		b = b[:n]
	}
	return b
}

// Follow copies the command's output to w from offset off as it is
// produced, until the command has a result (then the rest is copied) or ctx
// ends. It returns the offset reached. Like Wait, it fails with
// ErrRunnerNotAlive when no live runner has been seen for
// Session.WaitForRunner.
func (c *Command) Follow(ctx context.Context, w io.Writer, off int64) (int64, error) {
	wake, stop := c.s.watch(ctx, protocol.DirResult)
	defer stop()
	rw := c.newRunnerWatch()
	goneAt := time.Now().Add(time.Second) // Then every second: pruned or withdrawn, it never gets a result.
	for {
		done, err := c.Result()
		if err != nil {
			return off, err // A result that cannot be read (a FIFO, a symlink) is never waited for.
		}
		b, err := c.outputAfter(done, off, 0) // With the result just read: Output would read it again.
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return off, err
		}
		if len(b) > 0 {
			if _, err := w.Write(b); err != nil {
				return off, err
			}
			off += int64(len(b))
		}
		if done != nil {
			return off, nil
		}
		if now := time.Now(); now.After(goneAt) {
			goneAt = now.Add(time.Second)
			if err := c.gone(); err != nil {
				return off, err
			}
		}
		if err := rw.check(); err != nil {
			return off, c.noRunnerErr(err)
		}
		select {
		case <-ctx.Done():
			return off, c.waitEnded(ctx)
		case <-wake:
		}
	}
}

// SpoolSize returns the current size of log/session.out.
func (s *Session) SpoolSize() (int64, error) {
	fi, err := s.io.Lstat(protocol.FileSpool)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if !fi.Mode().IsRegular() {
		return 0, fmt.Errorf("%s: %w (%s)", s.io.Path(protocol.FileSpool), fsq.ErrNotRegular, fsq.FileType(fi))
	}
	return fi.Size(), nil
}

// Tail copies log/session.out from cursor from to w. With follow it keeps
// copying new bytes, looking every PollInterval, until ctx ends. It returns the cursor after the last
// byte copied; give it back to resume.
func (s *Session) Tail(ctx context.Context, w io.Writer, from int64, follow bool) (int64, error) {
	f, err := s.io.OpenRegular(protocol.FileSpool, false)
	if err != nil {
		return from, err
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	t := time.NewTicker(s.pollInterval())
	defer t.Stop()
	for {
		from = pastCut(f, from)
		n, err := f.ReadAt(buf, from)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return from, werr
			}
			from += int64(n)
			continue
		}
		if err != nil && err != io.EOF {
			return from, err
		}
		if !follow {
			return from, nil
		}
		select {
		case <-ctx.Done():
			return from, nil
		case <-t.C:
		}
	}
}

// pastCut is off, or where the spool's data goes on when off lies in what
// the session's retention cut from it (PROTOCOL.md section 23: a hole,
// which reads as zeros): a read from an old cursor skips it instead of
// reading those zeros.
func pastCut(f *os.File, off int64) int64 {
	d, err := unix.Seek(int(f.Fd()), off, unix.SEEK_DATA)
	if err != nil || d <= off {
		return off // No data after off (ENXIO), or no hole there.
	}
	return d
}

// Match is what WaitFor found. It marshals to JSON in the one waitfor
// reply shape of every master (document 000's names, PROTOCOL.md section
// 19, "Cursors"): on a match {"matched":true,"match_text",
// "match_span":{"start","end"},"resume_cursor"}, and without one (a
// timeout, a dead runner) {"matched":false,"resume_cursor"} with no match
// fields. resume_cursor is the only cursor (document 000, 3.1).
type Match struct {
	// Matched is true when the pattern matched; Start, End and Text are
	// set only then.
	Matched bool
	// Start and End are spool offsets of the match [Start, End); Text is
	// its bytes.
	Start, End int64
	Text       string
	// ResumeCursor is where the next WaitFor starts: End on a match, the
	// spool size when the wait timed out. It never moves backwards.
	ResumeCursor int64
}

// span is a byte range [Start, End) of the spool.
type span struct {
	Start int64 `json:"start"`
	End   int64 `json:"end"`
}

// matchJSON is Match's JSON shape.
type matchJSON struct {
	Matched      bool    `json:"matched"`
	MatchText    *string `json:"match_text,omitempty"`
	MatchSpan    *span   `json:"match_span,omitempty"`
	ResumeCursor int64   `json:"resume_cursor"`
}

// MarshalJSON writes m in the waitfor reply shape (see Match).
func (m Match) MarshalJSON() ([]byte, error) {
	j := matchJSON{Matched: m.Matched, ResumeCursor: m.ResumeCursor}
	if m.Matched {
		j.MatchText, j.MatchSpan = &m.Text, &span{Start: m.Start, End: m.End}
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads the waitfor reply shape (see Match).
func (m *Match) UnmarshalJSON(b []byte) error {
	var j matchJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*m = Match{Matched: j.Matched, ResumeCursor: j.ResumeCursor}
	if j.MatchText != nil {
		m.Text = *j.MatchText
	}
	if j.MatchSpan != nil {
		m.Start, m.End = j.MatchSpan.Start, j.MatchSpan.End
	}
	return nil
}

// MaxMatchLen bounds what WaitFor keeps between reads: a match longer than
// this that arrives in pieces may be missed. Matches within one read of the
// spool are always found.
const MaxMatchLen = 64 << 10

// WaitFor waits until pattern matches the spool (log/session.out) at or
// after cursor from, following the cursor rules of the PTY data model:
// one cursor; the first match at or after from is returned, never a later
// one; on a match ResumeCursor is the end of the match; when ctx ends
// first it returns ErrWaitTimeout with ResumeCursor = the spool size then.
// When no live runner has been seen for Session.WaitForRunner it returns
// ErrRunnerNotAlive, with ResumeCursor the same way.
func (s *Session) WaitFor(ctx context.Context, pattern *regexp.Regexp, from int64) (Match, error) {
	// The spool is read in chunks; buf holds at most MaxMatchLen bytes
	// carried over plus one chunk, so memory stays bounded whatever the
	// spool's size, and ctx is honoured between chunks.
	const chunkSize = 1 << 20
	buf := make([]byte, 0, MaxMatchLen+chunkSize)
	bufStart, readAt := from, from
	wake, stop := s.watch(ctx, protocol.DirLog)
	defer stop()
	rw := s.newRunnerWatch()
	end := func(err error) (Match, error) {
		size := readAt
		if sz, err := s.SpoolSize(); err == nil && sz > size {
			size = sz
		}
		cur := max(size, from)
		return Match{ResumeCursor: cur}, withContext(err, map[string]any{"resume_cursor": cur})
	}
	for {
		f, err := s.io.OpenRegular(protocol.FileSpool, false)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return end(err) // A FIFO or a symlink is never waited on nor followed.
		}
		for err == nil {
			if cerr := ctx.Err(); cerr != nil {
				f.Close()
				return end(ctxErr(ctx))
			}
			if next := pastCut(f, readAt); next > readAt {
				buf, bufStart, readAt = buf[:0], next, next // Nothing matches across what retention cut.
			}
			n, rerr := f.ReadAt(buf[len(buf):cap(buf)], readAt)
			buf = buf[:len(buf)+n]
			readAt += int64(n)
			atEOF := n == 0 || rerr != nil
			// A match that ends where the bytes read so far end might
			// go on in bytes not read yet: decide only once it cannot.
			if loc := pattern.FindIndex(buf); loc != nil && (loc[1] < len(buf) || atEOF || len(buf) == cap(buf)) {
				f.Close()
				m := Match{Matched: true, Start: bufStart + int64(loc[0]), End: bufStart + int64(loc[1]), Text: string(buf[loc[0]:loc[1]])}
				m.ResumeCursor = m.End
				return m, nil
			}
			if over := len(buf) - MaxMatchLen; over > 0 && (atEOF || len(buf) == cap(buf)) {
				buf = append(buf[:0], buf[over:]...)
				bufStart += int64(over)
			}
			if atEOF {
				break
			}
		}
		if f != nil {
			f.Close()
		}
		if err := rw.check(); err != nil {
			return end(err)
		}
		select {
		case <-ctx.Done():
			return end(ctxErr(ctx))
		case <-wake:
		}
	}
}

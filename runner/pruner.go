package runner

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/internal/sessionio"
	"github.com/skillpilot/skillpilot/protocol"
)

// pruner removes old commands' files on a goroutine of its own, so that
// the owner never waits for the disk (PROTOCOL.md section 23). It is the
// only writer of log/pruned.log and log/pruned.log.1. For each job, in
// this order: the index lines of its commands are appended and fsynced
// (after a rotation of the index when the job asks for one); only then,
// command by command, oldest first, the result, the output file and the
// kept command file are removed. A crash anywhere leaves every command
// either still whole or in the index (a leftover file of a command in the
// index is removed by the next runner's sweep).
type pruner struct {
	root    *fsq.Root
	log     *slog.Logger
	durable bool
	perm    os.FileMode
	jobs    chan pruneJob
	done    chan pruneDone
	exit    chan struct{}
	once    sync.Once
	index   *os.File             // log/pruned.log, open for appending
	old     *os.File             // log/pruned.log.1, held open read-only: the copy written back if it goes (checkOld)
	seen    map[string]time.Time // sweep: when a withdrawn, ack or nameless rejected file was first seen
}

// pruneJob is one batch: commands to remove, oldest first, and/or a sweep.
type pruneJob struct {
	entries []keptEntry
	why     []string // why each entry leaves (whyAge …)
	lines   []byte   // their index lines (entries with a cmd_id)
	rotate  bool     // rotate the index before appending
	sweep   *sweepJob
}

// sweepJob removes what belongs to no result: seq/ reservations far below
// the highest, and files of withdrawn/, ctl/ack/ and log/rejected/ (those
// no result names) once first seen age ago; orphans lists output and
// command files of commands the index holds whose result is gone (a crash
// between the removals).
type sweepJob struct {
	now     time.Time
	age     time.Duration
	seqKeep int64
	orphans []string
}

// pruneDone reports a job back to the owner.
type pruneDone struct {
	job     pruneJob
	err     error  // the index could not be written: nothing of the job was removed
	note    string // what the pruner had to repair first (a warning event), if anything
	removed int    // files removed (results, outputs, command files)
	swept   map[string]int
}

// seqKeep is how many seq/ reservations below the highest a sweep keeps:
// a master whose seq/hint fell behind (it lost a race to rewrite it)
// finds reservations there and jumps to the highest (PROTOCOL.md section
// 5) instead of reusing a seq.
const seqKeep = 4096

func newPruner(root *fsq.Root, log *slog.Logger, durable bool, perm os.FileMode) *pruner {
	p := &pruner{root: root, log: log, durable: durable, perm: perm, jobs: make(chan pruneJob, 1),
		done: make(chan pruneDone, 2), exit: make(chan struct{}), seen: map[string]time.Time{}}
	go p.run()
	return p
}

// submit hands a job over; the owner has at most one in flight, so it
// never blocks.
func (p *pruner) submit(j pruneJob) { p.jobs <- j }

// close waits for the job in flight and stops the goroutine; its report
// is handed to handle.
func (p *pruner) close(handle func(pruneDone)) {
	p.once.Do(func() { close(p.jobs) })
	for {
		select {
		case d := <-p.done:
			handle(d)
		case <-p.exit:
			for len(p.done) > 0 {
				handle(<-p.done)
			}
			return
		}
	}
}

func (p *pruner) run() {
	defer close(p.exit)
	defer func() {
		if p.index != nil {
			p.index.Close()
		}
		if p.old != nil {
			p.old.Close()
		}
	}()
	// The index is opened at once, when it is there: from then on the
	// runner holds the file it read at start, and a copy of it survives
	// someone deleting or renaming log/pruned.log (checkIndex).
	if _, err := p.root.Lstat(protocol.FilePruned); err == nil {
		if f, err := p.openIndex(); err == nil {
			p.index = f
		}
	}
	if f, err := p.root.OpenRegular(protocol.FilePrunedOld); err == nil {
		p.old = f
	}
	for j := range p.jobs {
		d := pruneDone{job: j}
		if len(j.entries) > 0 {
			d.note, d.err = p.checkIndex()
			if d.err == nil {
				var note string
				if note, d.err = p.checkOld(); note != "" && d.note != "" {
					d.note += "; " + note
				} else if note != "" {
					d.note = note
				}
			}
		}
		if len(j.entries) > 0 && d.err == nil {
			d.err = p.record(j)
			if d.err == nil {
				for _, e := range j.entries {
					d.removed += p.removeCommand(e)
				}
			}
		}
		if j.sweep != nil {
			d.swept = p.sweep(j.sweep)
		}
		p.done <- d
	}
}

// record appends the job's index lines and makes them durable before
// anything is removed.
func (p *pruner) record(j pruneJob) error {
	if j.rotate {
		if err := p.root.Rename(protocol.FilePruned, protocol.FilePrunedOld); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("rotate %s: %w", protocol.FilePruned, err)
		}
		// The file appended to until now is the old generation: held
		// open as its copy (checkOld).
		if p.old != nil {
			p.old.Close()
		}
		p.old, p.index = p.index, nil
		if p.old == nil {
			if f, err := p.root.OpenRegular(protocol.FilePrunedOld); err == nil {
				p.old = f
			}
		}
	}
	if len(j.lines) == 0 {
		return nil
	}
	if p.index == nil {
		f, err := p.openIndex()
		if err != nil {
			return err
		}
		p.index = f
	}
	if _, err := p.index.Write(j.lines); err != nil {
		// A partial line is cut by the next open (openIndex), and the
		// owner retries the whole batch.
		p.index.Close()
		p.index = nil
		return fmt.Errorf("append to %s: %w", protocol.FilePruned, err)
	}
	if p.durable {
		if err := p.index.Sync(); err != nil {
			p.index.Close()
			p.index = nil
			return fmt.Errorf("fsync %s: %w", protocol.FilePruned, err)
		}
		if j.rotate {
			if err := p.root.SyncDir(protocol.DirLog); err != nil {
				return fmt.Errorf("fsync %s/: %w", protocol.DirLog, err)
			}
		}
	}
	return nil
}

// errIndexReplaced: log/pruned.log is not the file the pruner appends to
// any more, and not one it can stand in for (a FIFO, a symlink, another
// file): nothing is removed until that is undone.
var errIndexReplaced = errors.New("the pruned index was replaced")

// checkIndex makes sure that the file the pruner appends to is still
// log/pruned.log before a batch is recorded. Gone (deleted, or renamed by
// a log rotation job), it is written back from the pruner's open copy, so
// that no pruned cmd_id is forgotten (note says so). Replaced by anything
// else, the batch fails with errIndexReplaced: its commands keep their
// files, and the owner warns once (PROTOCOL.md section 21).
func (p *pruner) checkIndex() (note string, err error) {
	// Not open yet (nil): openIndex makes or opens it. Written back, it is
	// opened again by record.
	return p.checkHeld(protocol.FilePruned, &p.index, false)
}

// checkOld is checkIndex for log/pruned.log.1, the index's older
// generation, held open read-only (the file the pruner rotated, or found
// at start; nil when there was none).
func (p *pruner) checkOld() (note string, err error) {
	return p.checkHeld(protocol.FilePrunedOld, &p.old, true)
}

// checkHeld makes sure that name is still the file *held: gone, name is
// written back from *held (whole lines), which is then closed, and with
// reopen the new file is held instead; replaced by anything else, the
// error wraps errIndexReplaced.
func (p *pruner) checkHeld(name string, held **os.File, reopen bool) (string, error) {
	if *held == nil {
		return "", nil
	}
	fi, err := p.root.Lstat(name)
	if errors.Is(err, os.ErrNotExist) {
		data, err := wholeLines(*held, name)
		if err != nil {
			return "", err
		}
		d := fsq.Volatile
		if p.durable {
			d = fsq.Durable
		}
		if err := p.root.WriteAtomic(name, data, p.perm, d); err != nil {
			return "", fmt.Errorf("restore %s: %w", name, err)
		}
		(*held).Close()
		*held = nil
		if reopen {
			if f, err := p.root.OpenRegular(name); err == nil {
				*held = f
			}
		}
		note := fmt.Sprintf("%s was gone (deleted or renamed while the runner ran); written back from the runner's open copy (%d bytes), so that its pruned cmd_ids stay refused", name, len(data))
		p.log.Warn("retention: " + note)
		return note, nil
	}
	if err != nil {
		return "", fmt.Errorf("look at %s: %w", name, err)
	}
	mine, err := (*held).Stat()
	if err != nil {
		return "", fmt.Errorf("look at the open %s: %w", name, err)
	}
	if fsq.SameFile(fi, mine) {
		return "", nil
	}
	what := "another file"
	if !fi.Mode().IsRegular() {
		what = fsq.FileType(fi)
	}
	return "", fmt.Errorf("%w: %s is now %s, not the file this runner holds; nothing is removed until it is removed (the runner then writes its own copy back)",
		errIndexReplaced, name, what)
}

// wholeLines reads f (an open copy of the index file name) up to its last
// newline: a torn last line stays behind.
func wholeLines(f *os.File, name string) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("look at the open %s: %w", name, err)
	}
	if fi.Size() > protocol.MaxPrunedFile {
		return nil, fmt.Errorf("restore %s: %d bytes, more than %d", name, fi.Size(), protocol.MaxPrunedFile)
	}
	data := make([]byte, fi.Size())
	if _, err := f.ReadAt(data, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read the open %s: %w", name, err)
	}
	return data[:bytes.LastIndexByte(data, '\n')+1], nil
}

// openIndex opens log/pruned.log for appending, cutting a torn last line
// (a failed or interrupted append) so that every line stays whole.
func (p *pruner) openIndex() (*os.File, error) {
	// Never followed, never blocked on (a FIFO), never written through a
	// second link: log/ is the runner's own (PROTOCOL.md section 21).
	f, err := p.root.OpenReadAppend(protocol.FilePruned, p.perm)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", protocol.FilePruned, err)
	}
	if err := cutTornLine(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("repair %s: %w", protocol.FilePruned, err)
	}
	return f, nil
}

// cutTornLine truncates f after its last newline (to nothing when it has
// none), looking back from the end a window at a time: a torn tail may be
// longer than any window (garbage appended by hand, a disk that returned
// zeros).
func cutTornLine(f *os.File) error {
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return err
	}
	const window = 64 << 10
	buf := make([]byte, window)
	end := fi.Size()
	for end > 0 {
		off := max(end-window, 0)
		b := buf[:end-off]
		if _, err := f.ReadAt(b, off); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
			keep := off + int64(i) + 1
			if keep == fi.Size() {
				return nil
			}
			return f.Truncate(keep)
		}
		end = off
	}
	return f.Truncate(0)
}

// removeCommand removes a pruned command's files in the documented order:
// its result, its output file, its kept command file. It returns how many
// it removed; a file already gone is fine.
func (p *pruner) removeCommand(e keptEntry) int {
	n := 0
	for _, f := range []string{rel(protocol.DirResult, e.name), e.outPath, e.cmdPath} {
		if f == "" {
			continue
		}
		err := p.root.Remove(f)
		switch {
		case err == nil:
			n++
		case errors.Is(err, os.ErrNotExist):
		default:
			p.log.Warn("retention: cannot remove a pruned command's file", "file", f, "err", err)
		}
	}
	return n
}

// sweep carries out a sweepJob and counts what it removed by directory.
func (p *pruner) sweep(s *sweepJob) map[string]int {
	out := map[string]int{}
	if n := p.sweepSeq(s.seqKeep); n > 0 {
		out[protocol.DirSeq] = n
	}
	live := map[string]bool{}
	for _, dir := range []string{sessionio.DirWithdrawn, protocol.DirAck, protocol.DirRejected} {
		names, err := p.root.ReadNames(dir)
		if err != nil {
			continue
		}
		for _, name := range names {
			if strings.HasPrefix(name, ".") || (dir == protocol.DirRejected && hasDerivedID(name)) {
				continue // Temporary files; rejected files whose result names them leave with it.
			}
			key := dir + "/" + name
			live[key] = true
			first, ok := p.seen[key]
			if !ok {
				p.seen[key] = s.now
				continue
			}
			if s.now.Sub(first) < s.age {
				continue
			}
			if err := p.root.Remove(key); err == nil || errors.Is(err, os.ErrNotExist) {
				delete(p.seen, key)
				out[dir]++
			}
		}
	}
	for key := range p.seen {
		if !live[key] {
			delete(p.seen, key) // Gone by other means.
		}
	}
	for _, f := range s.orphans {
		if err := p.root.Remove(f); err == nil {
			out["orphans"]++
		}
	}
	return out
}

// hasDerivedID reports whether a file of log/rejected/ is named so that its
// result is under the same name (PROTOCOL.md section 3): it leaves with
// that result.
func hasDerivedID(name string) bool {
	_, _, derived := protocol.DeriveCmdID(name)
	return derived
}

// sweepSeq removes the seq/ reservations more than keep below the highest.
func (p *pruner) sweepSeq(keep int64) int {
	names, err := p.root.ReadNames(protocol.DirSeq)
	if err != nil {
		return 0
	}
	var top int64
	for _, n := range names {
		if v, ok := protocol.ParseSeqName(n); ok && v > top {
			top = v
		}
	}
	removed := 0
	for _, n := range names {
		if v, ok := protocol.ParseSeqName(n); ok && v < top-keep {
			if p.root.Remove(rel(protocol.DirSeq, n)) == nil {
				removed++
			}
		}
	}
	return removed
}

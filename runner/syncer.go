package runner

import (
	"os"
	"sync"
	"time"

	"github.com/skillpilot/skillpilot/fsq"
)

// syncPace is how long the syncer waits after a ring before its round, and
// so the least time between rounds: one round (a group commit) covers
// every command that finished meanwhile, and a single command's round
// runs after its result, not against the result's own fsync for the
// filesystem journal.
const syncPace = 20 * time.Millisecond

// syncer makes durable, off the runner's critical path, what need not be
// durable before a result becomes visible: the event log, the claim
// (rename into inflight/) and the rename of a result into result/. The
// owner rings it after each claim and each result; rings coalesce. See
// PROTOCOL.md, "Durability and crash consistency".
//
// On a local filesystem a round is one syncfs (one flush of the disk's
// cache, where fsyncing the log and two directories costs three: the
// flushes, not the system calls, bound a backlog's pace); on a network
// filesystem, where syncfs would write every client's dirty pages of the
// mount, it fsyncs the three. The last round, at the runner's stop, always
// fsyncs the three: a stop does not wait for other programs' writes.
type syncer struct {
	root *fsq.Root
	bell chan struct{}
	done chan struct{}
	meta *fsq.Log
	dirs []*os.File
	// touch lists directories whose mtime is bumped at every round (on a
	// network filesystem; see fsq.TouchDir): a round runs syncPace after a
	// claim or a result, at least one timestamp tick after the change.
	touch []string
	// whole: a round is one syncfs of the filesystem (see syncer); its
	// failure falls back to the fsyncs.
	whole  bool
	syncFS func() error // fss.Sync; tests count or fail it
	fss    *fsq.FSSync  // the syncer's own syncfs handle
	// failing: the last round's syncfs failed. The fallback is said once
	// a streak (a round runs every 20 ms while busy).
	failing bool
	log     func(msg string, err error)
	once    sync.Once
}

// newSyncer starts a syncer. meta nil means no fsync at all (NoSync); the
// touch list is still served. whole: rounds are one syncfs (a local
// filesystem).
func newSyncer(root *fsq.Root, meta *fsq.Log, dirs, touch []string, whole bool, log func(string, error)) *syncer {
	s := &syncer{root: root, bell: make(chan struct{}, 1), done: make(chan struct{}), meta: meta, log: log, touch: touch}
	if whole && meta != nil {
		// A handle of the syncer's own: syncfs reports a write-back
		// error once per file description, and the result writer must
		// see the errors of its outputs too (it has its own).
		h, err := root.NewFSSync()
		if err != nil {
			log("rounds fsync the event log and directories one by one", err)
		} else {
			s.whole, s.fss, s.syncFS = true, h, h.Sync
		}
	}
	for _, d := range dirs {
		if meta == nil {
			break
		}
		f, err := root.OpenDir(d)
		if err != nil {
			log("open "+d+" for fsync", err)
			continue
		}
		s.dirs = append(s.dirs, f)
	}
	go s.run()
	return s
}

// ring asks for a sync round; it never blocks.
func (s *syncer) ring() {
	select {
	case s.bell <- struct{}{}:
	default:
	}
}

func (s *syncer) run() {
	defer close(s.done)
	for range s.bell {
		time.Sleep(syncPace)
		s.round(s.whole)
	}
}

// round runs one round: one syncfs when whole, else (or when it failed)
// an fsync of the event log and of each directory.
func (s *syncer) round(whole bool) {
	for _, d := range s.touch {
		if err := s.root.TouchDir(d); err != nil {
			s.log("touch "+d, err)
		}
	}
	if s.meta == nil {
		return
	}
	if whole {
		err := s.syncFS()
		if err == nil {
			s.failing = false
			return
		}
		if !s.failing {
			s.log("syncfs (the event log and directories are fsynced one by one instead, said once until a round's syncfs works)", err)
		}
		s.failing = true
	}
	if err := s.meta.Sync(); err != nil {
		s.log("fsync event log", err)
	}
	for _, d := range s.dirs {
		if err := d.Sync(); err != nil {
			s.log("fsync "+d.Name(), err)
		}
	}
}

// close runs a last round synchronously and stops the goroutine.
func (s *syncer) close() {
	s.once.Do(func() {
		close(s.bell)
		<-s.done
		s.round(false)
		for _, d := range s.dirs {
			_ = d.Close() // Read-only directory handles.
		}
		if s.fss != nil {
			_ = s.fss.Close() // Likewise.
		}
	})
}

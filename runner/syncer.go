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
	log   func(msg string, err error)
	once  sync.Once
}

// newSyncer starts a syncer. meta nil means no fsync at all (NoSync); the
// touch list is still served.
func newSyncer(root *fsq.Root, meta *fsq.Log, dirs, touch []string, log func(string, error)) *syncer {
	s := &syncer{root: root, bell: make(chan struct{}, 1), done: make(chan struct{}), meta: meta, log: log, touch: touch}
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
		s.round()
	}
}

func (s *syncer) round() {
	for _, d := range s.touch {
		if err := s.root.TouchDir(d); err != nil {
			s.log("touch "+d, err)
		}
	}
	if s.meta == nil {
		return
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
		s.round()
		for _, d := range s.dirs {
			_ = d.Close() // Read-only directory handles.
		}
	})
}

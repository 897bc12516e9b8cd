package runner

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"sync"

	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/protocol"
)

// commitJob is a finished command whose result must be made durable and
// visible: fsync its output and result (in parallel), rename the result
// into result/, then clear inflight/.
type commitJob struct {
	name     string
	res      *protocol.Result
	out      *os.File // flushed, not yet fsynced or closed
	inflight string
	archive  string // where the command file goes once the result is visible
	payload  string // payload file in inflight/, "" if none
	text     string // the payload as run, hashed into the result off the critical path
}

// commitDone reports a job back to the owner goroutine.
type commitDone struct {
	job commitJob
	err error
}

// committer runs commit jobs in order on its own goroutine, so that the
// next command can start in the tool while the previous result is being
// fsynced: the tool never waits for the disk. Results still appear in the
// order the commands finished.
type committer struct {
	r    *Runner
	jobs chan commitJob
	done chan commitDone
	exit chan struct{}
}

func newCommitter(r *Runner) *committer {
	c := &committer{r: r, jobs: make(chan commitJob, 64), done: make(chan commitDone, 64), exit: make(chan struct{})}
	go c.run()
	return c
}

// maxBatch bounds how many finished commands one group commit covers.
const maxBatch = 32

func (c *committer) run() {
	defer close(c.exit)
	for j := range c.jobs {
		batch := []commitJob{j}
	more:
		for len(batch) < maxBatch {
			select {
			case j, ok := <-c.jobs:
				if !ok {
					break more
				}
				batch = append(batch, j)
			default:
				break more
			}
		}
		for i, err := range c.commit(batch) {
			c.done <- commitDone{job: batch[i], err: err}
		}
	}
}

// commit makes a batch of results durable and visible, in order. All
// output and result files are fsynced at once, in parallel: the journal
// commit one of them forces serves the others that joined it, so a
// backlog costs about one flush per batch rather than per command.
func (c *committer) commit(batch []commitJob) []error {
	r := c.r
	durable := r.durable != fsq.Volatile
	errs := make([]error, len(batch))
	prepared := make([]*fsq.Prepared, len(batch))
	for i, j := range batch {
		if j.res.PayloadSHA256 == "" {
			j.res.PayloadSHA256 = sha256Hex(j.text)
		}
		prepared[i], errs[i] = r.prepareResult(j.name, j.res)
	}
	if durable {
		var wg sync.WaitGroup
		outErrs := make([]error, len(batch))
		for i, j := range batch {
			wg.Add(1)
			go func() { defer wg.Done(); outErrs[i] = j.out.Sync() }()
			if errs[i] == nil {
				wg.Add(1)
				go func() { defer wg.Done(); errs[i] = prepared[i].Sync() }()
			}
		}
		wg.Wait()
		for i := range batch {
			if errs[i] == nil {
				errs[i] = outErrs[i]
			}
		}
	}
	for i, j := range batch {
		_ = j.out.Close() // Sync reported what matters.
		if errs[i] != nil {
			if prepared[i] != nil {
				prepared[i].Abort()
			}
			continue // inflight/ keeps the command; the next start settles it.
		}
		if errs[i] = prepared[i].Commit(); errs[i] != nil {
			continue
		}
		archiveCommand(j.inflight, j.archive) // A leftover is settled at the next start.
		if j.payload != "" {
			_ = os.Remove(j.payload)
		}
	}
	return errs
}

// submit queues a job. While the queue is full it keeps handling
// completions, so the owner and the committer never wait on each other.
func (c *committer) submit(j commitJob, handle func(commitDone)) {
	for {
		select {
		case c.jobs <- j:
			return
		case d := <-c.done:
			handle(d)
		}
	}
}

// close waits until every queued job is committed, handling completions.
func (c *committer) close(handle func(commitDone)) {
	close(c.jobs)
	for {
		select {
		case d := <-c.done:
			handle(d)
		case <-c.exit:
			for len(c.done) > 0 {
				handle(<-c.done)
			}
			return
		}
	}
}

// archiveCommand moves an executed command file from inflight/ to archive/,
// where it stays beside its result as the record of what ran. If the move
// fails the file is removed instead: inflight/ must not keep it, or the
// next runner would take it for an interrupted command.
func archiveCommand(inflight, archive string) {
	if err := os.Rename(inflight, archive); err != nil {
		_ = os.Remove(inflight) // Gone already, or archive/ is unusable.
	}
}

func sha256Hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

package runner

import (
	"os"

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
	payload  string // "" if none
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

func (c *committer) run() {
	defer close(c.exit)
	for j := range c.jobs {
		c.done <- commitDone{job: j, err: c.commit(j)}
	}
}

func (c *committer) commit(j commitJob) error {
	r := c.r
	sync := r.durable != fsq.Volatile
	// The output must be durable before the result is visible. Its fsync
	// runs beside the result's own: one journal commit can serve both.
	var outSync chan error
	if sync {
		outSync = make(chan error, 1)
		go func() { outSync <- j.out.Sync() }()
	}
	p, err := r.prepareResult(j.name, j.res)
	if err == nil && sync {
		if err = p.Sync(); err != nil {
			p.Abort()
		}
	}
	if outSync != nil {
		if serr := <-outSync; serr != nil && err == nil {
			err = serr
			p.Abort()
		}
	}
	_ = j.out.Close() // Sync reported what matters.
	if err != nil {
		return err // inflight/ keeps the command; the next start settles it.
	}
	if err := p.Commit(); err != nil {
		return err
	}
	_ = os.Remove(j.inflight) // A leftover is settled at the next start.
	if j.payload != "" {
		_ = os.Remove(j.payload)
	}
	return nil
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

package runner

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/protocol"
	"golang.org/x/sys/unix"
)

// jobKind says where a result comes from; it decides the event the owner
// logs when the result is committed.
type jobKind int

const (
	jobRun       jobKind = iota // a command that ran in the tool
	jobRejected                 // an invalid command file
	jobEarly                    // a claimed command that never reached the tool
	jobCancelled                // a queued command cancelled before it started
	jobRecovered                // left in inflight/ by a runner that died
)

// resultJob is one result to make durable and visible, and what to do with
// the command's files once it is. Paths are relative to the session.
type resultJob struct {
	kind jobKind
	name string // result/<name>
	res  *protocol.Result
	// out is the command's output file (flushed, not yet fsynced); it is
	// fsynced before the result appears, or after it when the result
	// carries a copy (output_inline; see resultWriter.lag), and closed
	// once fsynced. outErr says
	// writing it failed: the result then describes what the file holds.
	out    *os.File
	outErr error
	// cmdFile is where the command file is now (inflight/<name>), moved to
	// keepAt (archive/… or log/rejected/…) once the result is visible.
	cmdFile string
	keepAt  string
	payload string // a payload file in inflight/ to remove afterwards
	text    string // the payload, hashed into payload_sha256 off the owner
	marked  bool   // its lag marker was made (an earlier attempt may have made it)
	// raw is the command file's bytes as claimed (nil if unknown): kept at
	// keepAt from them if the file was gone from inflight/.
	raw []byte
}

// resultDone reports a job back to the owner goroutine. existed means a
// result was already there: nothing was written, the old one stands.
type resultDone struct {
	job       resultJob
	existed   bool
	err       error            // the writer gave up (abort): the command stays in inflight/
	recreated []string         // session directories someone deleted and the writer made again
	displaced []map[string]any // non-results moved aside from result/ (displace)
}

// writerStatus tells the owner whether results are waiting for a retry.
type writerStatus struct {
	pending int   // results not yet committed because of err
	err     error // nil: all clear again
}

// writerOps are the system calls a commit makes, replaceable in tests to
// inject a full disk or an I/O error.
type writerOps struct {
	temp  func() (*os.File, error)         // an empty file in tmp/
	write func(f *os.File, b []byte) error // the result's bytes into it
	sync  func(f *os.File) error           // fsync (results and outputs)
	// syncFS flushes the session's whole filesystem (syncfs, through a
	// file description of the writer's own): a lag round of more than one
	// output makes them all durable with one flush. nil: fsync each.
	syncFS func() error
	place  func(tmp, dst string) error // rename without replacing
	move   func(src, dst string) error // command file into archive/
	mkdir  func(rel string) error      // recreate a deleted session directory
}

// writerConfig is everything the writer depends on. It holds no pointer to
// the Runner: the writer shares nothing with the owner goroutine but its
// channels.
type writerConfig struct {
	dir     string       // absolute session directory
	root    *fsq.Root    // how it reaches the session (nil: opened from dir)
	hold    *sessionHold // whether the session is still the runner's (nil: no lock held)
	host    string
	durable bool // fsync outputs and results before they appear
	// network: the session is on a network filesystem, where another
	// client sees an output file's bytes only once this client has sent
	// them to the server (its fsync or close): an output then never lags
	// behind its result (no output_inline), whatever it costs.
	network  bool
	filePerm os.FileMode
	dirMode  func(rel string) os.FileMode // the documented mode of a session directory
	spares   *fsq.Spares                  // nil: create temp files on demand
	log      *slog.Logger
	ops      writerOps
	retryMin time.Duration // first retry delay after a failure (doubles)
	retryMax time.Duration
}

// resultWriter is the only code that writes result/. It runs commit jobs in
// order on its own goroutine, so that the owner never waits for the disk:
// the next command can start in the tool while the previous result is being
// fsynced, and 10,000 rejections cost the owner 10,000 channel sends. Jobs
// that queue up meanwhile are committed as a group (one fsync round for all).
//
// Guarantees:
//   - At most one result per name, ever: a result is renamed into place
//     without replacing (fsq.Root.RenameNoReplace); if one is already there,
//     nothing is written and the job reports existed.
//   - Results appear in the order the jobs were submitted.
//   - A failure (ENOSPC, EDQUOT, EIO, a deleted directory) is retried, with
//     a delay doubling up to retryMax, until it succeeds or the writer is
//     aborted; meanwhile status reports how many results wait and why.
type resultWriter struct {
	cfg       writerConfig
	recreated []string         // since the last done report
	displaced []map[string]any // since the last done report (displace)
	jobs      chan resultJob
	done      chan resultDone
	status    chan writerStatus
	quit      chan struct{} // closed by abort
	exit      chan struct{} // closed when the goroutine has returned
	once      sync.Once
	// lag holds the output files of committed jobs whose output is
	// durable through the copy their result carries (inline) and whose
	// file is fsynced later, off the critical path. Each has a marker,
	// inflight/.lag-<name>, made before its result's rename and removed
	// once the file is fsynced, so that a runner starting after a crash
	// knows which outputs to check (recover.go, rebuildOutput).
	lag     []lagging
	lagged  chan []lagging // a lag round, its outputs fsynced
	inRound int            // outputs in the lag round running now (0: none runs)
	fss     *fsq.FSSync    // the writer's own syncfs handle (ops.syncFS), closed at its end
}

// lagging is an output file waiting for its fsync, and its marker.
type lagging struct {
	out    *os.File
	path   string // output/<name>.out, for messages
	marker string // inflight/.lag-<name>
}

// lagPrefix starts the name of a marker in inflight/ (resultWriter.lag).
const lagPrefix = ".lag-"

// lagPace is how long the writer lets committed outputs wait for their
// fsync: one round covers every output committed meanwhile (one syncfs
// for two or more), and a single command's round runs after its result,
// not against the result's own fsync. maxLag bounds the files held open:
// a job whose output would be one more commits the old way (its output
// fsynced before its result, no copy in it).
const (
	lagPace = 20 * time.Millisecond
	maxLag  = 256
)

// writerQueue bounds the jobs waiting for the writer; the owner stops
// taking queued files while it is full.
const writerQueue = 1024

// maxBatch bounds how many results one group commit covers.
const maxBatch = 64

func newResultWriter(cfg writerConfig) *resultWriter {
	if cfg.retryMin <= 0 {
		cfg.retryMin = 50 * time.Millisecond
	}
	if cfg.retryMax <= 0 {
		cfg.retryMax = 2 * time.Second
	}
	if cfg.root == nil { // Tests build a writer without a Runner.
		root, err := fsq.OpenRoot(cfg.dir)
		if err != nil {
			panic(err)
		}
		cfg.root = root
	}
	def := defaultOps(cfg)
	if cfg.ops.temp == nil {
		cfg.ops.temp = def.temp
	}
	if cfg.ops.write == nil {
		cfg.ops.write = def.write
	}
	if cfg.ops.sync == nil {
		cfg.ops.sync = def.sync
	}
	var fss *fsq.FSSync
	if cfg.ops.syncFS == nil && cfg.durable && !cfg.network {
		// Made now, before any output it flushes is written: syncfs
		// reports a write-back error to each file description once.
		h, err := cfg.root.NewFSSync()
		if err == nil {
			fss, cfg.ops.syncFS = h, h.Sync
		} else {
			cfg.log.Info("lag rounds fsync outputs one by one", "why", err)
		}
	}
	if cfg.ops.place == nil {
		cfg.ops.place = def.place
	}
	if cfg.ops.move == nil {
		cfg.ops.move = def.move
	}
	if cfg.ops.mkdir == nil {
		cfg.ops.mkdir = def.mkdir
	}
	// done holds every job that can be in flight (queued plus one batch),
	// so the writer never blocks on it.
	w := &resultWriter{cfg: cfg, jobs: make(chan resultJob, writerQueue), done: make(chan resultDone, writerQueue+maxBatch),
		status: make(chan writerStatus, 1), quit: make(chan struct{}), exit: make(chan struct{}), lagged: make(chan []lagging, 1), fss: fss}
	go w.run()
	return w
}

// defaultOps reach the session through cfg.root. The ops speak absolute
// paths (tests replace them with path-based ones); the root takes them
// back to names inside the session and refuses any other.
func defaultOps(cfg writerConfig) writerOps {
	root := cfg.root
	return writerOps{
		temp: func() (*os.File, error) {
			if cfg.spares != nil {
				return cfg.spares.Take()
			}
			return root.CreateTemp(protocol.DirTmp, ".result-", 0o600)
		},
		write: func(f *os.File, b []byte) error { _, err := f.Write(b); return err },
		sync:  func(f *os.File) error { return f.Sync() },
		place: func(tmp, dst string) error {
			if err := ownDir(root, protocol.DirResult); err != nil {
				return err
			}
			return root.RenameNoReplace(root.RelOf(tmp), root.RelOf(dst))
		},
		move: func(src, dst string) error { return root.Rename(root.RelOf(src), root.RelOf(dst)) },
		mkdir: func(rel string) error {
			if err := cfg.hold.mayRecreate(root, rel); err != nil {
				return err
			}
			if err := root.Mkdir(rel, 0o700); err != nil {
				return err
			}
			if cfg.dirMode != nil {
				return root.Chmod(rel, cfg.dirMode(rel))
			}
			return nil
		},
	}
}

// trySubmit queues a job if the queue has room.
func (w *resultWriter) trySubmit(j resultJob) bool {
	select {
	case w.jobs <- j:
		return true
	default:
		return false
	}
}

// submit queues a job. While the queue is full it keeps handling
// completions, so the owner and the writer never wait on each other: at
// shutdown, once the loop has ended (the loop hands jobs over itself).
func (w *resultWriter) submit(j resultJob, handle func(resultDone)) {
	for {
		select {
		case w.jobs <- j:
			return
		case d := <-w.done:
			handle(d)
		}
	}
}

// close waits until every queued job is committed (or, after abort, given
// up), handling completions.
func (w *resultWriter) close(handle func(resultDone)) {
	w.once.Do(func() { close(w.jobs) })
	for {
		select {
		case d := <-w.done:
			handle(d)
		case <-w.exit:
			for len(w.done) > 0 {
				handle(<-w.done)
			}
			return
		}
	}
}

// abort makes the writer stop retrying: jobs it cannot commit are reported
// with an error and their commands stay in inflight/ for the next runner.
func (w *resultWriter) abort() {
	select {
	case <-w.quit:
	default:
		close(w.quit)
	}
}

func (w *resultWriter) run() {
	defer close(w.exit)
	defer w.cfg.root.SweepLater()
	if w.fss != nil {
		defer w.fss.Close() // A read-only directory handle.
	}
	var (
		tick     <-chan time.Time
		finished bool // jobs is closed
	)
	syncing := func() bool { return w.inRound > 0 } // A round is never empty (syncLag).
	for !finished || syncing() || len(w.lag) > 0 {
		if len(w.lag) > 0 && !syncing() && (finished || len(w.lag) >= maxLag) {
			w.syncLag(finished) // Stopping, or too many open: at once.
			tick = nil
		}
		if len(w.lag) > 0 && !syncing() && tick == nil {
			tick = time.After(lagPace)
		}
		jobs := w.jobs
		if finished {
			jobs = nil
		}
		select {
		case j, ok := <-jobs:
			if !ok {
				finished = true
				continue
			}
			batch := []resultJob{j}
		more:
			for len(batch) < maxBatch {
				select {
				case j, ok := <-w.jobs:
					if !ok {
						finished = true
						break more
					}
					batch = append(batch, j)
				default:
					break more
				}
			}
			w.commitAll(batch)
		case <-tick:
			tick = nil
			if !syncing() {
				w.syncLag(false)
			}
		case round := <-w.lagged:
			w.inRound = 0
			for _, l := range round {
				if l.out != nil {
					_ = l.out.Close()                  // fsync reported what matters.
					w.cfg.root.RemoveOrLater(l.marker) // A swapped inflight/: once it is back.
				}
			}
		}
	}
}

// syncLag makes the lagging outputs durable on a goroutine of its own
// (the writer goes on committing meanwhile): one output by its fsync,
// more by one syncfs of the filesystem. Each fsync of a file of its own
// costs the disk a flush of its own, even when they run in parallel (2.0
// flushes a command in a backlog, measured: BENCHMARKS.md), where one
// syncfs costs one for all; a lone output's fsync does not make the disk
// write what other programs have pending, and neither does the last
// round at a stop (final), whose outputs are fsynced in parallel. The
// round comes back on lagged, where the writer removes the markers; an
// output whose flush failed comes back with out nil and keeps its marker
// (the next runner checks it against its result).
func (w *resultWriter) syncLag(final bool) {
	round := w.lag
	w.lag, w.inRound = nil, len(round)
	go func() {
		fail := func(l *lagging) {
			_ = l.out.Close() // Reported by the caller.
			l.out = nil
		}
		if len(round) > 1 && !final && w.cfg.ops.syncFS != nil {
			if err := w.cfg.ops.syncFS(); err != nil {
				w.cfg.log.Error("syncfs after results failed (the cause may be any file on the filesystem); the next runner checks their outputs against the results",
					"outputs", len(round), "err", err)
				for i := range round {
					fail(&round[i])
				}
			}
			w.lagged <- round
			return
		}
		one := func(l *lagging) {
			if err := w.cfg.ops.sync(l.out); err != nil {
				w.cfg.log.Error("fsync of an output after its result failed; the next runner checks it against the result",
					"file", l.path, "err", err)
				fail(l)
			}
		}
		if len(round) == 1 {
			one(&round[0]) // A round trip's round: no goroutine more (issue 44).
		} else {
			var wg sync.WaitGroup
			for i := range round {
				wg.Add(1)
				go func() {
					defer wg.Done()
					one(&round[i])
				}()
			}
			wg.Wait()
		}
		w.lagged <- round
	}()
}

// commitAll commits batch in order, retrying from the first job that fails.
func (w *resultWriter) commitAll(batch []resultJob) {
	delay := w.cfg.retryMin
	failing := false
	for len(batch) > 0 {
		n, err := w.commit(batch)
		batch = batch[n:]
		if err == nil {
			break
		}
		failing = true
		w.setStatus(writerStatus{pending: len(batch) + len(w.jobs), err: err})
		w.cfg.log.Error("committing a result failed; retrying", "name", batch[0].name, "err", err, "retry_in", delay)
		select {
		case <-w.quit:
			for _, j := range batch {
				w.giveUp(j, err)
			}
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, w.cfg.retryMax)
	}
	if failing {
		w.setStatus(writerStatus{})
	}
}

// giveUp reports a job that was not committed. Its output file is closed;
// its command stays in inflight/, which the next runner settles.
func (w *resultWriter) giveUp(j resultJob, err error) {
	if j.out != nil {
		_ = j.out.Close() // Already reported as not committed.
	}
	w.done <- resultDone{job: j, err: err}
}

func (w *resultWriter) setStatus(s writerStatus) {
	select {
	case <-w.status: // Replace an unread status: only the latest matters.
	default:
	}
	w.status <- s
}

// staged is a job's result written under a temporary name.
type staged struct {
	tmp    *os.File
	data   []byte
	inline bool // the result carries the output: its file is flushed later
}

// commit makes a prefix of batch durable and visible and reports how many
// jobs it finished; err is why the next one could not be.
//
// The temporary result files (and the output files that are not copied
// into their results) are fsynced at once, in parallel. A small output
// rides in its result (output_inline) whether the result is committed
// alone (a round trip) or with others (a backlog): its own file is
// flushed in the next lag round, off the critical path. Parallel fsyncs
// hardly share the disk's flushes (a group commit that also fsynced its
// outputs cost 2.0 flushes a command, measured), so what is not fsynced
// before the rename is what makes a backlog faster.
func (w *resultWriter) commit(batch []resultJob) (int, error) {
	st := make([]staged, len(batch))
	w.cfg.root.SweepLater()
	defer func() {
		for _, s := range st {
			if s.tmp != nil {
				s.tmp.Close()
				w.cfg.root.RemoveOrLater(w.cfg.root.RelOf(s.tmp.Name()))
			}
		}
	}()
	var firstErr error
	ready, nLag := len(batch), 0
	for i := range batch {
		if err := w.stage(&batch[i], &st[i], nLag); err != nil {
			ready, firstErr = i, err
			break
		}
		if st[i].inline {
			nLag++
		}
	}
	if w.cfg.durable {
		errs := make([]error, ready)
		syncJob := func(i int) {
			if j := batch[i]; j.out != nil && !st[i].inline {
				if err := w.cfg.ops.sync(j.out); err != nil {
					errs[i] = fmt.Errorf("fsync %s: %w", j.res.OutputPath, err)
					return
				}
			}
			if st[i].tmp != nil {
				if err := w.cfg.ops.sync(st[i].tmp); err != nil {
					errs[i] = fmt.Errorf("fsync the result of %s: %w", batch[i].name, err)
				}
			}
		}
		if ready == 1 && (batch[0].out == nil || st[0].inline) {
			syncJob(0) // One fsync (a round trip's): no goroutine to start and wake (issue 44).
		} else {
			var wg sync.WaitGroup
			for i := 0; i < ready; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					syncJob(i)
				}()
			}
			wg.Wait()
		}
		for i, err := range errs {
			if err != nil {
				ready, firstErr = i, err
				break
			}
		}
	}
	for i := 0; i < ready; i++ {
		existed, err := w.place(batch[i], &st[i])
		if err != nil {
			return i, err
		}
		if j := batch[i]; st[i].inline && !existed {
			failpoint("result_output_lagging")
			w.lag = append(w.lag, lagging{out: j.out, path: j.res.OutputPath, marker: lagMarker(j.name)})
			batch[i].out = nil // Closed once fsynced.
		} else if j.marked {
			// The result that stands is an earlier one's, or this attempt
			// fsynced the output first (no marker could be made now).
			w.cfg.root.RemoveOrLater(lagMarker(j.name))
		}
		w.finish(batch[i], existed)
	}
	return ready, firstErr
}

// stage fills in the runner's fields of j.res and writes it to a temporary
// file in tmp/. nLag counts the outputs of the batch staged before j
// that will wait for their flush (their result carries them inline).
func (w *resultWriter) stage(j *resultJob, s *staged, nLag int) error {
	res := j.res
	res.ProtocolVersion = protocol.Version
	res.RunnerHost = w.cfg.host
	if res.EndTS.IsZero() {
		res.EndTS = protocol.Now()
	}
	if res.StartTS.IsZero() {
		res.StartTS = res.EndTS
	}
	if res.PayloadSHA256 == "" && j.text != "" {
		res.PayloadSHA256 = sha256Hex(j.text)
	}
	if j.kind == jobRun || j.kind == jobEarly {
		res.TailPath = protocol.FileTail
	}
	if s.data == nil && j.kind == jobRun && j.out != nil && j.outErr == nil {
		if err := w.keepOutput(j); err != nil {
			return err // Retried: output/ is swapped for a symlink now, and will be back.
		}
	}
	if j.outErr != nil && s.data == nil {
		w.describeIncompleteOutput(j)
	}
	if s.data == nil {
		s.inline = len(w.lag)+w.inRound+nLag < maxLag && w.inlineOutput(j)
		if s.inline {
			// The marker exists before the result can: made now, it is
			// in inflight/ whenever the result is in result/ and the
			// output file may not be durable yet.
			m, err := w.cfg.root.CreateNew(lagMarker(j.name), 0o600)
			switch {
			case err == nil:
				m.Close()
				j.marked = true
			case errors.Is(err, os.ErrExist):
				j.marked = true
			default:
				s.inline = false // No marker (inflight/ deleted?): fsync the output first, as for a large one.
			}
		}
		s.data = marshal(res)
	}
	f, err := w.cfg.ops.temp()
	if err != nil {
		return fmt.Errorf("create a temporary result file: %w", err)
	}
	s.tmp = f
	if err := w.cfg.ops.write(f, s.data); err != nil {
		return fmt.Errorf("write the result of %s: %w", j.name, err)
	}
	if w.cfg.spares == nil { // Spares are made with the mode (fsq.NewSpares); tests' temp files are not.
		if fi, err := f.Stat(); err == nil && fi.Mode().Perm() != w.cfg.filePerm {
			_ = f.Chmod(w.cfg.filePerm)
		}
	}
	return nil
}

// place renames a staged result into result/ without replacing anything,
// recreating result/ if someone deleted it.
func (w *resultWriter) place(j resultJob, s *staged) (existed bool, err error) {
	dst := filepath.Join(w.cfg.dir, protocol.DirResult, j.name)
	if err := s.tmp.Close(); err != nil {
		return false, fmt.Errorf("close the result of %s: %w", j.name, err)
	}
	err = w.cfg.ops.place(s.tmp.Name(), dst)
	if errors.Is(err, os.ErrNotExist) && w.recreate(protocol.DirResult) {
		err = w.cfg.ops.place(s.tmp.Name(), dst)
	}
	if errors.Is(err, os.ErrExist) && w.displace(j.name, dst) {
		err = w.cfg.ops.place(s.tmp.Name(), dst)
	}
	switch {
	case errors.Is(err, os.ErrExist):
		w.cfg.root.RemoveOrLater(w.cfg.root.RelOf(s.tmp.Name()))
		s.tmp = nil
		return true, nil
	case err != nil:
		// Reopen so that the deferred cleanup and a retry both work.
		f, oerr := w.cfg.root.OpenFile(w.cfg.root.RelOf(s.tmp.Name()), os.O_RDWR, 0)
		if oerr == nil {
			s.tmp = f
		} else {
			w.cfg.root.RemoveOrLater(w.cfg.root.RelOf(s.tmp.Name())) // tmp/ unreachable: removed once it is back.
			s.tmp = nil
		}
		return false, fmt.Errorf("rename the result of %s into result/: %w", j.name, err)
	}
	s.tmp = nil
	return false, nil
}

// displace moves aside what stands at dst if it is not a result — a FIFO,
// a symlink, a directory, a device someone put there before the result was
// written — so that the command still gets its one result; it reports
// whether it did. A regular file is a result and always stands.
func (w *resultWriter) displace(name, dst string) bool {
	root := w.cfg.root
	fi, err := root.Lstat(root.RelOf(dst))
	if err != nil || fi.Mode().IsRegular() {
		return false
	}
	aside := rel(protocol.DirTmp, fmt.Sprintf(".displaced-%d-%s", wallNow().UnixNano(), name))
	if err := root.Rename(root.RelOf(dst), aside); err != nil {
		w.cfg.log.Error("cannot move aside what stands where a result goes", "file", dst, "err", err)
		return false
	}
	_ = root.RemoveAll(aside) // tmp/ is emptied at the next start anyway.
	w.displaced = append(w.displaced, map[string]any{"displaced": protocol.DirResult + "/" + name, "was": fsq.FileType(fi)})
	return true
}

// recreate makes a session directory someone deleted again, and reports
// whether it now exists.
func (w *resultWriter) recreate(rel string) bool {
	err := w.cfg.ops.mkdir(rel)
	if errors.Is(err, os.ErrExist) {
		return true // Not deleted: what is missing is something else (the file itself).
	}
	if err != nil {
		w.cfg.log.Error("cannot recreate a deleted session directory", "dir", rel, "err", err)
		return false
	}
	w.cfg.log.Warn("recreated a deleted session directory", "dir", rel)
	w.recreated = append(w.recreated, rel)
	return true
}

// finish moves the command file aside once its result is visible, removes
// the payload file, and reports the job done.
func (w *resultWriter) finish(j resultJob, existed bool) {
	if j.out != nil {
		_ = j.out.Close() // fsync reported what matters.
	}
	w.move(j, existed)
	w.report(j, existed)
}

// report tells the owner a job is committed.
func (w *resultWriter) report(j resultJob, existed bool) {
	w.done <- resultDone{job: j, existed: existed, recreated: w.recreated, displaced: w.displaced}
	w.recreated, w.displaced = nil, nil
}

// move moves the command file of a committed job aside and removes its
// payload file.
func (w *resultWriter) move(j resultJob, existed bool) {
	if j.cmdFile != "" {
		src := filepath.Join(w.cfg.dir, j.cmdFile)
		switch {
		case (existed && j.kind != jobRecovered) || j.keepAt == "":
			// The result that stands belongs to an earlier file of this
			// name; this one is only evidence of a re-drop.
			_ = w.cfg.root.Remove(j.cmdFile)
		default:
			dst := filepath.Join(w.cfg.dir, j.keepAt)
			err := w.cfg.ops.move(src, dst)
			if errors.Is(err, os.ErrNotExist) && w.recreate(filepath.Dir(j.keepAt)) {
				err = w.cfg.ops.move(src, dst)
			}
			// A session directory swapped for a symlink: the file is kept
			// where it is until the layout is fixed (or the writer is
			// aborted: the next runner then finds the result and settles it).
			for delay := w.cfg.retryMin; errors.Is(err, fsq.ErrLayout); delay = min(2*delay, w.cfg.retryMax) {
				w.cfg.log.Error("cannot keep the command file; retrying", "from", j.cmdFile, "to", j.keepAt, "err", err, "retry_in", delay)
				select {
				case <-w.quit:
				case <-time.After(delay):
					err = w.cfg.ops.move(src, dst)
					continue
				}
				break
			}
			if errors.Is(err, os.ErrNotExist) && j.raw != nil {
				// Someone took it from inflight/ (deleted or swapped the
				// directory, or the file) after the last heartbeat: it is
				// kept from what the runner claimed, where its result says.
				err = w.cfg.root.WriteAtomic(j.keepAt, j.raw, w.cfg.filePerm, fsq.Volatile)
				w.cfg.log.Warn("the command file was gone from inflight/; kept it from what the runner claimed", "to", j.keepAt, "err", err)
				if err == nil {
					w.displaced = append(w.displaced, map[string]any{"recreated": j.keepAt,
						"message": "the command file was gone from " + j.cmdFile + " when its result was written; it was kept from the bytes the runner claimed"})
				}
			}
			if errors.Is(err, os.ErrNotExist) {
				// Someone took it from inflight/ (deleted the directory, or
				// the file) after it ran: its result stands, and names
				// where it would have been kept.
				w.cfg.log.Warn("the command file was gone before it could be kept", "from", j.cmdFile, "to", j.keepAt)
			}
			if err != nil && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, fsq.ErrLayout) {
				// inflight/ must not keep it, or the next runner would take
				// it for an interrupted command: its result exists.
				w.cfg.log.Error("cannot keep the command file", "from", j.cmdFile, "to", j.keepAt, "err", err)
				_ = w.cfg.root.Remove(j.cmdFile)
			}
		}
	}
	if j.payload != "" {
		_ = w.cfg.root.Remove(j.payload) // Gone already is fine.
	}
}

// inlineOutput puts a copy of a small output into its result
// (Result.OutputInline) when results are fsynced, and reports whether it
// did: the result's fsync then makes the output durable, and the output
// file's own fsync leaves the critical path. The copy is read back from
// the file (the page cache) and must match output_sha256; an empty output
// needs no copy (its file is rebuilt from the hash alone).
func (w *resultWriter) inlineOutput(j *resultJob) bool {
	res := j.res
	if !w.cfg.durable || w.cfg.network || j.kind != jobRun || j.out == nil || j.outErr != nil ||
		res.Stats.Bytes > protocol.MaxInlineOutput || res.OutputSHA256 == "" {
		return false
	}
	buf := make([]byte, res.Stats.Bytes)
	if n, err := j.out.ReadAt(buf, 0); int64(n) != res.Stats.Bytes || (err != nil && !errors.Is(err, io.EOF)) {
		return false
	}
	if sum := sha256.Sum256(buf); hex.EncodeToString(sum[:]) != res.OutputSHA256 {
		return false
	}
	if len(buf) > 0 {
		res.OutputInline = buf
	}
	return true
}

// keepOutput makes sure the output file the command wrote is the one at
// its name in the session before its result says so. Someone may have
// moved output/ elsewhere, or deleted it (or the file), while the command
// printed: the runner then wrote into a file that is no longer the
// session's, and its result would describe bytes the session does not
// have. The file is then rebuilt in output/ from the descriptor the runner
// still holds (what it wrote, byte for byte), with a warning event
// (output_rebuilt); if that cannot be done (output/ cannot be made again:
// mayRecreate), the result says plainly that the output is gone
// (describeIncompleteOutput: io_error, stats of what the session holds).
// A layout that is broken now (output/ swapped for a symlink) is returned
// as an error: the commit is retried until the directory is back.
func (w *resultWriter) keepOutput(j *resultJob) error {
	root := w.cfg.root
	held, err := j.out.Stat()
	if err != nil {
		return nil // Nothing to compare; the fsync reports a dead descriptor.
	}
	cur, err := root.Lstat(j.res.OutputPath)
	switch {
	case err == nil && fsq.SameFile(held, cur):
		return nil
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("check the output file %s: %w", j.res.OutputPath, err)
	}
	f, err := w.rebuildOutput(j, held.Size())
	if err != nil {
		j.outErr = fmt.Errorf("the output file was moved or deleted out of %s/ while the command ran (%d bytes printed), and could not be put back: %w",
			protocol.DirOutput, j.res.Stats.Bytes, err)
		w.cfg.log.Error("an output file left the session and could not be rebuilt", "file", j.res.OutputPath, "err", err)
		return nil
	}
	_ = j.out.Close() // The moved or deleted file: its bytes are in f.
	j.out = f
	w.cfg.log.Warn("an output file left the session while its command ran; rebuilt it from what the runner wrote", "file", j.res.OutputPath)
	w.displaced = append(w.displaced, map[string]any{"output_rebuilt": j.res.OutputPath, "bytes": held.Size(),
		"why": "the output file was moved or deleted out of output/ while the command ran"})
	return nil
}

// rebuildOutput copies the size bytes the runner wrote into j.out (a file
// no longer at its name) into a new file at j's output name, through tmp/
// and a rename, and returns it open.
func (w *resultWriter) rebuildOutput(j *resultJob, size int64) (*os.File, error) {
	root := w.cfg.root
	if _, err := root.Lstat(protocol.DirOutput); errors.Is(err, os.ErrNotExist) && !w.recreate(protocol.DirOutput) {
		return nil, fmt.Errorf("%s/ is gone and was not made again: %w", protocol.DirOutput, w.cfg.hold.mayRecreate(root, protocol.DirOutput))
	}
	return copyOutput(root, j.out, size, j.res.OutputPath, w.cfg.filePerm)
}

// readerOf opens the file f for reading: f itself where it was opened for
// reading too (a spare), else anew through /proc (f may have no name left).
func readerOf(f *os.File) (*os.File, error) {
	fl, err := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0)
	if err == nil && fl&unix.O_ACCMODE == unix.O_RDWR {
		fd, err := unix.Dup(int(f.Fd()))
		if err == nil {
			return os.NewFile(uintptr(fd), f.Name()), nil
		}
	}
	return os.Open(fmt.Sprintf("/proc/self/fd/%d", f.Fd()))
}

// lagMarker is the marker of a lagging output (resultWriter.lag).
func lagMarker(name string) string { return rel(protocol.DirInflight, lagPrefix+name) }

// chmodIfNeeded gives f exactly perm (the umask may have narrowed it).
func chmodIfNeeded(f *os.File, perm os.FileMode) error {
	if fi, err := f.Stat(); perm == 0 || (err == nil && fi.Mode().Perm() == perm.Perm()) {
		return nil
	}
	return f.Chmod(perm)
}

// describeIncompleteOutput rewrites a result whose output file could not
// be written completely (a full disk): its stats and sha256 then describe
// what the file holds, and the error says what is missing. The command's
// own outcome (tool_rc, value) is kept.
func (w *resultWriter) describeIncompleteOutput(j *resultJob) {
	res := j.res
	printed := res.Stats.Bytes
	var n, lines int64
	sum := sha256.New()
	if f, err := w.cfg.root.OpenRegular(res.OutputPath); err == nil {
		buf := make([]byte, 64<<10)
		for {
			k, rerr := f.Read(buf)
			n += int64(k)
			lines += int64(bytes.Count(buf[:k], newline))
			sum.Write(buf[:k])
			if rerr != nil {
				break
			}
		}
		f.Close()
	}
	res.Stats.Bytes, res.Stats.Lines = n, lines
	res.OutputSHA256 = hex.EncodeToString(sum.Sum(nil))
	msg := fmt.Sprintf("output incomplete: %s holds %d of the %d bytes the command printed (%v)", res.OutputPath, n, printed, j.outErr)
	if res.Error == nil {
		res.Status, res.Error = protocol.StatusError, &protocol.Error{Code: protocol.CodeIO, Message: msg}
	} else {
		res.Error.Message += "; " + msg
	}
	res.Error.Context = addContext(res.Error.Context, "file", res.OutputPath)
}

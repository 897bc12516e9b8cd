package runner

// The owner's side of retention (PROTOCOL.md section 23): what is kept,
// when a batch goes to the pruner (pruner.go), the spool's cut and the
// event log's rotation. The decisions are retention.go's.

import (
	"cmp"
	"errors"
	"os"
	"slices"
	"strings"

	"github.com/skillpilot/skillpilot/protocol"
	"golang.org/x/sys/unix"
)

// retainState is the runner's part that keeps a long-lived session's size
// flat. It is owned by the Run goroutine.
type retainState struct {
	pol    retentionPolicy
	loaded bool // the kept list is known (after recovery): results join it from now on
	kept   []keptEntry
	head   int // kept[head:] are the entries
	p      *pruner
	busy   bool // a job is with the pruner
	// metaGen is the event log's generation (log/meta.log), counted from 0
	// at this runner's start; startGen is what results found at start are
	// taken to be in (-1 when a meta.log.1 existed: either file).
	metaGen, startGen int
	begun             map[beginKey]begunCmd // cmd_begin written, result not yet kept
	cut               int64                 // log/session.out is cut below this
	noPunch           error                 // why the spool cannot be cut (reported once)
	pruned            int64                 // commands pruned by this runner
	beats             int64
	sweepDue          bool
	sinceSweep        int    // results kept since the last sweep
	failing           string // why the last job could not record its commands ("" when it could)
}

// begunCmd is where a command's cmd_begin went.
type begunCmd struct {
	gen   int
	start int64
}

// sweepEvery is how many heartbeats apart sweeps run (seq/, withdrawn/,
// ctl/ack/, log/rejected/): each lists those directories. A busy session
// sweeps every sweepAfter results too, so that seq/ (a file per command)
// stays within seqKeep plus about that many.
const (
	sweepEvery = 16
	sweepAfter = 1024
)

// policyOf is the retention policy cfg sets.
func policyOf(cfg Config) retentionPolicy {
	p := retentionPolicy{keepAge: cfg.KeepResults, keepLast: cfg.KeepLast, grace: cfg.PruneGrace,
		keepIDs: cfg.KeepIDs, maxSpool: cfg.MaxSpoolBytes, maxMeta: cfg.MaxMetaBytes}
	if p.grace < 0 {
		p.grace = 0
	}
	return p
}

func (k *retainState) live() []keptEntry { return k.kept[k.head:] }

// initRetention runs at the end of Open, once recovery has settled the
// session: the pruned index is read (always: a cmd_id pruned by an earlier
// runner stays taken), and with retention on the kept results are listed,
// the pruner started and a first sweep queued.
func (r *Runner) initRetention() error {
	k := &r.disk.retain
	k.pol = policyOf(r.cfg)
	k.begun = map[beginKey]begunCmd{}
	cur, err := r.readIndexFile(protocol.FilePruned)
	if err != nil {
		return err
	}
	old, err := r.readIndexFile(protocol.FilePrunedOld)
	if err != nil {
		return err
	}
	r.queue.pruned.load(cur, old)
	if _, err := r.root.Lstat(protocol.FileMetaOld); err == nil {
		k.startGen = -1
	}
	if !k.pol.on() {
		return nil
	}
	if err := r.loadKept(); err != nil {
		return err
	}
	if fi, err := r.root.Lstat(protocol.FileSpool); err == nil {
		k.cut = firstData(r.disk.spool, fi.Size())
	}
	k.p = newPruner(r.root, r.log, !r.cfg.NoSync, r.layout.perms.file)
	k.loaded = true
	k.sweepDue = true
	r.submitPrune(true, r.orphans())
	return nil
}

// readIndexFile reads a pruned index file (nil when there is none).
func (r *Runner) readIndexFile(name string) ([]byte, error) {
	b, _, err := r.root.ReadFile(name, protocol.MaxPrunedFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, plantedErr(name, err) // A symlink or FIFO there: the runner refuses to start, saying so.
	}
	return b, nil
}

// firstData is the first offset of f holding data (SEEK_DATA): where an
// earlier runner's cut left the spool. 0 when unknown.
func firstData(f *os.File, size int64) int64 {
	if f == nil || size == 0 {
		return 0
	}
	off, err := unix.Seek(int(f.Fd()), 0, unix.SEEK_DATA)
	if err != nil || off < 0 {
		return 0
	}
	return off / punchStep * punchStep
}

// loadKept lists result/ and reads each result once: its end_ts orders it,
// its spool range and command and output files are what leave with it.
func (r *Runner) loadKept() error {
	names, err := r.root.ReadNames(protocol.DirResult)
	if err != nil {
		return err
	}
	k := &r.disk.retain
	now := wallNow()
	for _, name := range names {
		if strings.HasPrefix(name, ".") {
			continue
		}
		fi, err := r.root.Lstat(rel(protocol.DirResult, name))
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		e := keptEntry{name: name, at: fi.ModTime(), start: -1, metaGen: k.startGen}
		if _, id, err := protocol.ParseCommandName(name); err == nil {
			e.id = id
		}
		if res, ok := r.readResult(name); ok {
			e.fill(res)
		} else {
			e.cmdPath, e.outPath = rel(protocol.DirArchive, name), rel(protocol.DirOutput, protocol.OutputName(name))
		}
		if e.ended.IsZero() {
			e.ended = e.at
		}
		// Its line is in the index already when a runner died between
		// writing it and removing the files (not the in-memory index of
		// this runner's own batches: a batch that failed is retried with
		// its lines).
		e.indexed = e.id != "" && r.queue.pruned.hasName(name)
		if e.at.After(now) {
			// Written by a runner whose clock was ahead: its age counts
			// from now. Left ahead, it would sort last, reach the front
			// and end every pass (the grace test) until the clock caught up.
			e.at = now
		}
		k.kept = append(k.kept, e)
	}
	slices.SortStableFunc(k.kept, func(a, b keptEntry) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return cmp.Compare(a.name, b.name)
	})
	return nil
}

// fill takes what a result says into e.
func (e *keptEntry) fill(res *protocol.Result) {
	if !res.EndTS.IsZero() {
		e.at, e.ended = res.EndTS.Time, res.EndTS.Time
	}
	e.status = res.Status
	e.start, e.end = -1, -1
	if res.SpoolEnd > res.SpoolStart {
		e.start, e.end = res.SpoolStart, res.SpoolEnd
	}
	e.cmdPath = res.CommandPath
	if !strings.HasPrefix(e.cmdPath, protocol.DirArchive+"/") && !strings.HasPrefix(e.cmdPath, protocol.DirRejected+"/") {
		e.cmdPath = "" // Only a file the runner kept leaves with the result.
	}
	if res.OutputPath == rel(protocol.DirOutput, protocol.OutputName(e.name)) {
		e.outPath = res.OutputPath
	}
}

// orphans lists the output and kept command files of commands the index
// holds whose result is gone: what a crash between the removals left.
func (r *Runner) orphans() []string {
	var out []string
	for _, d := range []struct {
		dir string
		cmd func(string) string // the command file's name of a file there
	}{
		{protocol.DirOutput, func(n string) string { return strings.TrimSuffix(n, ".out") + ".json" }},
		{protocol.DirArchive, func(n string) string { return n }},
		{protocol.DirRejected, func(n string) string { return n }}, // An invalid command's kept file (a duplicate's refusal).
	} {
		names, err := r.root.ReadNames(d.dir)
		if err != nil {
			continue
		}
		for _, n := range names {
			cmd := d.cmd(n)
			_, id, err := protocol.ParseCommandName(cmd)
			if err != nil {
				continue
			}
			if !r.queue.pruned.hasName(cmd) || r.queue.done[id] == cmd {
				continue
			}
			if _, err := r.root.Lstat(rel(protocol.DirResult, cmd)); err == nil {
				continue
			}
			out = append(out, rel(d.dir, n))
		}
	}
	return out
}

// keepResult adds a committed result to the kept list.
func (r *Runner) keepResult(j resultJob) {
	k := &r.disk.retain
	if !k.loaded {
		return
	}
	res := j.res
	now := wallNow()
	e := keptEntry{name: j.name, at: now, metaGen: k.metaGen}
	if _, id, err := protocol.ParseCommandName(j.name); err == nil {
		e.id = id
	}
	e.fill(res)
	if e.ended.IsZero() {
		e.ended = now
	}
	// Its age counts from now, when its result appeared: a master that
	// waits for it has the grace from then. A recovered result's end_ts is
	// the dead runner's last sign, long ago; an end_ts ahead of this
	// clock would hold back every pass.
	e.at = now
	key := beginKey{res.Seq, res.CmdID}
	switch j.kind {
	case jobRun, jobEarly:
		if b, ok := k.begun[key]; ok {
			e.metaGen = b.gen
		}
	case jobRecovered:
		e.metaGen = k.startGen
	}
	delete(k.begun, key)
	k.kept = append(k.kept, e)
	if k.sinceSweep++; k.sinceSweep >= sweepAfter {
		k.sweepDue = true
	}
	r.maybePrune(false)
}

// noteBegin records where a command's cmd_begin went (its events must stay
// until it is pruned).
func (r *Runner) noteBegin(e protocol.Event) {
	if r.disk.retain.begun == nil || e.SpoolStart == nil {
		return
	}
	r.disk.retain.begun[beginKey{e.Seq, e.CmdID}] = begunCmd{gen: r.disk.retain.metaGen, start: *e.SpoolStart}
}

// maybePrune hands the pruner its next batch when one is due: at least
// minBatch commands, or any number when force (a heartbeat).
func (r *Runner) maybePrune(force bool) {
	k := &r.disk.retain
	if !k.loaded || k.busy {
		return
	}
	live := k.live()
	drop := noDrop
	if k.pol.maxMeta > 0 && r.metaRotationDue() {
		drop = k.metaGen - 1
	}
	n, why := k.pol.toPrune(live, wallNow(), r.disk.spoolSize, drop)
	if n == 0 || (!force && n < minBatch) {
		if k.sweepDue && (force || k.sinceSweep >= sweepAfter) {
			r.submitPrune(false, nil)
		}
		return
	}
	j := pruneJob{entries: slices.Clone(live[:n]), why: why}
	var idx []protocol.PrunedEntry
	for _, e := range j.entries {
		if e.id == "" {
			continue // A misnamed file's result: its cmd_id was never taken.
		}
		if e.indexed {
			continue // Recorded by a runner that died before removing its files: one line is enough.
		}
		idx = append(idx, protocol.PrunedEntry{Name: e.name, Status: e.status, EndTS: e.ended})
	}
	if len(idx) > 0 && r.queue.pruned.lines() >= max(k.pol.keepIDs, 1) {
		j.rotate = true
		r.queue.pruned.rotate()
	}
	r.queue.pruned.appendEntries(idx)
	for _, e := range idx {
		j.lines = e.AppendLine(j.lines)
	}
	for _, e := range j.entries {
		if e.id != "" && r.queue.done[e.id] == e.name {
			delete(r.queue.done, e.id) // The index answers for it from now on.
		}
	}
	k.head += n
	if k.head > 1024 && k.head > len(k.kept)/2 {
		k.kept = slices.Clone(k.kept[k.head:])
		k.head = 0
	}
	if k.sweepDue && (force || k.sinceSweep >= sweepAfter) {
		j.sweep = r.sweepJob(nil)
	}
	k.busy = true
	k.p.submit(j)
}

// submitPrune hands the pruner a sweep (and orphans to remove), when it
// is free.
func (r *Runner) submitPrune(_ bool, orphans []string) {
	k := &r.disk.retain
	if k.busy || k.p == nil {
		return
	}
	k.busy = true
	k.p.submit(pruneJob{sweep: r.sweepJob(orphans)})
}

func (r *Runner) sweepJob(orphans []string) *sweepJob {
	r.disk.retain.sweepDue, r.disk.retain.sinceSweep = false, 0
	age := r.disk.retain.pol.keepAge
	if age <= 0 {
		age = r.disk.retain.pol.grace
	}
	return &sweepJob{now: wallNow(), age: max(age, r.disk.retain.pol.grace), seqKeep: seqKeep, orphans: orphans}
}

// onPruned takes a job's report: the pruned event, and the next batch.
func (r *Runner) onPruned(d pruneDone) {
	k := &r.disk.retain
	k.busy = false
	if d.note != "" {
		r.event(protocol.Event{Event: protocol.EvWarning, Detail: map[string]any{"retention": d.note}})
	}
	if d.err != nil {
		// Nothing of the batch was removed: its commands go back to the
		// front of the list (the index in memory keeps them, which only
		// refuses what is already refused) and are retried, at every
		// heartbeat; the failure is said once, until it changes.
		if msg := d.err.Error(); msg != k.failing {
			k.failing = msg
			r.log.Error("retention: cannot record pruned commands; nothing is removed until it can", "err", d.err)
			r.event(protocol.Event{Event: protocol.EvWarning, Detail: map[string]any{"retention": "cannot record pruned commands", "error": msg}})
		}
		k.kept = append(slices.Clone(d.job.entries), k.live()...)
		k.head = 0
		for _, e := range d.job.entries {
			if e.id != "" {
				r.queue.done[e.id] = e.name
			}
		}
		return
	}
	if k.failing != "" && len(d.job.entries) > 0 {
		k.failing = ""
		r.event(protocol.Event{Event: protocol.EvWarning, Detail: map[string]any{"retention": "pruned commands are recorded again"}})
	}
	if n := len(d.job.entries); n > 0 || len(d.swept) > 0 {
		k.pruned += int64(n)
		detail := map[string]any{"commands": n, "files_removed": d.removed}
		if n > 0 {
			by := map[string]int{}
			for _, w := range d.job.why {
				by[w]++
			}
			detail["first"], detail["last"], detail["by"] = d.job.entries[0].name, d.job.entries[n-1].name, by
		}
		if len(d.swept) > 0 {
			detail["swept"] = d.swept
		}
		r.event(protocol.Event{Event: protocol.EvPruned, Detail: detail})
		r.status.dirty = true
	}
	r.cutSpool()
	r.maybeRotateMeta()
	r.maybePrune(false)
}

// retainBeat is retention's part of a heartbeat.
func (r *Runner) retainBeat() {
	k := &r.disk.retain
	if !k.loaded {
		return
	}
	k.beats++
	if k.beats%sweepEvery == 0 {
		k.sweepDue = true
	}
	r.maybeRotateMeta()
	r.cutSpool()
	r.maybePrune(true)
}

// spoolFrom is the first spool byte a kept or unfinished command needs.
func (r *Runner) spoolFrom() int64 {
	k := &r.disk.retain
	from := firstStart(k.live(), r.disk.spoolSize)
	for _, b := range k.begun {
		from = min(from, b.start)
	}
	return from
}

// cutSpool punches the bytes of log/session.out no kept command needs
// (fallocate PUNCH_HOLE): offsets stay as they were, the bytes read as
// zeros, their blocks are free. On a filesystem that cannot (NFS v3), the
// spool is not cut, and a warning says so once.
func (r *Runner) cutSpool() {
	k := &r.disk.retain
	if k.noPunch != nil || r.disk.spool == nil {
		return
	}
	c := spoolCut(k.cut, r.spoolFrom(), r.disk.spoolSize-int64(r.disk.spoolW.Buffered()))
	if c <= k.cut {
		return
	}
	err := unix.Fallocate(int(r.disk.spool.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, k.cut, c-k.cut)
	if err != nil {
		k.noPunch = err
		r.log.Warn("retention: log/session.out cannot be cut on this filesystem; it keeps growing", "err", err)
		r.event(protocol.Event{Event: protocol.EvWarning, Detail: map[string]any{"retention": "log/session.out cannot be cut on this filesystem (no hole punching); it keeps every byte", "error": err.Error()}})
		return
	}
	k.cut = c
}

// metaRotationDue reports whether log/meta.log has reached its segment size.
func (r *Runner) metaRotationDue() bool {
	return r.disk.meta != nil && r.disk.meta.Size() >= r.disk.retain.pol.metaSegment()
}

// maybeRotateMeta rotates the event log once it reached its segment size
// and the generation a rotation deletes holds no kept command's events:
// log/meta.log becomes log/meta.log.1 (the one before is deleted) and a
// new log/meta.log starts with a log_rotated event.
func (r *Runner) maybeRotateMeta() {
	k := &r.disk.retain
	if !k.loaded || !r.metaRotationDue() {
		return
	}
	drop := k.metaGen - 1
	gens := make([]int, 0, len(k.begun))
	for _, b := range k.begun {
		gens = append(gens, b.gen)
	}
	if metaBlocked(k.live(), gens, drop) {
		return // A hard cap prunes them (maybePrune); a soft one waits for their own rules.
	}
	if err := r.rotateMeta(); err != nil {
		r.log.Error("retention: cannot rotate log/meta.log", "err", err)
		return
	}
	k.metaGen++
}

// rotateMeta moves log/meta.log to log/meta.log.1 and goes on in a new
// log/meta.log, whose first event (log_rotated) says so.
func (r *Runner) rotateMeta() error {
	d := &r.disk
	if !r.cfg.NoSync {
		if err := d.meta.Sync(); err != nil {
			return err
		}
	}
	if err := r.root.Rename(protocol.FileMeta, protocol.FileMetaOld); err != nil {
		return err
	}
	next, _, err := r.root.OpenLog(protocol.FileMeta, r.layout.perms.file)
	if err != nil {
		return err
	}
	d.meta.Adopt(next)
	d.metaInfo, _ = r.root.Lstat(protocol.FileMeta)
	if !r.cfg.NoSync {
		_ = r.root.SyncDir(protocol.DirLog) // The rename; the syncer fsyncs the new file's lines.
	}
	r.event(protocol.Event{Event: protocol.EvLogRotated, Detail: map[string]any{
		"previous": protocol.FileMetaOld, "session_id": r.id.sessionID, "runner_pid": os.Getpid(),
		"spool_size": d.spoolSize, "generation": r.disk.retain.metaGen + 1}})
	return nil
}

// onLogsReopened forgets what the kept entries said of the spool and the
// event log: both were deleted and started anew.
func (r *Runner) onLogsReopened() {
	k := &r.disk.retain
	for i := range k.kept {
		k.kept[i].start, k.kept[i].end, k.kept[i].metaGen = -1, -1, k.metaGen
	}
	for key, b := range k.begun {
		k.begun[key] = begunCmd{gen: k.metaGen, start: min(b.start, r.disk.spoolSize)}
	}
	k.cut = 0
}

// settleRetention ends retention for a stop: no batch starts any more, and
// the one in flight is waited for and logged (its pruned event comes
// before runner_stop).
func (r *Runner) settleRetention() {
	k := &r.disk.retain
	k.loaded = false
	if k.busy && k.p != nil {
		r.onPruned(<-k.p.done)
	}
}

// closeRetention waits for the pruner's job in flight.
func (r *Runner) closeRetention() {
	if p := r.disk.retain.p; p != nil {
		p.close(func(d pruneDone) { r.onPrunedAtClose(d) })
		r.disk.retain.p = nil
	}
}

// onPrunedAtClose takes a last report without starting anything new.
func (r *Runner) onPrunedAtClose(d pruneDone) {
	if d.err == nil && len(d.job.entries) > 0 {
		r.disk.retain.pruned += int64(len(d.job.entries))
	}
}

// answered returns the result name a cmd_id has (pruned: its result left
// with retention, the index remembers it).
func (q *cmdQueue) answered(cmdID string) (name string, pruned bool, ok bool) {
	if n := q.done[cmdID]; n != "" {
		return n, false, true
	}
	if e, found := q.pruned.lookup(cmdID); found {
		return e.Name, true, true
	}
	return "", false, false
}

// isPruned reports whether cmdID's command had a result that retention
// removed.
func (q *cmdQueue) isPruned(cmdID string) bool {
	_, ok := q.pruned.lookup(cmdID)
	return ok
}

// prunedName reports whether name is a command the index holds (its
// result was pruned): a re-drop of it is skipped like one whose result
// is there.
func (q *cmdQueue) prunedName(name string) bool {
	return q.pruned.hasName(name)
}

// retentionState is state.json's "retention" (nil when retention is off).
func (r *Runner) retentionState() *protocol.Retention {
	k := &r.disk.retain
	if !k.pol.on() {
		return nil
	}
	return &protocol.Retention{KeepResultsS: k.pol.keepAge.Seconds(), KeepLast: k.pol.keepLast, PruneGraceS: k.pol.grace.Seconds(),
		KeepIDs: k.pol.keepIDs, MaxSpoolBytes: k.pol.maxSpool, MaxMetaBytes: k.pol.maxMeta,
		Kept: len(k.live()), Pruned: k.pruned, SpoolCut: k.cut}
}

// doneCh is where the pruner reports (nil without one).
func (k *retainState) doneCh() <-chan pruneDone {
	if k.p == nil {
		return nil
	}
	return k.p.done
}

package runner

import (
	"bufio"
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/protocol"
)

// recover runs before the first command: it learns which cmd_ids already
// have results, and settles every file a dead runner left in inflight/.
// A claimed command without a result gets exactly one result, status error,
// exit_reason runner_restarted: the tool state it ran in is gone, so it is
// never run again silently. A command whose cmd_begin has no cmd_end in the
// event log gets its cmd_end here, so begin and end pair across crashes.
// The results go through the result writer like every other, as one group
// commit, and are durable before Open returns.
func (r *Runner) recover() error {
	defer r.summarize()
	if r.pendingTakeover != nil {
		r.event(protocol.Event{Event: protocol.EvLockTakeover, Detail: r.pendingTakeover})
	}
	results, err := r.root.ReadDir(protocol.DirResult)
	if err != nil {
		return err
	}
	have := make(map[string]bool, len(results))
	for _, de := range results {
		name := de.Name()
		if !de.Type().IsRegular() {
			continue // Not a result: moved aside when the result is written (displace).
		}
		if _, id, err := protocol.ParseCommandName(name); err == nil {
			r.queue.done[id] = name
			have[name] = true
		}
	}
	inflight, err := r.root.ReadNames(protocol.DirInflight)
	if err != nil {
		return err
	}
	var leftovers []string
	checked := make(map[string]bool)
	for _, name := range inflight {
		p := rel(protocol.DirInflight, name)
		if _, _, perr := protocol.ParseCommandName(name); perr != nil {
			if c, ok := strings.CutPrefix(name, lagPrefix); ok && have[c] {
				// The output of a committed result whose fsync may not
				// have happened (results.go, lag).
				r.rebuildOutput(c)
				checked[c] = true
			}
			if r.root.RemoveAll(p) == nil { // A payload file or temp file of a dead run; inflight/ is the runner's own.
				r.recovery.removed++
			}
			continue
		}
		leftovers = append(leftovers, name)
	}
	clean := lastRunnerStopped(r.root, protocol.FileMeta)
	if !clean {
		// Neither a lag marker nor the result is fsynced in its directory
		// before the syncer's round: after a host crash the result's entry
		// may have reached the disk without the marker's. The newest
		// results are checked against their copies whatever the markers
		// say.
		r.rebuildNewest(have, checked)
	}
	if len(leftovers) == 0 && r.pendingTakeover == nil && clean {
		return nil // A clean stop left nothing to settle.
	}
	r.queue.openBegins = unendedBegins(r.queue.root, protocol.FileMetaOld, protocol.FileMeta)
	inflightKeys := make(map[beginKey]bool, len(leftovers))
	for _, name := range leftovers {
		seq, id, _ := protocol.ParseCommandName(name)
		inflightKeys[beginKey{seq, id}] = true
	}
	r.endSettled(inflightKeys)
	if len(leftovers) == 0 {
		return nil
	}
	r.recovery.claimed = len(leftovers)
	for _, name := range leftovers {
		seq, id, _ := protocol.ParseCommandName(name)
		job := resultJob{kind: jobRecovered, name: name, cmdFile: rel(protocol.DirInflight, name),
			keepAt: rel(protocol.DirArchive, name)}
		job.res = &protocol.Result{
			CmdID: id, Seq: seq, Status: protocol.StatusError, ExitReason: protocol.ReasonRunnerRestarted,
			Error: &protocol.Error{Code: protocol.CodeRunnerRestarted,
				Message: "the runner stopped while this command was claimed or running; it was not run again because the tool state it ran in is gone"},
			CommandPath: job.keepAt,
		}
		job.res.TraceID, job.res.Labels = r.correlation(job.cmdFile)
		// With a result already committed (only the move to archive/ was
		// missed) the writer finds it there and keeps it.
		if !have[name] {
			r.log.Warn("recovered an interrupted command", "name", name)
			r.describeInterrupted(&job)
		}
		r.submitResult(job)
	}
	// Wait for every recovery result: they are durable before anything
	// else happens.
	for len(r.queue.settling) > 0 {
		r.onResult(<-r.results.done)
	}
	if !r.cfg.NoSync {
		if err := r.root.SyncDir(protocol.DirResult); err != nil {
			return err
		}
		if err := r.disk.meta.Sync(); err != nil {
			return err
		}
	}
	for _, name := range leftovers {
		if _, err := r.root.Lstat(rel(protocol.DirInflight, name)); err == nil {
			return fmt.Errorf("cannot clear inflight/%s", name)
		}
	}
	return nil
}

// onRecovered logs what recovery did for one leftover: the recovered event
// and, when the dead runner logged its cmd_begin but no cmd_end, the
// missing cmd_end.
//
// The cmd_end follows the result that stands (PROTOCOL.md §13, §22): the
// one written now, or, when the dead runner had committed one before it
// died, that result as read from result/.
func (r *Runner) onRecovered(j resultJob, hadResult bool) {
	res := j.res
	key := beginKey{res.Seq, res.CmdID}
	if hadResult {
		if kept, ok := r.readResult(j.name); ok {
			res = kept
		}
	}
	if r.queue.endBegin(key) {
		r.recoveredEnd(key, res)
	}
	if hadResult {
		r.recovery.kept++
	} else {
		r.recovery.written++
	}
	r.event(protocol.Event{Event: protocol.EvRecovered, CmdID: key.id, Seq: key.seq, Status: res.Status,
		ExitReason: res.ExitReason, Detail: map[string]any{"had_result": hadResult}})
}

// endDetail adds to d what a cmd_end says of how the command ended
// (PROTOCOL.md section 22): tool_rc (null when the tool gave none),
// exit_code and signal when the tool exited, error_code, tool_restarted.
func endDetail(res *protocol.Result, d map[string]any) map[string]any {
	d["tool_rc"] = res.ToolRC
	if res.ExitCode != nil {
		d["exit_code"] = *res.ExitCode
	}
	if res.Signal != "" {
		d["signal"] = res.Signal
	}
	if res.Error != nil {
		d["error_code"] = res.Error.Code
	}
	if res.ToolRestarted {
		d["tool_restarted"] = true
	}
	return d
}

// recoveryCounts is what a runner's recovery at start did, written as
// one recovery_summary event.
type recoveryCounts struct {
	claimed int // commands a dead runner left in inflight/
	written int // of those, results written now (runner_restarted)
	kept    int // of those, results that were already there
	rebuilt int // of those, output files rebuilt from their result's copy
	ends    int // cmd_end events written for a dead runner's cmd_begin
	removed int // leftover files removed (temporary, spare, claimed control and non-command inflight files)
}

// summarize writes the recovery_summary event, when recovery did anything.
func (r *Runner) summarize() {
	c := r.recovery
	if c == (recoveryCounts{}) {
		return
	}
	d := map[string]any{"claimed": c.claimed, "results_written": c.written, "results_kept": c.kept,
		"cmd_end_written": c.ends, "files_removed": c.removed}
	if c.rebuilt > 0 {
		d["outputs_rebuilt"] = c.rebuilt
	}
	r.event(protocol.Event{Event: protocol.EvRecoverySummary, Detail: d})
}

// emptySHA256 is the sha256 of no bytes: an empty output's output_sha256.
var emptySHA256 = sha256Hex("")

// newestChecked is how many of the newest results (by seq) an unclean
// start checks against their output copies: as many as can wait for
// their outputs' flush at once (resultWriter.stage counts them).
const newestChecked = maxLag

// rebuildNewest runs rebuildOutput on the newestChecked results of
// highest seq in have that were not checked already.
func (r *Runner) rebuildNewest(have, checked map[string]bool) {
	type byseq struct {
		seq  int64
		name string
	}
	var all []byseq
	for name := range have {
		if seq, _, err := protocol.ParseCommandName(name); err == nil && !checked[name] {
			all = append(all, byseq{seq, name})
		}
	}
	slices.SortFunc(all, func(a, b byseq) int { return cmp.Compare(b.seq, a.seq) })
	for _, e := range all[:min(len(all), newestChecked)] {
		r.rebuildOutput(e.name)
	}
}

// rebuildOutput makes output/<name>.out hold what the result of name says
// it holds, for a command a dead runner left in inflight/ after committing
// its result. Such a result may carry its output (output_inline) and the
// output file's own fsync may not have happened before the machine
// crashed (results.go, lag): a file that is missing, shorter, longer or
// different from the copy is replaced by it (fsynced, then renamed), with
// a warning event. A result without a copy (a larger output, fsynced
// before the result appeared) or whose copy does not match its own
// output_sha256 is left alone.
func (r *Runner) rebuildOutput(name string) {
	data, _, err := r.root.ReadFile(rel(protocol.DirResult, name), maxResultRead)
	var res protocol.Result
	if err != nil || json.Unmarshal(data, &res) != nil {
		return
	}
	out := rel(protocol.DirOutput, protocol.OutputName(name))
	want := res.OutputInline
	if res.OutputPath != out || (want == nil && (res.Stats.Bytes != 0 || res.OutputSHA256 != emptySHA256)) ||
		sha256Hex(string(want)) != res.OutputSHA256 {
		return
	}
	if have, _, err := r.root.ReadFile(out, int64(len(want))+1); err == nil && bytes.Equal(have, want) {
		return
	}
	detail := map[string]any{"output_rebuilt": out, "bytes": len(want), "from": rel(protocol.DirResult, name)}
	if err := r.root.WriteAtomic(out, want, r.layout.perms.file, fsq.Durable); err != nil {
		r.log.Error("cannot rebuild an output file from its result", "file", out, "err", err)
		detail["error"] = err.Error()
	} else {
		r.log.Warn("rebuilt an output file from its result's copy", "file", out, "bytes", len(want))
		r.recovery.rebuilt++
	}
	r.event(protocol.Event{Event: protocol.EvWarning, CmdID: res.CmdID, Seq: res.Seq, Detail: detail})
}

type beginKey struct {
	seq int64
	id  string
}

// metaScanWindow bounds how much of the end of meta.log recovery reads to
// pair a dead runner's last cmd_begin events: the command it was running
// began among its last events.
const metaScanWindow = 16 << 20

// openBegin is a cmd_begin without its cmd_end in a dead runner's log:
// where the command's spool range starts, the end of its last cmd_output,
// and the spool_start of the next cmd_begin in the log (-1: none began
// after it); when it began (the event's ts) and the payload_sha256 it
// names.
type openBegin struct {
	start, end, next int64
	ts               protocol.Time
	payloadSHA       string
}

// unendedBegins lists the commands whose cmd_begin has no cmd_end in the
// last metaScanWindow bytes of the event log's files, read in the order
// given (log/meta.log.1 before log/meta.log: a rotation may fall between
// a begin and its end), with what the log says of their spool ranges.
func unendedBegins(root *fsq.Root, names ...string) map[beginKey]*openBegin {
	open := map[beginKey]*openBegin{}
	var waiting []*openBegin // begins whose next cmd_begin is not seen yet
	for _, name := range names {
		waiting = scanBegins(root, name, open, waiting)
	}
	return open
}

// scanBegins is unendedBegins over one file.
func scanBegins(root *fsq.Root, name string, open map[beginKey]*openBegin, waiting []*openBegin) []*openBegin {
	f, err := root.OpenRegular(name)
	if err != nil {
		return waiting
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return waiting
	}
	off := max(fi.Size()-metaScanWindow, 0)
	if _, err := f.Seek(off, 0); err != nil {
		return waiting
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.Contains(line, []byte(`"cmd_`)) {
			continue
		}
		var e protocol.Event
		if json.Unmarshal(line, &e) != nil {
			continue
		}
		k := beginKey{e.Seq, e.CmdID}
		switch e.Event {
		case protocol.EvCmdBegin:
			var at int64
			if e.SpoolStart != nil {
				at = *e.SpoolStart
			}
			for _, ob := range waiting { // Each begin is waited on once: linear in the log.
				ob.next = at
			}
			ob := &openBegin{start: at, end: at, next: -1, ts: e.TS}
			ob.payloadSHA, _ = e.Detail["payload_sha256"].(string)
			open[k], waiting = ob, append(waiting[:0], ob)
		case protocol.EvCmdOutput:
			if ob := open[k]; ob != nil && e.SpoolEnd != nil {
				ob.end = max(ob.end, *e.SpoolEnd)
			}
		case protocol.EvCmdEnd:
			delete(open, k)
		}
	}
	return waiting
}

// sweepLeftovers removes what an interrupted runner left outside tmp/:
// its temporary files beside results, state and logs (from versions that
// made them there), spare files, and claimed control files. tmp/ itself is
// emptied. It runs under the session lock, so no other runner is writing.
func (r *Runner) sweepLeftovers() error {
	if err := emptyDir(r.root, protocol.DirTmp, "ballast"); err != nil {
		return err
	}
	for _, d := range []string{protocol.DirResult, protocol.DirOutput, protocol.DirState, protocol.DirLog, protocol.DirArchive} {
		names, err := r.root.ReadNames(d)
		if err != nil {
			continue
		}
		for _, n := range names {
			if runnerTemp(d, n) && r.root.Remove(rel(d, n)) == nil { // Best effort; readers skip dot-files.
				r.recovery.removed++
			}
		}
	}
	if names, err := r.root.ReadNames(protocol.DirCtl); err == nil {
		for _, n := range names {
			if strings.Contains(n, ".taken.") {
				r.queue.discard(rel(protocol.DirCtl, n))
				r.recovery.removed++
			}
		}
	}
	return nil
}

// runnerTemp reports whether name in dir is a temporary or spare file of a
// runner (never a master's: masters write lease.json into state/ through
// their own temporary files, which are theirs to clean).
func runnerTemp(dir, name string) bool {
	if !strings.HasPrefix(name, ".") {
		return false
	}
	if strings.HasPrefix(name, fsq.SparePrefix) {
		return true
	}
	switch dir {
	case protocol.DirState:
		return strings.HasPrefix(name, ".state.json.") || strings.HasPrefix(name, ".heartbeat.json.")
	case protocol.DirLog:
		return strings.HasPrefix(name, ".last_n_lines.txt.")
	}
	return strings.HasSuffix(name, ".tmp")
}

// emptyDir removes every entry of dir (the runner's private tmp/) but a
// regular file named keep.
func emptyDir(root *fsq.Root, dir string, keep string) error {
	names, err := root.ReadNames(dir)
	if err != nil {
		return err
	}
	for _, n := range names {
		if fi, err := root.Lstat(rel(dir, n)); n == keep && err == nil && fi.Mode().IsRegular() {
			continue // The disk reserve outlives its runner (disk.go).
		}
		if err := root.RemoveAll(rel(dir, n)); err != nil {
			return err
		}
	}
	return nil
}

// maxResultRead bounds the read of a result recovery rebuilds a lost
// cmd_end from (results are small; a larger file is not one of ours).
const maxResultRead = 4 << 20

// endSettled writes the cmd_end a dead runner's event log lost for a
// command it had settled: its cmd_begin is in meta.log and its result in
// result/, but the runner died between the result's commit and the event
// that follows it, or the log lost its last lines (PROTOCOL.md section 13).
// The end is rebuilt from the result, with detail.recovered, so that every
// cmd_begin keeps its one cmd_end across crashes. Commands still in
// inflight/ (skip) get theirs from onRecovered.
func (r *Runner) endSettled(skip map[beginKey]bool) {
	keys := r.queue.openBeginsExcept(skip)
	slices.SortFunc(keys, func(a, b beginKey) int { return cmp.Compare(a.seq, b.seq) })
	for _, k := range keys {
		name := r.queue.done[k.id]
		if name == "" {
			continue
		}
		if seq, _, err := protocol.ParseCommandName(name); err != nil || seq != k.seq {
			continue
		}
		res, ok := r.readResult(name)
		if !ok {
			continue
		}
		r.queue.endBegin(k)
		r.recoveredEnd(k, res)
	}
}

// readResult reads result/<name>; false when it cannot be read or is not
// a result.
func (r *Runner) readResult(name string) (*protocol.Result, bool) {
	data, _, err := r.root.ReadFile(rel(protocol.DirResult, name), maxResultRead)
	var res protocol.Result
	if err != nil || json.Unmarshal(data, &res) != nil {
		return nil, false
	}
	return &res, true
}

// recoveredEnd writes the cmd_end a dead runner did not write for k, as
// res (the result that stands) says the command ended, with
// detail.recovered.
func (r *Runner) recoveredEnd(k beginKey, res *protocol.Result) {
	r.event(protocol.Event{Event: protocol.EvCmdEnd, CmdID: k.id, Seq: k.seq, Status: res.Status,
		ExitReason: res.ExitReason, SpoolStart: &res.SpoolStart, SpoolEnd: &res.SpoolEnd,
		TraceID: res.TraceID, Labels: res.Labels,
		Detail: endDetail(res, map[string]any{"bytes": res.Stats.Bytes, "duration_ms": res.Stats.DurationMS, "recovered": true})})
	r.recovery.ends++
}

// describeInterrupted gives the runner_restarted result of name, a
// command the dead runner left in inflight/ without a result, what the
// dead runner left of its run, so that it can be replayed
// from meta.log and session.out (PROTOCOL.md §22): the spool range from
// its cmd_begin's spool_start to where the next command began, or to the
// end of the spool when it was the last to begin (never short of its last
// cmd_output), its start_ts (when its cmd_begin was written) and
// payload_sha256 (as its cmd_begin named it), and the output file's path,
// size, lines and sha256 as the file holds them. A command whose
// cmd_begin is not in the log keeps 0..0, and the recovery's time as its
// start (it never began as far as the log knows); the writer hashes its
// payload from the command file then (job.text). One without an output
// file keeps no output_path.
func (r *Runner) describeInterrupted(job *resultJob) {
	res, name := job.res, job.name
	if ob := r.queue.openBegins[beginKey{res.Seq, res.CmdID}]; ob != nil {
		end := ob.next
		if end < 0 {
			end = r.disk.spoolSize
		}
		res.SpoolStart, res.SpoolEnd = ob.start, max(end, ob.end, ob.start)
		res.StartTS, res.PayloadSHA256 = ob.ts, ob.payloadSHA
		last := r.lastSign()
		if fi, err := r.root.Lstat(rel(protocol.DirOutput, protocol.OutputName(name))); err == nil && fi.ModTime().After(last) {
			last = fi.ModTime() // What the command printed last, flushed before the spool.
		}
		if !ob.ts.IsZero() && last.After(ob.ts.Time) {
			// It ran until its runner died, as far as anything knows: the
			// time after that is the dead runner's, not the command's (the
			// report draws it apart).
			if now := r.clk.Now(); last.After(now) {
				last = now
			}
			res.EndTS = protocol.Time{Time: last}
			res.Stats.DurationMS = last.Sub(ob.ts.Time).Milliseconds() // As end_ts - start_ts say.
		}
	}
	if res.PayloadSHA256 == "" {
		job.text = r.payloadOf(job.cmdFile)
	}
	out := rel(protocol.DirOutput, protocol.OutputName(name))
	f, err := r.root.OpenRegular(out)
	if err != nil {
		return
	}
	defer f.Close()
	sum := sha256.New()
	buf := make([]byte, 64<<10)
	var n, lines int64
	for {
		k, rerr := f.Read(buf)
		n += int64(k)
		lines += int64(bytes.Count(buf[:k], newline))
		sum.Write(buf[:k])
		if rerr != nil {
			if rerr != io.EOF {
				return // Unreadable: say nothing rather than something wrong.
			}
			break
		}
	}
	res.OutputPath = out
	res.Stats.Bytes, res.Stats.Lines = n, lines
	res.OutputSHA256 = hex.EncodeToString(sum.Sum(nil))
}

// lastSign is when the dead runner was last seen alive (describeInterrupted
// adds the command's output file): the later of its last heartbeat (state/heartbeat.json's timestamp, which this runner has
// not rewritten yet) and its last write to the spool (log/session.out's
// mtime); zero when neither can be read.
func (r *Runner) lastSign() time.Time {
	var last time.Time
	if hb, err := readHeartbeat(r.root, protocol.FileHeartbeat); err == nil {
		last = hb.Timestamp.Time
	}
	if fi, err := r.root.Lstat(protocol.FileSpool); err == nil && fi.ModTime().After(last) {
		last = fi.ModTime()
	}
	return last
}

// payloadOf is the payload of the command file name ("" when it cannot be
// read or parsed): the one payload_sha256 of a recovered result hashes.
func (r *Runner) payloadOf(name string) string {
	data, _, err := r.root.ReadFile(name, protocol.MaxCommandSize)
	if err != nil {
		return ""
	}
	var c struct {
		Payload string `json:"payload"`
	}
	if json.Unmarshal(data, &c) != nil {
		return ""
	}
	return c.Payload
}

// lastRunnerStopped reports whether the event log's last complete line is
// a runner_stop (the previous runner stopped cleanly), or there is no log:
// then recovery has no lost events to look for.
func lastRunnerStopped(root *fsq.Root, name string) bool {
	f, err := root.OpenRegular(name)
	if err != nil {
		return true
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return err == nil
	}
	const tail = 64 << 10
	off := max(fi.Size()-tail, 0)
	buf := make([]byte, fi.Size()-off)
	n, _ := f.ReadAt(buf, off)
	lines := bytes.Split(bytes.TrimRight(buf[:n], "\n"), []byte("\n"))
	var e protocol.Event
	return json.Unmarshal(lines[len(lines)-1], &e) == nil && e.Event == protocol.EvRunnerStop
}

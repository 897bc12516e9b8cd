// Package sessioncheck verifies the invariants of a SkillPilot session
// directory (PROTOCOL.md) after the fact, from the files alone. Tests of the
// runner, the masters and the CLI call [Check] at their end, so that every
// test also proves that nothing was lost, written twice or left behind.
//
// What is checked (each violation is one error in the joined result):
//
//   - every command name the caller submitted has exactly one result, or,
//     with AllowQueued, is still waiting in queue/;
//   - every result parses, names its own cmd_id and seq, and a cmd_id has
//     at most one result that is not a duplicate_cmd_id rejection;
//   - a result's output file has the size and sha256 the result states, and
//     its command file (command_path) exists in archive/ or log/rejected/;
//   - every cmd_begin in log/meta.log has exactly one cmd_end after it, and
//     no cmd_end lacks its cmd_begin; runner_start carries protocol_version;
//   - nothing is left in inflight/ or tmp/, and no temporary, spare or
//     claimed ("taken") file lies outside tmp/ (an NFS client's ".nfs*"
//     file, a removed file still open somewhere, is not ours: it goes at
//     its last close, and is ignored);
//   - directories and runner-written files have the documented modes
//     (private session: 0700 and 0600; group-shared session, marked by the
//     setgid bit on the session directory: 2770 for the directories masters
//     write, 2750 for the runner's, 0640 for the runner's files).
//
// Check only reads. It does not judge timing or the content of outputs.
package sessioncheck

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/skillpilot/skillpilot/protocol"
	"golang.org/x/sys/unix"
)

// Options say what the caller knows about the session.
type Options struct {
	// Submitted lists the command file names the caller wrote into queue/.
	// Each must have exactly one result (or, with AllowQueued, still be
	// queued).
	Submitted []string
	// AllowQueued accepts commands still waiting in queue/ (a graceful or
	// forced stop leaves them for the next runner).
	AllowQueued bool
	// Running says a runner may still be serving the session: inflight/ and
	// tmp/ may hold its current work, and one command may have begun
	// without ending yet.
	Running bool
}

// Check verifies the session tree at dir and returns every violation found,
// joined with errors.Join, or nil.
func Check(dir string, opts Options) error {
	c := &checker{dir: dir, opts: opts}
	c.layout()
	c.prunedIndex()
	results := c.results()
	c.submitted(results)
	c.events(results)
	c.leftovers()
	return errors.Join(c.errs...)
}

type checker struct {
	dir    string
	opts   Options
	shared bool
	errs   []error
	// pruned holds the command file names of log/pruned.log.1 and
	// log/pruned.log (retention removed their files; each counts as its
	// command's one result); rotated says the event log's history was
	// cut (log/meta.log.1 exists, or there is a pruned index).
	pruned  map[string]bool
	rotated bool
}

// prunedIndex reads the pruned index (PROTOCOL.md section 23).
func (c *checker) prunedIndex() {
	c.pruned = map[string]bool{}
	for _, f := range []string{protocol.FilePrunedOld, protocol.FilePruned} {
		b, err := os.ReadFile(c.path(f))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			c.fail("%s: %v", f, err)
			continue
		}
		c.rotated = true
		if len(b) > 0 && b[len(b)-1] != '\n' {
			c.fail("%s: its last line is torn", f)
		}
		for i, line := range bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
			if len(line) == 0 {
				continue
			}
			e, err := protocol.ParsePrunedLine(line)
			if err != nil {
				c.fail("%s line %d: %v", f, i+1, err)
				continue
			}
			c.pruned[e.Name] = true
		}
	}
	if _, err := os.Lstat(c.path(protocol.FileMetaOld)); err == nil {
		c.rotated = true
	}
}

func (c *checker) fail(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf(format, args...))
}

func (c *checker) path(rel string) string { return filepath.Join(c.dir, filepath.FromSlash(rel)) }

// runnerFiles are the files the runner writes under fixed names.
var runnerFiles = []string{protocol.FileState, protocol.FileHeartbeat, protocol.FileLock, protocol.FileSpool,
	protocol.FileMeta, protocol.FileTail}

func (c *checker) layout() {
	fi, err := os.Stat(c.dir)
	if err != nil {
		c.fail("session directory: %v", err)
		return
	}
	c.shared = fi.Mode()&fs.ModeSetgid != 0
	c.dirMode("", fi, c.want(""))
	for _, d := range protocol.Dirs {
		fi, err := os.Lstat(c.path(d))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if d != protocol.DirSeq && d != protocol.DirArchive { // Made by masters, or on first use.
				c.fail("%s/ is missing", d)
			}
			continue
		case err != nil:
			c.fail("%s/: %v", d, err)
			continue
		case !fi.IsDir():
			c.fail("%s is not a directory (%v)", d, fi.Mode().Type())
			continue
		}
		c.dirMode(d, fi, c.want(d))
	}
	perm := os.FileMode(0o600)
	if c.shared {
		perm = 0o640
	}
	for _, f := range runnerFiles {
		c.fileMode(f, perm)
	}
	for _, d := range []string{protocol.DirResult, protocol.DirOutput} {
		names, _ := readNames(c.path(d))
		for _, n := range names {
			if !strings.HasPrefix(n, ".") {
				c.fileMode(d+"/"+n, perm)
			}
		}
	}
}

// want returns the documented mode of a session directory ("" is the
// session directory itself).
func (c *checker) want(d string) os.FileMode { return protocol.DirMode(d, c.shared) }

func (c *checker) dirMode(d string, fi os.FileInfo, want os.FileMode) {
	got := fi.Mode() & (fs.ModePerm | fs.ModeSetgid)
	if got != want {
		name := d + "/"
		if d == "" {
			name = "the session directory"
		}
		c.fail("%s has mode %v, want %v", name, got, want)
	}
}

func (c *checker) fileMode(rel string, want os.FileMode) {
	fi, err := os.Lstat(c.path(rel))
	if err != nil {
		return // Not every runner file exists in every session.
	}
	if !fi.Mode().IsRegular() {
		c.fail("%s is not a regular file (%v)", rel, fi.Mode().Type())
		return
	}
	if got := fi.Mode().Perm(); got != want {
		c.fail("%s has mode %v, want %v", rel, got, want)
	}
}

func (c *checker) results() map[string]protocol.Result {
	names, err := readNames(c.path(protocol.DirResult))
	if err != nil {
		c.fail("list result/: %v", err)
		return nil
	}
	out := map[string]protocol.Result{}
	byID := map[string][]string{}
	for _, n := range names {
		if strings.HasPrefix(n, ".") {
			continue // leftovers() reports it.
		}
		rel := protocol.DirResult + "/" + n
		b, err := readRegular(c.path(rel))
		if err != nil {
			c.fail("%s: %v", rel, err)
			continue
		}
		var res protocol.Result
		if err := json.Unmarshal(b, &res); err != nil {
			c.fail("%s: not a valid result: %v", rel, err)
			continue
		}
		out[n] = res
		c.result(n, res)
		_, _, perr := protocol.ParseCommandName(n)
		if perr == nil && (res.Error == nil || res.Error.Code != protocol.CodeDuplicateCmdID) {
			byID[res.CmdID] = append(byID[res.CmdID], n)
		}
	}
	for id, ns := range byID {
		if len(ns) > 1 {
			sort.Strings(ns)
			c.fail("cmd_id %q has %d results: %v", id, len(ns), ns)
		}
	}
	return out
}

func (c *checker) result(name string, res protocol.Result) {
	rel := protocol.DirResult + "/" + name
	if res.ProtocolVersion != protocol.Version {
		c.fail("%s: protocol_version %d", rel, res.ProtocolVersion)
	}
	if seq, id, err := protocol.ParseCommandName(name); err == nil && (res.CmdID != id || res.Seq != seq) {
		c.fail("%s: names cmd_id %q seq %d, the file name says %q %d", rel, res.CmdID, res.Seq, id, seq)
	}
	if res.Status == protocol.StatusOK && res.Error != nil {
		c.fail("%s: status ok with an error %+v", rel, *res.Error)
	}
	if res.Status != protocol.StatusOK && res.Error == nil {
		c.fail("%s: status %q without an error", rel, res.Status)
	}
	switch {
	case res.CommandPath == "":
		c.fail("%s: no command_path", rel)
	case !strings.HasPrefix(res.CommandPath, protocol.DirArchive+"/") && !strings.HasPrefix(res.CommandPath, protocol.DirRejected+"/"):
		c.fail("%s: command_path %q is outside archive/ and log/rejected/", rel, res.CommandPath)
	default:
		if fi, err := os.Lstat(c.path(res.CommandPath)); err != nil {
			c.fail("%s: its command file %s: %v", rel, res.CommandPath, err)
		} else if !fi.Mode().IsRegular() && strings.HasPrefix(res.CommandPath, protocol.DirArchive+"/") {
			c.fail("%s: its command file %s is not a regular file", rel, res.CommandPath)
		}
	}
	if res.OutputPath != "" {
		c.output(rel, res)
	}
}

// output checks that an output file holds what its result says.
func (c *checker) output(rel string, res protocol.Result) {
	f, err := os.Open(c.path(res.OutputPath))
	if err != nil {
		c.fail("%s: output %s: %v", rel, res.OutputPath, err)
		return
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		c.fail("%s: read %s: %v", rel, res.OutputPath, err)
		return
	}
	if n != res.Stats.Bytes {
		c.fail("%s: %s holds %d bytes, the result says %d", rel, res.OutputPath, n, res.Stats.Bytes)
	}
	if sum := hex.EncodeToString(h.Sum(nil)); res.OutputSHA256 != "" && sum != res.OutputSHA256 {
		c.fail("%s: %s has sha256 %s, the result says %s", rel, res.OutputPath, sum, res.OutputSHA256)
	}
}

func (c *checker) submitted(results map[string]protocol.Result) {
	queued := map[string]bool{}
	names, _ := readNames(c.path(protocol.DirQueue))
	for _, n := range names {
		if !strings.HasPrefix(n, ".") && strings.HasSuffix(strings.ToLower(n), ".json") {
			queued[n] = true
		}
	}
	for _, n := range c.opts.Submitted {
		_, done := results[n]
		done = done || c.pruned[n] // Its one result was there, and retention removed it.
		switch {
		case done && queued[n]:
			c.fail("%s has a result and is still in queue/", n)
		case !done && !queued[n]:
			c.fail("%s was submitted and has no result (and is not queued)", n)
		case !done && !c.opts.AllowQueued:
			c.fail("%s is still in queue/", n)
		}
	}
	if !c.opts.AllowQueued && !c.opts.Running {
		for n := range queued {
			if _, done := results[n]; !done {
				c.fail("queue/%s has no result", n)
			}
		}
	}
}

type key struct {
	seq int64
	id  string
}

// events checks the event log (log/meta.log.1, then log/meta.log): every
// cmd_begin has one cmd_end. Once retention cut the history (rotated), a
// cmd_end whose cmd_begin went with an older generation is accepted, and
// every kept result of a command that ran must still be replayable: its
// cmd_begin and cmd_end are in the kept files, and its spool range is on
// disk (no hole cut into it).
func (c *checker) events(results map[string]protocol.Result) {
	begun := map[key]int{}
	ended := map[key]int{}
	seen := false
	for _, name := range []string{protocol.FileMetaOld, protocol.FileMeta} {
		f, err := os.Open(c.path(name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			c.fail("%s: %v", name, err)
			continue
		}
		seen = true
		c.eventFile(name, f, begun, ended)
		f.Close()
	}
	if !seen {
		return
	}
	if c.rotated {
		c.replayable(results, begun, ended)
	}
	open := 0
	for k, b := range begun {
		if b > ended[k] {
			open++
			if !c.opts.Running || open > 1 {
				c.fail("meta.log: cmd_begin for %s (seq %d) has no cmd_end", k.id, k.seq)
			}
		}
	}
}

// eventFile checks one file of the event log, counting begins and ends.
func (c *checker) eventFile(name string, f *os.File, begun, ended map[key]int) {
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for line := 1; sc.Scan(); line++ {
		var e protocol.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			c.fail("%s line %d: %v", name, line, err)
			continue
		}
		if e.Event == "" || e.TS.IsZero() {
			c.fail("%s line %d: no event name or ts", name, line)
		}
		k := key{e.Seq, e.CmdID}
		switch e.Event {
		case protocol.EvCmdBegin:
			if begun[k] > ended[k] {
				c.fail("%s line %d: a second cmd_begin for %s (seq %d) before its cmd_end", name, line, e.CmdID, e.Seq)
			}
			begun[k]++
		case protocol.EvWarning:
			// A command the tool died before beginning is queued again
			// (PROTOCOL.md 11): its cmd_begin is closed by this warning,
			// and it begins again.
			if _, ok := e.Detail["not_begun"]; ok && begun[k] > ended[k] {
				begun[k]--
			}
		case protocol.EvCmdEnd:
			if ended[k] >= begun[k] && !c.rotated {
				c.fail("%s line %d: cmd_end for %s (seq %d) without a cmd_begin", name, line, e.CmdID, e.Seq)
			}
			if ended[k] < begun[k] || !c.rotated {
				ended[k]++
			}
		case protocol.EvRunnerStart:
			if v, _ := e.Detail["protocol_version"].(float64); int(v) != protocol.Version {
				c.fail("%s line %d: runner_start without protocol_version", name, line)
			}
		}
	}
	if err := sc.Err(); err != nil {
		c.fail("%s: %v", name, err)
	}
}

// replayable checks that every kept result of a command that ran can be
// replayed from the event log and the spool (PROTOCOL.md sections 22, 23).
func (c *checker) replayable(results map[string]protocol.Result, begun, ended map[key]int) {
	spool, err := os.Open(c.path(protocol.FileSpool))
	if err != nil {
		c.fail("%s: %v", protocol.FileSpool, err)
		return
	}
	defer spool.Close()
	fi, err := spool.Stat()
	if err != nil {
		c.fail("%s: %v", protocol.FileSpool, err)
		return
	}
	for name, res := range results {
		if res.ToolStart == 0 || res.SpoolEnd <= res.SpoolStart || res.SpoolStart >= fi.Size() {
			continue // Never ran in the tool (rejected, cancelled while queued), or printed nothing.
		}
		k := key{res.Seq, res.CmdID}
		if begun[k] == 0 || ended[k] == 0 {
			c.fail("result/%s is kept but its cmd_begin or cmd_end left the event log (begin %d, end %d)", name, begun[k], ended[k])
		}
		if hole, err := unix.Seek(int(spool.Fd()), res.SpoolStart, unix.SEEK_HOLE); err == nil && hole < min(res.SpoolEnd, fi.Size()) {
			c.fail("result/%s is kept but its spool range %d..%d was cut (a hole at %d)", name, res.SpoolStart, res.SpoolEnd, hole)
		}
	}
}

// leftovers reports temporary, spare and claimed files outside tmp/, and
// anything in inflight/ or tmp/ (but the disk reserve) once the runner is
// gone.
func (c *checker) leftovers() {
	for _, d := range protocol.Dirs {
		names, _ := readNames(c.path(d))
		for _, n := range names {
			rel := d + "/" + n
			switch {
			case strings.HasPrefix(n, ".nfs"):
				// An NFS client's silly rename of a file removed while
				// open; it disappears at the last close.
			case d == protocol.DirTmp && n == "ballast":
				// The runner's disk reserve outlives it (PROTOCOL.md §13).
			case d == protocol.DirTmp || d == protocol.DirInflight:
				if !c.opts.Running {
					c.fail("%s left behind", rel)
				}
			case strings.Contains(n, ".taken."), strings.HasPrefix(n, ".spare-"):
				c.fail("%s left behind", rel)
			case strings.HasPrefix(n, ".") && d != protocol.DirQueue && d != protocol.DirCtl && d != protocol.DirSeq:
				c.fail("temporary file %s left behind", rel)
			}
		}
	}
}

// readRegular reads a regular file of at most 16 MiB without following a
// symlink.
func readRegular(p string) ([]byte, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%v)", fi.Mode().Type())
	}
	if fi.Size() > 16<<20 {
		return nil, fmt.Errorf("%d bytes", fi.Size())
	}
	b, err := os.ReadFile(p)
	return bytes.TrimSpace(b), err
}

func readNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

package protocol

import (
	"bytes"
	"errors"
	"fmt"
	"time"
)

// The pruned index (PROTOCOL.md section 23): the commands whose files a
// runner's retention removed, one line each, so that their cmd_ids are
// still refused as duplicates and a master can say "pruned" instead of
// "unknown". FilePruned is appended to; when it reaches the runner's
// --keep-ids lines it becomes FilePrunedOld (replacing the one before) and
// a new FilePruned starts, so the two hold between --keep-ids and twice as
// many of the last commands pruned.
const (
	FilePruned    = "log/pruned.log"
	FilePrunedOld = "log/pruned.log.1"
	// FileMetaOld is the event log's previous generation once meta.log was
	// rotated (section 23): read it before log/meta.log.
	FileMetaOld = "log/meta.log.1"
)

// MaxPrunedFile bounds what a reader takes of one pruned index file: far
// above what the largest --keep-ids writes (lines are at most ~200 bytes).
const MaxPrunedFile = 512 << 20

// PrunedEntry is one line of the pruned index: the command file's name (a
// name ParseCommandName accepts), the status its result had, and when the
// command ended (its result's end_ts).
type PrunedEntry struct {
	Name   string
	Status Status
	EndTS  time.Time
}

// ErrBadPrunedLine reports a line of the pruned index that is not
// "<name> <status> <end_ts>".
var ErrBadPrunedLine = errors.New("protocol: not a line of the pruned index")

// AppendLine appends e as one line of the index: "<name> <status>
// <end_ts>\n", end_ts in the wire format of Time (RFC 3339, UTC,
// milliseconds).
func (e PrunedEntry) AppendLine(b []byte) []byte {
	status := string(e.Status)
	if status == "" {
		status = "unknown"
	}
	ts := "-"
	if !e.EndTS.IsZero() {
		ts = e.EndTS.UTC().Format(wireLayout)
	}
	b = append(b, e.Name...)
	b = append(b, ' ')
	b = append(b, status...)
	b = append(b, ' ')
	b = append(b, ts...)
	return append(b, '\n')
}

// ParsePrunedLine parses one line of the index (without its newline).
func ParsePrunedLine(line []byte) (PrunedEntry, error) {
	f := bytes.Fields(line)
	if len(f) != 3 {
		return PrunedEntry{}, fmt.Errorf("%w: %q", ErrBadPrunedLine, line)
	}
	e := PrunedEntry{Name: string(f[0]), Status: Status(f[1])}
	if _, _, err := ParseCommandName(e.Name); err != nil {
		return PrunedEntry{}, fmt.Errorf("%w: %q: %w", ErrBadPrunedLine, line, err)
	}
	if string(f[2]) != "-" {
		t, err := time.Parse(time.RFC3339Nano, string(f[2]))
		if err != nil {
			return PrunedEntry{}, fmt.Errorf("%w: %q: %w", ErrBadPrunedLine, line, err)
		}
		e.EndTS = t
	}
	return e, nil
}

// FindPruned looks for a command in the pruned index data (the bytes of
// FilePrunedOld then FilePruned, or either alone): by its file's name when
// name is set, else by cmd_id (the whole cmd_id of each name compared, the
// lowest seq when several match, as a lookup in result/ does). A torn last
// line and lines that do not parse are skipped.
func FindPruned(data []byte, name, cmdID string) (PrunedEntry, bool) {
	var found PrunedEntry
	ok := false
	var foundSeq int64
	for len(data) > 0 {
		line := data
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break // A torn last line (the runner appends whole lines).
		}
		line, data = data[:i], data[i+1:]
		sp := bytes.IndexByte(line, ' ')
		if sp <= 0 {
			continue
		}
		n := line[:sp]
		if name != "" {
			if string(n) != name {
				continue
			}
		} else if !bytes.Contains(n, []byte(cmdID)) {
			continue
		}
		e, err := ParsePrunedLine(line)
		if err != nil {
			continue
		}
		seq, id, _ := ParseCommandName(e.Name)
		if name == "" && id != cmdID {
			continue
		}
		if !ok || seq < foundSeq || (name != "" && seq == foundSeq) {
			found, foundSeq, ok = e, seq, true
		}
	}
	return found, ok
}

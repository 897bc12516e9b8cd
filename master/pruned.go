package master

import (
	"bytes"
	"errors"
	"fmt"
	"os"

	"github.com/skillpilot/skillpilot/protocol"
)

// ErrPruned: the command ran and had its result, and the session's
// retention has removed its files since (PROTOCOL.md section 23): its
// result and output cannot be read any more. CLI exit 8, code pruned.
var ErrPruned = errors.New("master: pruned")

// findPruned looks for a command in the session's pruned index: by its
// file's name when name is set, else by cmd_id. log/pruned.log is read
// before log/pruned.log.1: the runner's rotation renames the first to the
// second, so a line is in the file read first or, moved by a rotation
// between the two reads, in the second (read the other way round, a
// rotation in between hid it). Each file's torn last line is left out
// before the two are joined.
func (s *Session) findPruned(name, cmdID string) (protocol.PrunedEntry, bool) {
	var data []byte
	for _, f := range []string{protocol.FilePruned, protocol.FilePrunedOld} {
		b, _, err := s.io.ReadFile(f, protocol.MaxPrunedFile, f == protocol.FilePrunedOld)
		if err == nil {
			data = append(data, b[:bytes.LastIndexByte(b, '\n')+1]...)
		}
	}
	return protocol.FindPruned(data, name, cmdID)
}

// prunedBelow is the pruned error when c, found by a lookup of its cmd_id,
// is the duplicate_cmd_id refusal of a retry whose original the retention
// removed: the cmd_id names the original (the lowest seq), so the lookup
// answers pruned, as it answers with the original while its result is
// there. Only such a refusal costs a read of the index.
func (c *Command) prunedBelow() error {
	r, err := c.Result()
	if err != nil || r == nil || r.Error == nil || r.Error.Code != protocol.CodeDuplicateCmdID || r.Error.Context["pruned"] != true {
		return nil
	}
	if e, ok := c.s.findPruned("", c.ID); ok {
		if seq, _, _ := protocol.ParseCommandName(e.Name); seq < c.Seq {
			return prunedError(e)
		}
	}
	return nil
}

// prunedError is the error of a command found only in the pruned index.
func prunedError(e protocol.PrunedEntry) error {
	_, id, _ := protocol.ParseCommandName(e.Name)
	ended := ""
	if !e.EndTS.IsZero() {
		ended = " at " + e.EndTS.UTC().Format("2006-01-02T15:04:05.000Z")
	}
	ctx := map[string]any{"cmd_id": id, "status": string(e.Status)}
	return withContext(fmt.Errorf("%w: command %s ended %s%s, and the session's retention has removed its result and output since (%s): they cannot be read any more",
		ErrPruned, id, e.Status, ended, protocol.FilePruned), ctx)
}

// pruned reports whether c is gone for good: it is neither queued nor
// running nor has a result, and the pruned index holds its file's name.
// The directories are looked at in the order a command moves, then the
// result once more (a command that moved meanwhile is not taken for
// pruned).
func (c *Command) pruned() error {
	for _, d := range []string{protocol.DirQueue, protocol.DirInflight, protocol.DirResult} {
		if _, err := c.s.io.Lstat(d + "/" + c.Name); !errors.Is(err, os.ErrNotExist) {
			return nil
		}
	}
	if e, ok := c.s.findPruned(c.Name, ""); ok {
		if _, err := c.s.io.Lstat(protocol.DirResult + "/" + c.Name); errors.Is(err, os.ErrNotExist) {
			return prunedError(e)
		}
	}
	return nil
}

// gone is the error of a wait on c that can never end with a result: its
// result and output were pruned (ErrPruned), or a withdraw took it back
// (ErrUnknownCmdID, as a later lookup answers: PROTOCOL.md section 19),
// where a pool moved it too. Nil while it may still get one.
func (c *Command) gone() error {
	if err := c.pruned(); err != nil {
		return err
	}
	cur := c.Resolve()
	cur.s.io.Revalidate(dirWithdrawn)
	if !cur.s.io.Exists(dirWithdrawn + "/" + cur.Name) {
		return nil
	}
	if r, _ := cur.Result(); r != nil {
		return nil // Never both; should it be, the result answers.
	}
	return withdrawnLookupErr(c.ID, cur.Name)
}

// withdrawnLookupErr is the error of a lookup or a wait that finds the
// command only in withdrawn/: unknown_cmd_id (6), as PROTOCOL.md section
// 19 says a later lookup answers, saying why.
func withdrawnLookupErr(id, name string) error {
	return withContext(fmt.Errorf("%w: %s was withdrawn (%s/%s): it never runs and gets no result",
		ErrUnknownCmdID, id, dirWithdrawn, name), map[string]any{"cmd_id": id})
}

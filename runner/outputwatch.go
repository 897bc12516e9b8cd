package runner

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/protocol"
)

// keepRunningOutput runs on every heartbeat: the running command's output
// file must still be the one at its name in output/. Someone who moved
// output/ (or the file) out of the session, or deleted it, while the
// command prints would have the runner go on appending to that file,
// outside the session, until the command ended and the result writer
// rebuilt it (keepOutput). The file is rebuilt in output/ at
// once instead, from the descriptor the runner holds (what it wrote so
// far, byte for byte), the command goes on writing there, and a warning
// event says so (output_rebuilt, bytes, why). A missing output/ is left to
// the layout check, which makes it again: the next heartbeat rebuilds.
// What cannot be rebuilt now is left to the result writer, as before.
func (r *Runner) keepRunningOutput() {
	c := r.cur
	if c == nil || c.out == nil || c.outErr != nil {
		return
	}
	name := rel(protocol.DirOutput, protocol.OutputName(c.name))
	held, err := c.out.Stat()
	if err != nil {
		return
	}
	cur, err := r.root.Lstat(name)
	if err == nil && fsq.SameFile(held, cur) || err != nil && !errors.Is(err, os.ErrNotExist) {
		return
	}
	if fi, err := r.root.Lstat(protocol.DirOutput); err != nil || !fi.IsDir() {
		return
	}
	if c.flush() != nil { // Everything written goes into the copy.
		return
	}
	if held, err = c.out.Stat(); err != nil {
		return
	}
	f, err := copyOutput(r.root, c.out, held.Size(), name, r.layout.perms.file)
	if err != nil {
		r.log.Warn("an output file left the session while its command runs, and could not be made again yet", "file", name, "err", err)
		return
	}
	_ = c.out.Close() // The moved or deleted file: its bytes are in f.
	c.out = f
	c.w.Reset(f)
	r.log.Warn("an output file left the session while its command runs; made it again from what the runner wrote, and the command writes there now", "file", name)
	r.event(protocol.Event{Event: protocol.EvWarning, CmdID: c.cmd.CmdID, Seq: c.cmd.Seq, Detail: map[string]any{
		"output_rebuilt": name, "bytes": held.Size(),
		"why": "the output file was moved or deleted out of output/ while the command ran; it writes into the rebuilt file from now on"}})
}

// copyOutput copies the size bytes written into out (an output file no
// longer at its name) into a new file at name, through tmp/ and a rename,
// with mode perm, and returns it open for reading and writing, at its end.
func copyOutput(root *fsq.Root, out *os.File, size int64, name string, perm os.FileMode) (*os.File, error) {
	src, err := readerOf(out)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	tmp, err := root.CreateTemp(protocol.DirTmp, ".output-", perm)
	if err != nil {
		return nil, err
	}
	tmpName := root.RelOf(tmp.Name())
	n, err := io.Copy(tmp, io.NewSectionReader(src, 0, size))
	if err == nil && n != size {
		err = fmt.Errorf("read %d of %d bytes back", n, size)
	}
	if err == nil {
		err = chmodIfNeeded(tmp, perm)
	}
	if err == nil {
		err = root.Rename(tmpName, name)
	}
	if err != nil {
		tmp.Close()
		root.RemoveOrLater(tmpName)
		return nil, err
	}
	return tmp, nil
}

// keepRunningCommandFile runs on every heartbeat: the running command's
// file must still be at inflight/<name>, where a runner starting after a
// crash looks for commands that were running (recover.go). Someone who
// moved inflight/ away and made a new one, or deleted the file, while the
// command runs would leave a crash then with a command that has no result
// and no trace in inflight/. The file is made again from the bytes the
// runner claimed, and a warning event says so (recreated). A missing
// inflight/ is left to the layout check, which makes it again: the next
// heartbeat puts the file back.
func (r *Runner) keepRunningCommandFile() {
	c := r.cur
	if c == nil || c.raw == nil {
		return
	}
	name := rel(protocol.DirInflight, c.name)
	if _, err := r.root.Lstat(name); !errors.Is(err, os.ErrNotExist) {
		return
	}
	if fi, err := r.root.Lstat(protocol.DirInflight); err != nil || !fi.IsDir() {
		return
	}
	if err := r.root.WriteAtomic(name, c.raw, r.layout.perms.file, fsq.Durable); err != nil {
		r.log.Warn("a running command's file left inflight/, and could not be made again yet", "file", name, "err", err)
		return
	}
	r.log.Warn("a running command's file left inflight/; made it again from what the runner claimed", "file", name)
	r.event(protocol.Event{Event: protocol.EvWarning, CmdID: c.cmd.CmdID, Seq: c.cmd.Seq, Detail: map[string]any{
		"recreated": name,
		"message":   "the running command's file was moved or deleted out of inflight/ (or inflight/ was replaced); it was made again from the bytes the runner claimed, so that a crash cannot lose the command"}})
}

package review

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/protocol"
)

// ErrOutputMismatch is returned by Output when the output file does not
// match the sha256 its result records (it was changed after the run, or the
// session copy is incomplete).
var ErrOutputMismatch = errors.New("history: output does not match the result's output_sha256")

// Output reads the output of a finished command, at most limit bytes
// (fsq.ErrTooLarge beyond), and checks it against the result's size and
// output_sha256. A command whose result records no output (it never ran)
// has an empty output.
func (s *Session) Output(c *Command, limit int64) ([]byte, error) {
	if c.Result == nil {
		return nil, fmt.Errorf("history: %s has no result yet", c.Name)
	}
	if c.Result.Stats.Bytes == 0 && (c.Result.OutputSHA256 == "" || c.Result.OutputSHA256 == emptySHA) {
		return nil, nil
	}
	if c.Result.Stats.Bytes > limit {
		return nil, fmt.Errorf("output of %s: %d bytes: %w (limit %d)", c.CmdID, c.Result.Stats.Bytes, fsq.ErrTooLarge, limit)
	}
	p, err := s.path(protocol.DirOutput + "/" + protocol.OutputName(c.Name))
	if err != nil {
		return nil, fmt.Errorf("output of %s: %w", c.CmdID, err)
	}
	data, _, err := readFile(p, limit)
	if err != nil {
		return nil, fmt.Errorf("output of %s: %w", c.CmdID, err)
	}
	if want := c.Result.OutputSHA256; want != "" {
		sum := sha256.Sum256(data)
		if hex.EncodeToString(sum[:]) != want || int64(len(data)) != c.Result.Stats.Bytes {
			return data, fmt.Errorf("output of %s (%s): %w", c.CmdID, p, ErrOutputMismatch)
		}
	}
	return data, nil
}

var emptySHA = func() string { s := sha256.Sum256(nil); return hex.EncodeToString(s[:]) }()

// OutputPrefix reads at most the first n bytes of a finished command's
// output, without checking them against the result (they may be a part).
// truncated reports that the output is longer than n.
func (s *Session) OutputPrefix(c *Command, n int64) (data []byte, truncated bool, err error) {
	if c.Result == nil || c.Result.Stats.Bytes == 0 {
		return nil, false, nil
	}
	p, err := s.path(protocol.DirOutput + "/" + protocol.OutputName(c.Name))
	if err != nil {
		return nil, false, fmt.Errorf("output of %s: %w", c.CmdID, err)
	}
	f, err := fsq.CreateFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, false, fmt.Errorf("output of %s: %w", c.CmdID, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, false, err
	}
	if !fi.Mode().IsRegular() {
		return nil, false, fmt.Errorf("output of %s: %w", c.CmdID, fsq.ErrNotRegular)
	}
	data, err = io.ReadAll(io.LimitReader(f, n))
	return data, fi.Size() > n, err
}

// VerifyOutput checks that the output file of a finished command still
// holds what its result recorded: its size and output_sha256. The file is
// streamed (memory stays bounded whatever its size; at most the recorded
// size plus one byte is read), never through a symlink and never blocking
// on a FIFO. It returns nil when they match, and an error that wraps
// ErrOutputMismatch (the file was replaced or changed after the run) or
// says why the file cannot be read. A command whose result records no
// output matches an absent or empty file.
func (s *Session) VerifyOutput(c *Command) error {
	if c.Result == nil {
		return fmt.Errorf("history: %s has no result yet", c.Name)
	}
	want, size := c.Result.OutputSHA256, c.Result.Stats.Bytes
	p, err := s.path(protocol.DirOutput + "/" + protocol.OutputName(c.Name))
	if err != nil {
		return fmt.Errorf("output of %s: %w", c.CmdID, err)
	}
	f, err := openRegular(p)
	if errors.Is(err, os.ErrNotExist) && size == 0 && (want == "" || want == emptySHA) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("output of %s: %w", c.CmdID, err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(f, size+1))
	if err != nil {
		return fmt.Errorf("output of %s: %w", c.CmdID, err)
	}
	if n != size || (want != "" && hex.EncodeToString(h.Sum(nil)) != want) {
		return fmt.Errorf("output of %s (%s) is not the %d bytes its result recorded: %w", c.CmdID, p, size, ErrOutputMismatch)
	}
	return nil
}

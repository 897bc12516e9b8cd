package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/skillpilot/skillpilot/protocol"
)

// ReadOutputInput is the input of read_output.
type ReadOutputInput struct {
	CmdID   string `json:"cmd_id" jsonschema:"the command whose output to read"`
	Offset  int64  `json:"offset" jsonschema:"first byte, from 0"`
	Length  int64  `json:"length,omitempty" jsonschema:"bytes to read (absent or 0: the server's maximum; more is capped to it)"`
	Session string `json:"session,omitempty" jsonschema:"the command's session (pool servers; absent: searched)"`
}

// ReadOutputOutput is the output of read_output.
type ReadOutputOutput struct {
	Session  string `json:"session" jsonschema:"the command's session"`
	CmdID    string `json:"cmd_id" jsonschema:"the command"`
	Path     string `json:"path" jsonschema:"the output file, relative to the session directory"`
	Offset   int64  `json:"offset" jsonschema:"where data starts"`
	Length   int64  `json:"length" jsonschema:"bytes in data (decoded)"`
	Data     string `json:"data" jsonschema:"the bytes, as text or base64 (see encoding)"`
	Encoding string `json:"encoding" jsonschema:"utf-8 (data is the bytes as text) or base64"`
	Size     int64  `json:"size" jsonschema:"the output file's size now"`
	EOF      bool   `json:"eof" jsonschema:"true when data reaches the end of the output as it is now"`
	Done     bool   `json:"done" jsonschema:"true when the command has finished: the output will not grow"`
	// ResumeCursor is the one cursor name of every reply (PROTOCOL.md
	// section 19, "Cursors"), here in the output file.
	ResumeCursor int64 `json:"resume_cursor" jsonschema:"offset + length: the offset of the next call"`
}

// TailInput is the input of tail.
type TailInput struct {
	FromCursor int64  `json:"from_cursor" jsonschema:"byte offset in the spool to start at; negative: that many bytes before its end"`
	MaxBytes   int64  `json:"max_bytes,omitempty" jsonschema:"bytes to return at most (absent: the server's preview budget; capped by the server's maximum read)"`
	Session    string `json:"session,omitempty" jsonschema:"which session (required with a pool of several sessions)"`
}

// TailOutput is the output of tail.
type TailOutput struct {
	Session      string `json:"session" jsonschema:"the session whose spool this is"`
	Offset       int64  `json:"offset" jsonschema:"where data starts in the spool"`
	Data         string `json:"data" jsonschema:"the spool bytes, raw (CR LF line ends, prompts and markers included), as text or base64 (see encoding)"`
	Encoding     string `json:"encoding" jsonschema:"utf-8 or base64"`
	ResumeCursor int64  `json:"resume_cursor" jsonschema:"offset + bytes returned: pass it as from_cursor of the next call"`
	SpoolSize    int64  `json:"spool_size" jsonschema:"the spool's size now"`
}

func (h *handler) readOutput(_ context.Context, _ *mcp.CallToolRequest, in ReadOutputInput) (ReadOutputOutput, error) {
	if in.Offset < 0 || in.Length < 0 {
		return ReadOutputOutput{}, errors.New("offset and length must not be negative")
	}
	ref, err := h.command(in.Session, in.CmdID)
	if err != nil {
		return ReadOutputOutput{}, err
	}
	n := int64(h.cfg.MaxRead)
	if in.Length > 0 {
		n = min(in.Length, n)
	}
	// Look for the result first: then the output read after it is complete.
	res, _ := ref.cmd.Result()
	rel := protocol.DirOutput + "/" + protocol.OutputName(ref.cmd.Name)
	b, size, err := readRange(filepath.Join(ref.s.Dir(), rel), in.Offset, n)
	if errors.Is(err, errNoFile) && res == nil {
		return ReadOutputOutput{}, fmt.Errorf("command %s has no output yet (state %s)", ref.cmd.ID, h.state(ref))
	}
	if err != nil && !errors.Is(err, errNoFile) {
		return ReadOutputOutput{}, err
	}
	out := ReadOutputOutput{Session: ref.session, CmdID: ref.cmd.ID, Path: rel, Offset: in.Offset,
		Length: int64(len(b)), Size: size, Done: res != nil, ResumeCursor: in.Offset + int64(len(b))}
	out.Data, out.Encoding = encode(b)
	out.EOF = in.Offset+int64(len(b)) >= size
	return out, nil
}

func (h *handler) tail(_ context.Context, _ *mcp.CallToolRequest, in TailInput) (TailOutput, error) {
	if in.MaxBytes < 0 {
		return TailOutput{}, errors.New("max_bytes must not be negative")
	}
	s, name, err := h.sessions.get(in.Session)
	if err != nil {
		return TailOutput{}, err
	}
	n := int64(h.cfg.PreviewBytes)
	if in.MaxBytes > 0 {
		n = in.MaxBytes
	}
	n = min(n, int64(h.cfg.MaxRead))
	path := filepath.Join(s.Dir(), protocol.FileSpool)
	from := in.FromCursor
	if from < 0 {
		_, size, err := readRange(path, 0, 0)
		if err != nil && !errors.Is(err, errNoFile) {
			return TailOutput{}, err
		}
		from = max(size+from, 0)
	}
	b, size, err := readRange(path, from, n)
	if err != nil && !errors.Is(err, errNoFile) {
		return TailOutput{}, err
	}
	out := TailOutput{Session: name, Offset: from, ResumeCursor: from + int64(len(b)), SpoolSize: size}
	out.Data, out.Encoding = encode(b)
	return out, nil
}

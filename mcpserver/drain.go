package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// drain lets a client that writes its requests and closes stdin at once
// (echo '...' | master mcp) still get every answer: the server sees the
// end of its input only once every request read so far has been answered
// (or ctx ends). It follows JSON-RPC ids on the newline-delimited stream:
// a line with a method and an id is a request; a line with an id and no
// method, written back, is its answer.
type drain struct {
	ctx context.Context
	in  *bufio.Reader
	buf []byte // the rest of the line being handed out

	mu      sync.Mutex
	pending map[string]bool
	changed chan struct{} // closed and replaced when pending shrinks

	wmu     sync.Mutex
	out     io.Writer
	partial []byte // output not yet ending in a newline
}

func newDrain(ctx context.Context, r io.Reader, w io.Writer) *drain {
	return &drain{ctx: ctx, in: bufio.NewReaderSize(r, 64<<10), out: w,
		pending: map[string]bool{}, changed: make(chan struct{})}
}

type rpcHead struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
}

// MaxLine is the longest line (one JSON-RPC message, newline included)
// that master mcp accepts: the MCP SDK's own frame limit. A longer line is
// answered with an invalid-request error and skipped; the session goes on.
const MaxLine = mcp.DefaultMaxLineLength

// Read hands out the input a line at a time, noting requests. Lines the
// MCP SDK would end the whole session on (not JSON, a batch, an id that is
// an object or array, a line over MaxLine, a message that is not JSON-RPC
// 2.0) are answered here with their JSON-RPC error instead and never
// reach the SDK.
func (d *drain) Read(p []byte) (int, error) {
	for len(d.buf) == 0 {
		line, tooLong, err := d.readLine()
		if len(line) == 0 && !tooLong && err != nil {
			if err == io.EOF {
				d.waitAnswered()
			}
			return 0, err
		}
		if tooLong {
			d.reject(line, jsonrpc.CodeInvalidRequest, fmt.Sprintf(
				"request too large: the line is over the %d-byte (16 MiB) limit of master mcp and was skipped; "+
					"put a large payload in a file and run `source FILE` instead", MaxLine))
			continue
		}
		t := bytes.TrimSpace(line)
		if len(t) == 0 {
			continue
		}
		if !json.Valid(t) {
			// JSON-RPC's answer to a line that is not JSON; the SDK
			// would end the session (and every answer still owed).
			d.parseError(t)
			continue
		}
		if t[0] == '[' {
			d.rejectBatch(t)
			continue
		}
		msg, err := jsonrpc.DecodeMessage(t)
		if err != nil {
			d.reject(t, jsonrpc.CodeInvalidRequest, "invalid request: "+err.Error())
			continue
		}
		if req, ok := msg.(*jsonrpc.Request); ok && req.ID.IsValid() {
			d.mu.Lock()
			d.pending[idKey(req.ID)] = true
			d.mu.Unlock()
		}
		d.buf = line
	}
	n := copy(p, d.buf)
	d.buf = d.buf[n:]
	return n, nil
}

// readLine reads one line of at most MaxLine bytes. A longer line is read
// to its end and thrown away (memory stays bounded): tooLong is true and
// line holds its first 64 KiB and last 64 KiB, enough to find its id.
func (d *drain) readLine() (line []byte, tooLong bool, err error) {
	var head, tail []byte
	total := 0
	for {
		frag, err := d.in.ReadSlice('\n')
		total += len(frag)
		if total <= MaxLine {
			head = append(head, frag...)
		} else {
			if !tooLong {
				tooLong = true
				tail = append(tail, head[min(len(head), 64<<10):]...)
				head = head[:min(len(head), 64<<10)]
			}
			tail = append(tail, frag...)
			if len(tail) > 64<<10 {
				tail = append(tail[:0], tail[len(tail)-64<<10:]...)
			}
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if tooLong {
			return append(head, tail...), true, err
		}
		return head, false, err
	}
}

// idKey is how an id is remembered between a request and its answer.
func idKey(id jsonrpc.ID) string {
	b, _ := json.Marshal(id.Raw())
	return string(b)
}

// rejectBatch answers a JSON-RPC batch: each request in it gets an
// invalid-request error under its own id (one array, as JSON-RPC 2.0
// answers a batch); MCP since 2025-06-18 has no batches, and the SDK
// would end the session on one.
func (d *drain) rejectBatch(t []byte) {
	var elems []json.RawMessage
	_ = json.Unmarshal(t, &elems)
	const msg = "invalid request: JSON-RPC batches are not supported (MCP 2025-06-18 removed them); send one message per line"
	var out []json.RawMessage
	for _, e := range elems {
		var h rpcHead
		if json.Unmarshal(e, &h) != nil || h.Method == "" || len(h.ID) == 0 || string(h.ID) == "null" {
			continue // a notification or a response: nothing to answer
		}
		out = append(out, errorResponse(validID(h.ID), jsonrpc.CodeInvalidRequest, msg))
	}
	if len(out) == 0 {
		d.writeLine(errorResponse(nil, jsonrpc.CodeInvalidRequest, msg))
		return
	}
	b, _ := json.Marshal(out)
	d.writeLine(b)
}

// reject answers one line with a JSON-RPC error under the line's id when
// it has a valid one (a number or a string at the top level), else null.
func (d *drain) reject(line []byte, code int, msg string) {
	d.writeLine(errorResponse(validID(topLevelID(line)), code, msg))
}

// validID returns raw when it is a JSON-RPC id a client can match (a
// number or a string), else nil (JSON null).
func validID(raw []byte) json.RawMessage {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
		return nil
	}
	switch v.(type) {
	case float64, string:
		return json.RawMessage(raw)
	}
	return nil
}

func errorResponse(id json.RawMessage, code int, msg string) []byte {
	if id == nil {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id,
		"error": map[string]any{"code": code, "message": msg}})
	return b
}

func (d *drain) writeLine(b []byte) {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	_, _ = d.out.Write(append(b, '\n'))
}

// topLevelID finds the raw value of the "id" member of the top-level
// object in b without decoding the rest, so it works on the head and tail
// of a line too long to keep (a truncated middle is skipped over as long
// as it does not cut a string in two at an odd place). It returns nil when
// there is none it can trust.
func topLevelID(b []byte) []byte {
	depth, inStr, esc := 0, false, false
	keyStart, valStart := -1, -1
	var key []byte
	expectKey := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
				if depth == 1 && keyStart >= 0 {
					key = b[keyStart:i]
					keyStart = -1
				}
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
			if depth == 1 && expectKey {
				keyStart = i + 1
				expectKey = false
			}
			if depth == 1 && valStart == -2 {
				valStart = i
			}
		case '{', '[':
			if depth == 1 && valStart == -2 {
				valStart = i
			}
			depth++
			if depth == 1 {
				expectKey = true
			}
		case '}', ']', ',':
			if depth == 1 && valStart >= 0 {
				return bytes.TrimSpace(b[valStart:i])
			}
			if c == ',' && depth == 1 {
				expectKey = true
			} else if c != ',' {
				depth--
			}
		case ':':
			if depth == 1 && string(key) == "id" {
				valStart = -2 // the value starts at the next non-space byte
			}
			key = nil
		default:
			if depth == 1 && valStart == -2 && c != ' ' && c != '\t' && c != '\r' && c != '\n' {
				valStart = i
			}
		}
	}
	return nil
}

// waitAnswered blocks until no request read is unanswered, or ctx ends.
func (d *drain) waitAnswered() {
	for {
		d.mu.Lock()
		n, ch := len(d.pending), d.changed
		d.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-ch:
		case <-d.ctx.Done():
			return
		}
	}
}

// Write passes output through, noting answers.
func (d *drain) Write(p []byte) (int, error) {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	n, err := d.out.Write(p)
	d.partial = append(d.partial, p[:n]...)
	for {
		i := bytes.IndexByte(d.partial, '\n')
		if i < 0 {
			break
		}
		var h rpcHead
		if json.Unmarshal(d.partial[:i], &h) == nil && h.Method == "" && len(h.ID) > 0 {
			key := string(h.ID)
			var v any
			if json.Unmarshal(h.ID, &v) == nil {
				if id, err := jsonrpc.MakeID(v); err == nil {
					key = idKey(id)
				}
			}
			d.mu.Lock()
			if d.pending[key] {
				delete(d.pending, key)
				close(d.changed)
				d.changed = make(chan struct{})
			}
			d.mu.Unlock()
		}
		d.partial = append(d.partial[:0], d.partial[i+1:]...)
	}
	return n, err
}

// parseError answers a line that is not JSON with JSON-RPC's parse error
// (-32700, id null) and goes on with the next line.
func (d *drain) parseError(line []byte) {
	if len(line) > 64 {
		line = line[:64]
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil,
		"error": map[string]any{"code": -32700, "message": "parse error: not a JSON message: " + string(bytes.ToValidUTF8(line, []byte("?")))}})
	d.wmu.Lock()
	defer d.wmu.Unlock()
	_, _ = d.out.Write(append(b, '\n'))
}

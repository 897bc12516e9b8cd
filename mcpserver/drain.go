package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"sync"
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

// Read hands out the input a line at a time, noting requests.
func (d *drain) Read(p []byte) (int, error) {
	for len(d.buf) == 0 {
		line, err := d.in.ReadBytes('\n')
		if len(line) == 0 && err != nil {
			if err == io.EOF {
				d.waitAnswered()
			}
			return 0, err
		}
		if t := bytes.TrimSpace(line); len(t) > 0 && !json.Valid(t) {
			// JSON-RPC's answer to a line that is not JSON; the SDK
			// would end the session (and every answer still owed).
			d.parseError(t)
			continue
		}
		var h rpcHead
		if json.Unmarshal(line, &h) == nil && h.Method != "" && len(h.ID) > 0 && string(h.ID) != "null" {
			d.mu.Lock()
			d.pending[string(h.ID)] = true
			d.mu.Unlock()
		}
		d.buf = line
	}
	n := copy(p, d.buf)
	d.buf = d.buf[n:]
	return n, nil
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
			d.mu.Lock()
			if d.pending[string(h.ID)] {
				delete(d.pending, string(h.ID))
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

package master

import (
	"context"
	"encoding/base64"
	"strings"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
)

// SendOptions say how [Session.Send] delivers input. The zero value sends
// at once, with no expect, not secret.
type SendOptions struct {
	// Expect, when not empty, is an RE2 regular expression (Go's regexp
	// syntax) that must match the command's output before anything is
	// sent: the runner searches from the command's expect cursor (the end
	// of the last match a send consumed, so no match is skipped and none
	// answered twice), within the last 64 KiB of its output, and writes
	// the bytes at once when it matches. A command still queued is waited
	// for. No match within ExpectTimeout: nothing is sent and Send
	// returns ErrExpectTimeout.
	Expect string
	// ExpectTimeout bounds the expect on the runner's clock; zero means
	// the runner's default (30 s). At most 7 days.
	ExpectTimeout time.Duration
	// ExpectFrom, when set, is the output offset the expect searches from
	// instead of the expect cursor (a reply's OutputOffset, say).
	ExpectFrom *int64
	// Secret: the bytes appear nowhere in the session — not in events, not
	// in the reply (no sha256), not in the request file after delivery, and
	// not through the terminal's echo: the runner refuses (ErrRefusedEcho)
	// while the terminal echoes. A tool that echoes by itself (a line
	// editor) prints them, which no runner can see in advance.
	Secret bool
}

// Send writes data into the tool's terminal as typed input for command
// cmdID, exactly as given (add the "\n" a line needs), and returns the
// runner's reply (outcome delivered, with the byte count, the sha256 unless
// secret, the spool offset and the command's output offset at delivery,
// and where the expect matched).
//
// Input reaches only cmdID while it runs: a command that is queued (and
// not waited for by an expect), finished or unknown gets nothing and Send
// returns a *RequestError wrapping ErrNotRunning (its Reply.CmdState says
// which). Input the command does not read is dropped when it ends; it never
// reaches the tool's prompt or a later command. Sends to one command apply
// in seq order, so one master's sends arrive in the order it made them,
// each once. Other outcomes: ErrExpectTimeout, ErrRefusedEcho,
// ErrStaleRequest, ErrRequestRejected (see [Session.Request] for the rest).
func (s *Session) Send(ctx context.Context, cmdID string, data []byte, opts SendOptions) (*protocol.ControlReply, error) {
	req, err := opts.request(cmdID, data)
	if err != nil {
		return nil, err
	}
	return s.Request(ctx, req)
}

// request is the send request for data to cmdID under opts: a zero field
// leaves its key out, so that the runner applies its default.
func (opts SendOptions) request(cmdID string, data []byte) (protocol.ControlRequest, error) {
	req := protocol.ControlRequest{Op: protocol.OpSend, CmdID: cmdID, DataB64: base64.StdEncoding.EncodeToString(data),
		Secret: opts.Secret, Expect: opts.Expect, ExpectFrom: opts.ExpectFrom}
	if opts.ExpectTimeout < 0 {
		return req, usageErr("expect timeout %v is negative", opts.ExpectTimeout)
	}
	if opts.ExpectTimeout > 0 {
		ms := max(opts.ExpectTimeout.Milliseconds(), 1)
		req.ExpectTimeoutMS = &ms
	}
	return req, nil
}

// Signal sends sig (INT, QUIT, TSTP, CONT, HUP, USR1, USR2, TERM or KILL;
// a "SIG" prefix and lower case are accepted) to the foreground process
// group of the terminal while cmdID runs. It has no cancel semantics: the
// command goes on or ends as the tool decides (a tool may dump its status
// on USR1; KILL kills the tool, which is restarted). A command that is not running gets nothing: ErrNotRunning.
func (s *Session) Signal(ctx context.Context, cmdID, sig string) (*protocol.ControlReply, error) {
	return s.Request(ctx, protocol.ControlRequest{Op: protocol.OpSignal, CmdID: cmdID, Signal: signalName(sig)})
}

// signalName normalises a signal name: "sigusr1" and "SIGUSR1" are USR1.
func signalName(sig string) string {
	return strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(sig)), "SIG")
}

// Resize sets the tool's terminal to cols x rows (1 to 10000 each); the
// tool's foreground process group gets SIGWINCH. The size is kept for
// later starts of the tool.
func (s *Session) Resize(ctx context.Context, cols, rows int) (*protocol.ControlReply, error) {
	if cols < 1 || rows < 1 || cols > protocol.MaxResize || rows > protocol.MaxResize {
		return nil, usageErr("resize %dx%d: columns and rows must be 1 to %d", cols, rows, protocol.MaxResize)
	}
	return s.Request(ctx, protocol.ControlRequest{Op: protocol.OpResize, Cols: cols, Rows: rows})
}

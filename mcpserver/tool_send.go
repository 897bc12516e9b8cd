package mcpserver

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
)

// SendInput is the input of send.
type SendInput struct {
	CmdID          string  `json:"cmd_id" jsonschema:"the running command to type into (input for any other command is refused)"`
	Text           string  `json:"text" jsonschema:"what to type; a newline is added unless no_newline"`
	NoNewline      bool    `json:"no_newline,omitempty" jsonschema:"type text exactly, without adding a newline"`
	Expect         string  `json:"expect,omitempty" jsonschema:"RE2 pattern that must match the command's output first (from its expect cursor: the end of the last match a send consumed); nothing is typed without a match"`
	ExpectTimeoutS float64 `json:"expect_timeout_s,omitempty" jsonschema:"how long expect waits, in seconds (absent: 30; capped by the server)"`
	Secret         bool    `json:"secret,omitempty" jsonschema:"a password: written nowhere in the session (no log, no hash); refused while the tool's terminal echoes"`
	Session        string  `json:"session,omitempty" jsonschema:"the command's session (pool servers)"`
}

// SendOutput is the output of send.
type SendOutput struct {
	Session      string `json:"session" jsonschema:"the session of the command"`
	CmdID        string `json:"cmd_id" jsonschema:"the command"`
	Outcome      string `json:"outcome" jsonschema:"delivered; not_running (the command is queued, finished or unknown: nothing typed); expect_timeout (expect did not match: nothing typed); refused_echo (a secret while the terminal echoes: nothing typed); rejected; stale"`
	Message      string `json:"message" jsonschema:"what happened, in a sentence"`
	CmdState     string `json:"cmd_state,omitempty" jsonschema:"where a refused command is: queued, finished or unknown"`
	Bytes        int64  `json:"bytes,omitempty" jsonschema:"bytes typed"`
	MatchStart   *int64 `json:"match_start,omitempty" jsonschema:"where expect matched in the command's output (byte offset)"`
	MatchEnd     *int64 `json:"match_end,omitempty" jsonschema:"where the match ended: the next expect searches from here"`
	OutputOffset *int64 `json:"output_offset,omitempty" jsonschema:"the command's output size when the text was typed: read_output from here shows the answer's effect"`
	ResumeCursor int64  `json:"resume_cursor" jsonschema:"the spool size when the text was typed: wait_for from here sees only what followed"`
}

// defaultExpect is how long send's expect waits when the call names no
// expect_timeout_s.
const defaultExpect = 30 * time.Second

func (h *handler) send(ctx context.Context, _ *mcp.CallToolRequest, in SendInput) (SendOutput, error) {
	if in.ExpectTimeoutS < 0 {
		return SendOutput{}, errors.New("expect_timeout_s must not be negative")
	}
	var s *master.Session
	var name string
	if ref, err := h.command(in.Session, in.CmdID); err == nil {
		s, name = ref.s, ref.session
	} else if s, name, err = h.sessions.get(in.Session); err != nil {
		return SendOutput{}, err // The runner answers an unknown cmd_id of a known session.
	}
	// The rules see the line the tool will read: what this server typed
	// into the command since its last newline, plus this text, so a
	// denied word cannot be typed in pieces.
	line := h.lineFor(name, in.CmdID)
	line.mu.Lock()
	defer line.mu.Unlock()
	if err := h.checkPayload(line.held + in.Text); err != nil {
		return SendOutput{}, err
	}
	data := []byte(in.Text)
	if !in.NoNewline {
		data = append(data, '\n')
	}
	// The call never blocks past the server's ceiling: the expect gives up
	// before the wait for the runner's reply does.
	expect := defaultExpect
	if in.ExpectTimeoutS > 0 {
		expect = time.Duration(in.ExpectTimeoutS * float64(time.Second))
	}
	expect = max(min(expect, h.cfg.MaxWait*9/10), time.Millisecond)
	ctx, cancel := context.WithTimeout(ctx, h.cfg.MaxWait)
	defer cancel()
	rep, err := s.Send(ctx, in.CmdID, data, master.SendOptions{Expect: in.Expect, ExpectTimeout: expect, Secret: in.Secret})
	var re *master.RequestError
	if err != nil && !errors.As(err, &re) {
		return SendOutput{}, err
	}
	if rep == nil {
		rep = re.Reply
	}
	out := SendOutput{Session: name, CmdID: in.CmdID, Outcome: string(rep.Outcome), Message: rep.Message,
		CmdState: rep.CmdState, MatchStart: rep.MatchStart, MatchEnd: rep.MatchEnd, OutputOffset: rep.OutputOffset,
		ResumeCursor: rep.SpoolOffset}
	if rep.Bytes != nil {
		out.Bytes = *rep.Bytes
	}
	switch {
	case rep.Outcome == protocol.OutcomeDelivered:
		line.typed(string(data))
	case rep.CmdState == "finished" || rep.CmdState == "unknown":
		h.forgetLine(name, in.CmdID)
	}
	if rep.Outcome == protocol.OutcomeNotFound {
		out.Outcome = string(protocol.OutcomeNotRunning)
	}
	return out, nil
}

// heldLine is the text this server typed into one running command since
// the last newline it typed there: the start of the line the tool has
// not read yet. Sends to one command are checked and typed one at a time.
type heldLine struct {
	mu   sync.Mutex
	held string
}

// maxHeld bounds what a heldLine keeps: the last bytes of a line this long.
const maxHeld = 1 << 20

// typed notes text delivered to the command.
func (l *heldLine) typed(text string) {
	l.held += text
	if i := strings.LastIndexByte(l.held, '\n'); i >= 0 {
		l.held = l.held[i+1:]
	}
	if len(l.held) > maxHeld {
		l.held = l.held[len(l.held)-maxHeld:]
	}
}

func (h *handler) lineFor(session, cmdID string) *heldLine {
	h.mu.Lock()
	defer h.mu.Unlock()
	key := session + "\x00" + cmdID
	if l := h.lines[key]; l != nil {
		return l
	}
	if len(h.lines) >= 1024 { // Bounded: commands that ended long ago.
		clear(h.lines)
	}
	l := &heldLine{}
	h.lines[key] = l
	return l
}

func (h *handler) forgetLine(session, cmdID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.lines, session+"\x00"+cmdID)
}

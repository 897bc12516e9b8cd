package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/skillpilot/skillpilot/master"
)

// maxPattern bounds wait_for's pattern.
const maxPattern = 4096

// WaitForInput is the input of wait_for.
type WaitForInput struct {
	Pattern      string  `json:"pattern" jsonschema:"RE2 regular expression searched in the raw spool; lines end in CR LF (tclsh on a PTY: CR CR LF), so use (?m) with \\r?$ or match without $"`
	FromCursor   int64   `json:"from_cursor" jsonschema:"spool byte offset to search from: 0, or the resume_cursor of a previous call (submit, wait_for, tail, status)"`
	WaitTimeoutS float64 `json:"wait_timeout_s,omitempty" jsonschema:"how long to wait, in seconds (absent: the server's default; never more than the server's ceiling)"`
	Session      string  `json:"session,omitempty" jsonschema:"which session (required with a pool of several sessions)"`
}

// Span is a byte range [start, end) of the spool.
type Span struct {
	Start int64 `json:"start" jsonschema:"first byte of the match"`
	End   int64 `json:"end" jsonschema:"byte after the match"`
}

// WaitForOutput is the output of wait_for. resume_cursor is its only
// cursor: match_span.end on a match, the spool size on a timeout.
type WaitForOutput struct {
	Session            string `json:"session" jsonschema:"the session whose spool was searched"`
	Matched            bool   `json:"matched" jsonschema:"true when the pattern matched"`
	MatchText          string `json:"match_text,omitempty" jsonschema:"the matched bytes (bounded by the byte budget)"`
	MatchTextTruncated bool   `json:"match_text_truncated,omitempty" jsonschema:"match_text was cut to the budget"`
	MatchSpan          *Span  `json:"match_span,omitempty" jsonschema:"where the match is in the spool"`
	ResumeCursor       int64  `json:"resume_cursor" jsonschema:"where the next wait_for must start: match_span.end on a match, the spool size on a timeout"`
	Error              string `json:"error,omitempty" jsonschema:"timeout when nothing matched in time"`
}

func (h *handler) waitFor(ctx context.Context, _ *mcp.CallToolRequest, in WaitForInput) (WaitForOutput, error) {
	if in.FromCursor < 0 {
		return WaitForOutput{}, errors.New("from_cursor must not be negative")
	}
	if len(in.Pattern) > maxPattern {
		return WaitForOutput{}, fmt.Errorf("pattern longer than %d bytes", maxPattern)
	}
	re, err := regexp.Compile(in.Pattern)
	if err != nil {
		return WaitForOutput{}, fmt.Errorf("pattern: %w", err)
	}
	s, name, err := h.sessions.get(in.Session)
	if err != nil {
		return WaitForOutput{}, err
	}
	wctx, cancel := context.WithTimeout(ctx, h.callWait(in.WaitTimeoutS))
	defer cancel()
	m, err := s.WaitFor(wctx, re, in.FromCursor)
	out := WaitForOutput{Session: name, ResumeCursor: m.ResumeCursor}
	switch {
	case err == nil:
		out.Matched = true
		out.MatchSpan = &Span{Start: m.Start, End: m.End}
		out.MatchText, out.MatchTextTruncated = cut(m.Text, h.cfg.PreviewBytes)
		out.MatchText = text([]byte(out.MatchText))
	case errors.Is(err, master.ErrWaitTimeout) && ctx.Err() == nil:
		out.Error = "timeout"
	default:
		return out, err
	}
	return out, nil
}

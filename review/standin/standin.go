// Package standin turns recorded sessions into a stand-in for the tool
// they ran: a Tcl file that, loaded with `runner --init FILE -- tclsh`,
// answers every recorded command with the recorded output bytes, value and
// status on a plain tclsh, with no license.
//
// # Matching
//
// A command is recognised by its exact payload text (byte for byte, as in
// its command file). When one payload was recorded several times (in one
// session or across the sessions given), the stand-in answers its first
// occurrence with the first recording, the second with the second, and so
// on in recorded order (sessions in the order given, each in the order its
// commands started); once the recordings are used up it repeats the last.
// A payload that was never recorded fails with a Tcl error naming it, or
// with OnUnknown "tcl" is evaluated by tclsh itself.
//
// How a recording ends: a command that returned (ok, or a Tcl error) returns
// the recorded value with the recorded return code; one that called exit
// exits with the recorded code; one the tool died of kills the tool with
// the recorded signal; one that never finished by itself (cancelled, timed
// out, its runner died) prints its recorded output and then waits until it
// is interrupted, as the original did.
//
// # Replay position across tool restarts
//
// Cancelling a command kills plain tclsh; the runner starts a new one and
// reruns the init scripts, which reloads the stand-in. So that the replay
// does not start over silently, the stand-in appends "<payload> <n>" to
// log/standin-<id>.positions in the session directory ($SP_SESSION_DIR)
// before each answer and reads it back when it loads. The positions belong
// to the session directory: a new session starts from the first recording;
// delete the file to start over in the same session. Without SP_SESSION_DIR
// (the file sourced by hand) positions are kept in memory only, and the
// stand-in says so when it loads.
//
// Commands that are not replayed: invalid command files and commands
// cancelled before they started (the runner answers those itself without
// the tool), commands whose command file is gone, and payloads run with
// marker mode payload_contains (evaluated by tclsh).
package standin

import (
	"bytes"
	"compress/zlib"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
	"github.com/skillpilot/skillpilot/review"
)

//go:embed runtime.tcl
var runtime string

// Options tune Generate.
type Options struct {
	// Timing: "none" (answer at once; the default), "recorded" (take the
	// recorded run time), or "scale=F" (the recorded time × F).
	Timing string
	// OnUnknown: "error" (the default: a Tcl error naming the command) or
	// "tcl" (let tclsh evaluate it).
	OnUnknown string
	// MaxOutput bounds the output of one command that is embedded (default
	// 256 MiB).
	MaxOutput int64
}

// Stats says what Generate put into the file.
type Stats struct {
	Recordings int      // answers embedded
	Payloads   int      // distinct payloads
	Skipped    []string // commands not embedded, with why
	ID         string   // identifies the recordings (names the positions file)
}

// ErrUsage reports a bad option value.
var ErrUsage = errors.New("standin: bad option")

// ParseTiming returns the factor applied to recorded times: 0 for "none",
// 1 for "recorded", F for "scale=F".
func ParseTiming(s string) (float64, error) {
	switch {
	case s == "" || s == "none":
		return 0, nil
	case s == "recorded":
		return 1, nil
	case strings.HasPrefix(s, "scale="):
		f, err := strconv.ParseFloat(strings.TrimPrefix(s, "scale="), 64)
		if err != nil || f < 0 || f > 1e6 {
			return 0, fmt.Errorf("%w: --timing %q: scale must be a number from 0 to 1e6", ErrUsage, s)
		}
		return f, nil
	}
	return 0, fmt.Errorf("%w: --timing %q: want none, recorded or scale=F", ErrUsage, s)
}

// recording is one answer.
type recording struct {
	payload int
	action  string // return, exit, kill, hang
	rc      int
	value   string
	output  []byte
	ms      int64
	arg     string
}

// Generate writes the stand-in for sessions (loaded with Payloads) to w.
func Generate(w io.Writer, sessions []*review.Session, opt Options) (Stats, error) {
	var st Stats
	scale, err := ParseTiming(opt.Timing)
	if err != nil {
		return st, err
	}
	switch opt.OnUnknown {
	case "":
		opt.OnUnknown = "error"
	case "error", "tcl":
	default:
		return st, fmt.Errorf("%w: --on-unknown %q: want error or tcl", ErrUsage, opt.OnUnknown)
	}
	if opt.MaxOutput <= 0 {
		opt.MaxOutput = 256 << 20
	}
	index := map[string]int{}
	var payloads []string
	var recs []recording
	for _, s := range sessions {
		for _, c := range s.Commands {
			r, why, err := record(s, c, opt.MaxOutput)
			if err != nil {
				return st, err
			}
			if why != "" {
				st.Skipped = append(st.Skipped, fmt.Sprintf("%s: %s: %s", s.Name, c.CmdID, why))
				continue
			}
			i, ok := index[c.Payload]
			if !ok {
				i = len(payloads)
				index[c.Payload] = i
				payloads = append(payloads, c.Payload)
			}
			r.payload = i
			recs = append(recs, r)
		}
	}
	var data bytes.Buffer
	for i, p := range payloads {
		fmt.Fprintf(&data, "::sp_standin::payload %d %s\n", i, b64([]byte(p)))
	}
	for _, r := range recs {
		enc, out := "raw", r.output
		if len(out) > 1024 {
			if z := deflate(out); len(z) < len(out)*9/10 {
				enc, out = "zlib", z
			}
		}
		fmt.Fprintf(&data, "::sp_standin::rec %d %s %d %s %s %s %d %s\n", r.payload, r.action, r.rc,
			b64([]byte(r.value)), enc, b64(out), r.ms, tclWord(r.arg))
	}
	sum := sha256.Sum256(data.Bytes())
	st.ID, st.Recordings, st.Payloads = hex.EncodeToString(sum[:8]), len(recs), len(payloads)
	var head strings.Builder
	fmt.Fprintf(&head, "# SkillPilot stand-in, generated by `master standin` at %s.\n", time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(&head, "# %d recordings of %d distinct payloads, from:\n", st.Recordings, st.Payloads)
	for _, s := range sessions {
		fmt.Fprintf(&head, "#   %s\n", strings.ReplaceAll(s.Dir, "\n", " "))
	}
	head.WriteString(`# Use: runner --session DIR --init THIS_FILE -- tclsh
# Each command is matched by its exact payload text. A payload recorded several times is answered
# with its recordings in recorded order, then the last one again. An unrecorded payload fails with
# a Tcl error naming it (or, generated with --on-unknown tcl, is evaluated by tclsh). Replay
# positions survive tool restarts: they are kept in $SP_SESSION_DIR/log/standin-<id>.positions.
`)
	fmt.Fprintf(&head, "namespace eval ::sp_standin {\n    variable id %s\n    variable onUnknown %s\n    variable scale %s\n}\n",
		st.ID, opt.OnUnknown, strconv.FormatFloat(scale, 'g', -1, 64))
	for _, part := range []string{head.String(), runtime, "# ---- recordings ----\n", data.String(),
		"::sp_standin::loadPositions\n::sp_standin::install\n"} {
		if _, err := io.WriteString(w, part); err != nil {
			return st, err
		}
	}
	return st, nil
}

// record turns a command of a session into a recording, or says why it is
// not one.
func record(s *review.Session, c *review.Command, maxOut int64) (recording, string, error) {
	res := c.Result
	switch {
	case res == nil:
		return recording{}, "still running", nil
	case res.ExitReason == protocol.ReasonInvalidRequest || res.ExitReason == protocol.ReasonCancelledQueued:
		return recording{}, "never ran (" + string(res.ExitReason) + ")", nil
	case !c.PayloadKnown:
		return recording{}, "its command file is gone", nil
	case c.Kind == protocol.KindSh:
		return recording{}, "", fmt.Errorf("standin: %s: %s is a shell command: stand-ins replay Tcl sessions only", s.Dir, c.CmdID)
	}
	out, err := s.Output(c, maxOut)
	if err != nil {
		return recording{}, "", fmt.Errorf("standin: %s: %w", s.Dir, err)
	}
	r := recording{output: out, ms: res.Stats.DurationMS, action: "hang"}
	if r.ms == 0 {
		r.ms = c.Duration().Milliseconds()
	}
	switch res.ExitReason {
	case protocol.ReasonMarkerSeen:
		r.action = "return"
		switch {
		case res.ToolRC != nil:
			r.rc = *res.ToolRC
		case res.Status != protocol.StatusOK:
			r.rc = 1
		}
		if res.Value != nil {
			r.value = *res.Value
		} else if res.Error != nil && r.rc == 1 {
			r.value = res.Error.Message
		}
	case protocol.ReasonToolExit:
		r.action, r.arg = "exit", "1"
		if res.ExitCode != nil {
			r.arg = strconv.Itoa(*res.ExitCode)
		}
	case protocol.ReasonToolDied:
		r.action, r.arg = "kill", strings.TrimPrefix(res.Signal, "SIG")
		if !isWord(r.arg) {
			r.arg = "KILL"
		}
	}
	return r, "", nil
}

func b64(b []byte) string {
	s := base64.StdEncoding.EncodeToString(b)
	if len(s) <= 100 {
		if s == "" {
			return "{}"
		}
		return s
	}
	// Long data goes in braces, 100 characters a line (binary decode
	// base64 skips the newlines).
	var sb strings.Builder
	sb.Grow(len(s) + len(s)/100 + 4)
	sb.WriteString("{\n")
	for len(s) > 100 {
		sb.WriteString(s[:100])
		sb.WriteByte('\n')
		s = s[100:]
	}
	sb.WriteString(s)
	sb.WriteString("\n}")
	return sb.String()
}

func deflate(b []byte) []byte {
	var buf bytes.Buffer
	zw := zlib.NewWriter(&buf)
	_, _ = zw.Write(b) // Writes to a bytes.Buffer do not fail.
	_ = zw.Close()
	return buf.Bytes()
}

func isWord(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// tclWord renders a value that is already a safe word ([A-Z0-9-]) or empty.
func tclWord(s string) string {
	if s == "" {
		return "{}"
	}
	return s
}

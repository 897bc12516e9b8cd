package protocol

import (
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
)

// Directory and file names of a session.
const (
	DirQueue    = "queue"
	DirInflight = "inflight"
	DirResult   = "result"
	DirOutput   = "output"
	DirCtl      = "ctl"
	DirAck      = "ctl/ack" // replies to control requests, written by the runner
	DirState    = "state"
	DirLog      = "log"
	DirSeq      = "seq"
	DirRejected = "log/rejected"
	DirArchive  = "archive" // executed command files, beside their results (the audit trail)
	DirTmp      = "tmp"     // the runner's private working files; masters never look here

	FileState     = "state/state.json"
	FileHeartbeat = "state/heartbeat.json"
	FileLease     = "state/lease.json"
	FileLock      = "state/runner.lock"
	FileCancel    = "ctl/cancel.json"
	FileStop      = "ctl/stop.json"
	FileSpool     = "log/session.out"
	FileMeta      = "log/meta.log"
	FileTail      = "log/last_n_lines.txt"
	FileSeqHint   = "seq/hint"
)

// Dirs lists every directory of a session, in creation order.
var Dirs = []string{DirQueue, DirInflight, DirResult, DirOutput, DirCtl, DirAck, DirState, DirLog, DirSeq, DirRejected, DirArchive, DirTmp}

// IsMasterDir reports whether d is a session directory masters write into
// (queue/, ctl/, seq/, state/).
func IsMasterDir(d string) bool {
	return d == DirQueue || d == DirCtl || d == DirSeq || d == DirState
}

// DirMode is the mode of the session directory d ("" for the session
// directory itself; PROTOCOL.md section 20): 0700 in a private session;
// in a group-shared one (shared: setgid on the session directory) 2770
// for the session directory and those masters write into, 2750 for the
// runner's own. The runner makes its directories so and refuses a group
// writable one where it differs; a master that makes one uses it too.
func DirMode(d string, shared bool) fs.FileMode {
	switch {
	case !shared:
		return 0o700
	case d == "" || IsMasterDir(d):
		return 0o770 | fs.ModeSetgid
	}
	return 0o750 | fs.ModeSetgid
}

// MaxCmdIDLen is the longest cmd_id accepted.
const MaxCmdIDLen = 128

// seqWidth is the zero-padded width of seq in names this package formats, so
// that lexical order of names is numeric order. Parsing accepts any width.
const seqWidth = 10

// ErrBadName reports a file name that is not cmd_<seq>_<cmd_id>.json.
var ErrBadName = errors.New("protocol: not a command file name")

// ErrBadCmdID reports a name of the form cmd_<seq>_<x>.json whose x is not a
// safe cmd_id. Such a file is meant as a command and is answered with an
// invalid_request result under its own name; ParseCommandName still returns
// its seq and raw id.
var ErrBadCmdID = errors.New("protocol: unsafe cmd_id in file name")

// ValidCmdID reports whether id is a safe cmd_id: 1 to 128 characters from
// [A-Za-z0-9._-], and not "." or "..".
func ValidCmdID(id string) bool {
	if len(id) == 0 || len(id) > MaxCmdIDLen || id == "." || id == ".." {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// CommandName returns the file name of a command: cmd_<seq>_<cmd_id>.json.
func CommandName(seq int64, cmdID string) string {
	return fmt.Sprintf("cmd_%0*d_%s.json", seqWidth, seq, cmdID)
}

// OutputName returns the output file name that goes with a command file name.
func OutputName(commandName string) string {
	return strings.TrimSuffix(commandName, ".json") + ".out"
}

// ParseCommandName parses cmd_<seq>_<cmd_id>.json. seq is decimal of any
// width (masters written against the seed protocol do not pad it).
func ParseCommandName(name string) (seq int64, cmdID string, err error) {
	rest, ok := strings.CutPrefix(name, "cmd_")
	if !ok {
		return 0, "", ErrBadName
	}
	rest, ok = strings.CutSuffix(rest, ".json")
	if !ok {
		return 0, "", ErrBadName
	}
	digits, id, ok := strings.Cut(rest, "_")
	if !ok || digits == "" || len(digits) > 18 {
		return 0, "", ErrBadName
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, "", ErrBadName
		}
	}
	seq, err = strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return 0, "", ErrBadName
	}
	if id == "" || strings.ContainsAny(id, "/\x00") {
		return 0, "", ErrBadName
	}
	if !ValidCmdID(id) {
		return seq, id, ErrBadCmdID
	}
	return seq, id, nil
}

// CheckQueueName classifies a name found in queue/: ok is false for a name
// that is not meant as a command (dot-files, names not ending in ".json"
// in any letter case: notes.txt, cmd_1_x.json.tmp, editor files), which
// are left alone. For a name meant as a command, seq is its seq (0 when it
// has none that parses) and rule, when not empty, is the naming rule it
// breaks, phrased for the invalid_request message.
func CheckQueueName(name string) (seq int64, rule string, ok bool) {
	if strings.HasPrefix(name, ".") || len(name) < 5 || !strings.EqualFold(name[len(name)-5:], ".json") {
		return 0, "", false
	}
	seq, _, err := ParseCommandName(name)
	switch {
	case err == nil, errors.Is(err, ErrBadCmdID):
		return seq, "", true
	case !strings.HasSuffix(name, ".json"):
		return looseSeq(name), fmt.Sprintf("file name %q: the extension must be .json in lower case (cmd_<seq>_<cmd_id>.json)", name), true
	case !strings.HasPrefix(name, "cmd_"):
		return 0, fmt.Sprintf("file name %q is not cmd_<seq>_<cmd_id>.json", name), true
	}
	digits, _, found := strings.Cut(strings.TrimSuffix(strings.TrimPrefix(name, "cmd_"), ".json"), "_")
	switch {
	case !found || digits == "" || strings.Trim(digits, "0123456789") != "":
		return 0, fmt.Sprintf("file name %q has no seq: it must be cmd_<seq>_<cmd_id>.json with a decimal seq", name), true
	case len(digits) > 18:
		return 0, fmt.Sprintf("file name %q: seq has %d digits, at most 18 are allowed (a corrupt seq/hint?)", name, len(digits)), true
	}
	return looseSeq(name), fmt.Sprintf("file name %q is not cmd_<seq>_<cmd_id>.json", name), true
}

// looseSeq is the seq of cmd_<digits>_… in any extension case, or 0.
func looseSeq(name string) int64 {
	rest, _ := strings.CutPrefix(name, "cmd_")
	digits, _, _ := strings.Cut(rest, "_")
	if n, err := strconv.ParseInt(digits, 10, 64); err == nil && len(digits) <= 18 {
		return n
	}
	return 0
}

// DeriveCmdID returns the cmd_id and seq a result for a misnamed command
// file carries: derived is true when the name yields a safe cmd_id
// (cmd_<seq>_<id>.<any case json>, cmd_<id>.json), so a writer polling
// result/<its own name> gets an answer. mycmd.json yields none.
func DeriveCmdID(name string) (id string, seq int64, derived bool) {
	if seq, id, err := ParseCommandName(name); err == nil || errors.Is(err, ErrBadCmdID) {
		return id, seq, true
	}
	rest, ok := strings.CutPrefix(name, "cmd_")
	if !ok || len(rest) < 5 {
		return "", 0, false
	}
	rest = rest[:len(rest)-5] // The extension, in whatever case.
	if digits, tail, found := strings.Cut(rest, "_"); found && digits != "" && strings.Trim(digits, "0123456789") == "" {
		rest = tail
		if n, err := strconv.ParseInt(digits, 10, 64); err == nil && len(digits) <= 18 {
			seq = n
		}
	}
	if !ValidCmdID(rest) {
		return "", 0, false
	}
	return rest, seq, true
}

// SeqName is the reservation file of an allocated seq in seq/.
func SeqName(seq int64) string { return fmt.Sprintf("%0*d", seqWidth, seq) }

// ParseSeqName parses a reservation file name; ok is false for anything else.
func ParseSeqName(name string) (int64, bool) {
	if name == "" || len(name) > 18 {
		return 0, false
	}
	for _, c := range name {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(name, 10, 64)
	return n, err == nil
}

// RequestName returns the file name of a control request (and of its reply
// in ctl/ack/): req_<seq>_<req_id>.json, seq zero-padded like a command's.
func RequestName(seq int64, reqID string) string {
	return fmt.Sprintf("req_%0*d_%s.json", seqWidth, seq, reqID)
}

// IsRequestName reports whether name is meant as a control request: it
// starts with "req_" and is not a temporary file. Such a name that
// ParseRequestName refuses is answered with an event, not ignored.
func IsRequestName(name string) bool { return strings.HasPrefix(name, "req_") }

// ParseRequestName parses req_<seq>_<req_id>.json (seq of any width, req_id
// of the cmd_id character set). It returns ErrBadRequestName otherwise.
func ParseRequestName(name string) (seq int64, reqID string, err error) {
	rest, ok := strings.CutPrefix(name, "req_")
	if !ok {
		return 0, "", ErrBadRequestName
	}
	seq, reqID, err = ParseCommandName("cmd_" + rest)
	if err != nil {
		return 0, "", ErrBadRequestName
	}
	return seq, reqID, nil
}

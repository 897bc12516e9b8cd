package protocol

import (
	"errors"
	"fmt"
	"regexp"
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

// MaxCmdIDLen is the longest cmd_id accepted.
const MaxCmdIDLen = 128

// seqWidth is the zero-padded width of seq in names this package formats, so
// that lexical order of names is numeric order. Parsing accepts any width.
const seqWidth = 10

var cmdIDPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,128}$`)

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
	return cmdIDPattern.MatchString(id) && id != "." && id != ".."
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

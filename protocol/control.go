package protocol

// Control requests (PROTOCOL.md section 9): a mailbox of one file per
// request in ctl/, ctl/req_<seq>_<req_id>.json, answered by one reply per
// request in ctl/ack/ under the same name. The legacy single-slot files
// ctl/cancel.json and ctl/stop.json (see legacy.go) keep working for shells.

// Op is what a control request asks for.
type Op string

// Ops.
const (
	OpCancel Op = "cancel"
	OpStop   Op = "stop"
	OpSend   Op = "send"
	OpSignal Op = "signal"
	OpResize Op = "resize"
)

// Outcome says what a control request did. The strings are stable: masters
// map them to exit codes (PROTOCOL.md section 9.4).
type Outcome string

// Outcomes. Which ones an op can have:
//
//	cancel: cancelled_running, cancelled_queued, not_found, already_finished, idle, rejected, stale
//	stop:   accepted, rejected, stale
//	send:   delivered, not_running, expect_timeout, refused_echo, rejected, stale
//	signal: delivered, not_running, rejected, stale
//	resize: delivered, rejected, stale
const (
	OutcomeCancelledRunning Outcome = "cancelled_running"
	OutcomeCancelledQueued  Outcome = "cancelled_queued"
	OutcomeNotFound         Outcome = "not_found"
	OutcomeAlreadyFinished  Outcome = "already_finished"
	OutcomeIdle             Outcome = "idle"
	OutcomeAccepted         Outcome = "accepted"
	OutcomeDelivered        Outcome = "delivered"
	OutcomeNotRunning       Outcome = "not_running"
	OutcomeExpectTimeout    Outcome = "expect_timeout"
	OutcomeRefusedEcho      Outcome = "refused_echo"
	OutcomeRejected         Outcome = "rejected"
	OutcomeStale            Outcome = "stale"
)

// Signals a signal request may name.
var Signals = []string{"INT", "QUIT", "TSTP", "CONT", "HUP", "USR1", "USR2", "TERM", "KILL"}

// Limits of control requests.
const (
	// MaxRequestSize bounds a request file: 1 MiB of data, base64-encoded,
	// plus the other fields.
	MaxRequestSize = 2 << 20
	// MaxSendBytes bounds the bytes one send request delivers.
	MaxSendBytes = 1 << 20
	// MaxResize bounds cols and rows of a resize request.
	MaxResize = 10000
	// DefaultExpectTimeoutMS is the expect timeout of a send request that
	// names none.
	DefaultExpectTimeoutMS = 30000
	// maxExpectTimeoutMS keeps the conversion to a Duration from overflowing.
	maxExpectTimeoutMS = 7 * 24 * 3600 * 1000
)

// ControlRequest is ctl/req_<seq>_<req_id>.json. Which fields an op uses:
// cancel: CmdID, Scope; stop: Mode; send: CmdID, DataB64, Secret, Expect,
// ExpectTimeoutMS, ExpectFrom; signal: CmdID, Signal; resize: Cols, Rows
// (CmdID optional, not checked). SessionID, when set, names the runner
// session the request is meant for; a runner with another session id
// answers it as stale without acting.
type ControlRequest struct {
	ProtocolVersion int         `json:"protocol_version"`
	ReqID           string      `json:"req_id"`
	Seq             int64       `json:"seq"`
	Op              Op          `json:"op"`
	SessionID       string      `json:"session_id,omitempty"`
	TS              Time        `json:"ts,omitzero"`
	Submitter       string      `json:"submitter,omitempty"`
	CmdID           string      `json:"cmd_id,omitempty"`
	Scope           CancelScope `json:"scope,omitempty"`
	Mode            StopMode    `json:"mode,omitempty"`
	DataB64         string      `json:"data_b64,omitempty"`
	Secret          bool        `json:"secret,omitempty"`
	Expect          string      `json:"expect,omitempty"`
	ExpectTimeoutMS *int64      `json:"expect_timeout_ms,omitempty"`
	ExpectFrom      *int64      `json:"expect_from,omitempty"`
	Signal          string      `json:"signal,omitempty"`
	Cols            int         `json:"cols,omitempty"`
	Rows            int         `json:"rows,omitempty"`

	// Data is DataB64 decoded (set by ParseControlRequest).
	Data []byte `json:"-"`
}

// ControlReply is ctl/ack/req_<seq>_<req_id>.json, written once per request
// by the runner, atomically. SpoolOffset is the size of log/session.out when
// the request took effect, so control is ordered against output.
type ControlReply struct {
	ProtocolVersion int     `json:"protocol_version"`
	ReqID           string  `json:"req_id"`
	Seq             int64   `json:"seq"`
	Op              Op      `json:"op"`
	CmdID           string  `json:"cmd_id,omitempty"`
	Outcome         Outcome `json:"outcome"`
	Message         string  `json:"message"`
	TS              Time    `json:"ts"`
	SpoolOffset     int64   `json:"spool_offset"`
	// Send only: what was written, where the expect matched, and the
	// command's output size at delivery. SHA256 is omitted for secrets.
	Bytes        *int64 `json:"bytes,omitempty"`
	SHA256       string `json:"sha256,omitempty"`
	MatchStart   *int64 `json:"match_start,omitempty"`
	MatchEnd     *int64 `json:"match_end,omitempty"`
	OutputOffset *int64 `json:"output_offset,omitempty"`
	// CmdState says where the named command is when a send or signal was
	// refused: queued, finished or unknown.
	CmdState string `json:"cmd_state,omitempty"`
	// Context is set when the request was refused or could not act
	// (every outcome but cancelled_*, accepted and delivered): the facts
	// a program branches on, as in Error.Context (the invalid field, the
	// request file, the limit it broke, the named command and its state).
	Context map[string]any `json:"context,omitempty"`
}

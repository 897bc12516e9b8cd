package protocol

// Kind is the language of a command's payload.
type Kind string

// Kinds.
const (
	KindTcl Kind = "tcl"
	KindSh  Kind = "sh"
	// Other kinds name a driver (the runner's presets, such as yosys and
	// ngspice, or a --driver file): see ValidKind.
)

// CancelPolicy says how a running command is interrupted.
type CancelPolicy string

// Cancel policies.
const (
	PolicyCtrlC            CancelPolicy = "ctrl_c"
	PolicyTerminateTool    CancelPolicy = "terminate_tool"
	PolicyTerminateSession CancelPolicy = "terminate_session"
)

// MarkerMode says who prints the completion marker.
type MarkerMode string

// Marker modes.
const (
	MarkerRunnerInject    MarkerMode = "runner_inject"
	MarkerPayloadContains MarkerMode = "payload_contains"
)

// DefaultMarkerPrefix is the marker prefix when a command names none.
const DefaultMarkerPrefix = "__SP_DONE__"

// Marker configures completion detection for one command.
type Marker struct {
	Prefix string     `json:"prefix,omitempty"`
	Token  string     `json:"token,omitempty"`
	Mode   MarkerMode `json:"mode,omitempty"`
}

// Command is a request in queue/. Zero values of optional fields mean:
// TimeoutS 0 the runner's --default-timeout, CancelPolicy "" ctrl_c,
// Marker fields "" their defaults (prefix __SP_DONE__, token = cmd_id,
// mode runner_inject), MaxOutputBytes 0 the runner's --max-output-bytes.
type Command struct {
	ProtocolVersion int          `json:"protocol_version,omitempty"`
	CmdID           string       `json:"cmd_id"`
	Seq             int64        `json:"seq"`
	Kind            Kind         `json:"kind"`
	Payload         string       `json:"payload"`
	TimeoutS        float64      `json:"timeout_s,omitempty"`
	CancelPolicy    CancelPolicy `json:"cancel_policy,omitempty"`
	Marker          *Marker      `json:"marker,omitempty"`
	SubmittedAt     Time         `json:"submitted_at,omitzero"`
	Submitter       string       `json:"submitter,omitempty"`
	// TraceID and Labels let a flow find its steps (section 4,
	// "Correlation"): the runner copies them, unchanged, into the result,
	// the command's events, state.json while it runs, and the report.
	TraceID string            `json:"trace_id,omitempty"`
	Labels  map[string]string `json:"labels,omitempty"`

	// MaxOutputBytes is the command's output budget (PROTOCOL.md 6.3):
	// past it the runner keeps no more output and stops the command by
	// its cancel policy, and the result says output_limit.
	MaxOutputBytes int64 `json:"max_output_bytes,omitempty"`
}

// Status is the outcome of a command.
type Status string

// Statuses.
const (
	StatusOK        Status = "ok"
	StatusError     Status = "error"
	StatusTimeout   Status = "timeout"
	StatusCancelled Status = "cancelled"
)

// ExitReason says why a command ended.
type ExitReason string

// Exit reasons.
const (
	ReasonMarkerSeen       ExitReason = "marker_seen"
	ReasonToolExit         ExitReason = "tool_exit"
	ReasonToolDied         ExitReason = "tool_died"
	ReasonCtrlC            ExitReason = "ctrl_c"
	ReasonTerminateTool    ExitReason = "terminate_tool"
	ReasonTerminateSession ExitReason = "terminate_session"
	ReasonLeaseExpired     ExitReason = "lease_expired"
	ReasonInvalidRequest   ExitReason = "invalid_request"
	ReasonRunnerRestarted  ExitReason = "runner_restarted"
	ReasonCancelledQueued  ExitReason = "cancelled_before_start"
	ReasonForceStop        ExitReason = "force_stop"
	// ReasonRunnerError: the runner claimed the command but could not run
	// it (it could not create its output or payload file); error.code is
	// io_error and the message says why.
	ReasonRunnerError ExitReason = "runner_error"
)

// Error codes carried in Result.Error.Code and in master errors. They are
// stable: scripts branch on them.
const (
	CodeInvalidRequest  = "invalid_request"
	CodeDuplicateCmdID  = "duplicate_cmd_id"
	CodeToolError       = "tool_error"
	CodeToolExit        = "tool_exit"
	CodeToolDied        = "tool_died"
	CodeTimeout         = "timeout"
	CodeCancelled       = "cancelled"
	CodeLeaseExpired    = "lease_expired"
	CodeRunnerRestarted = "runner_restarted"
	CodeIO              = "io_error"

	// CodeOutputLimit: the command printed more than its max_output_bytes;
	// the runner stopped it and kept the first max_output_bytes bytes.
	CodeOutputLimit = "output_limit"

	// CodeToolStartFailed is state.json's error once the runner gave up
	// starting the tool (--max-restarts).
	CodeToolStartFailed = "tool_start_failed"
	// CodeSessionLost is state.json's error (and the runner_stop event's)
	// once the runner stopped because its session directory or its lock
	// was taken away (PROTOCOL.md section 12).
	CodeSessionLost = "session_lost"
)

// Stats summarises a command's output.
type Stats struct {
	Bytes      int64 `json:"bytes"`
	Lines      int64 `json:"lines"`
	DurationMS int64 `json:"duration_ms"`
}

// Error is a structured error on the wire.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Context holds the facts a program branches on, beside the code and
	// the message (PROTOCOL.md section 19, "Errors carry context"): the
	// file, the field, the limit. Keys are lower snake case, values JSON
	// scalars (strings, numbers, booleans), never payload bytes; nil when
	// there is nothing to say. Masters pass it on unchanged.
	Context map[string]any `json:"context,omitempty"`
	// ErrorInfo and ErrorCode are a Tcl tool's own account of an error a
	// payload raised (kind tcl, code tool_error): Tcl's -errorinfo (the
	// stack of commands it unwound, lines of the payload included) and
	// -errorcode, cut at 8 KiB and 1 KiB (PROTOCOL.md section 7).
	ErrorInfo string `json:"error_info,omitempty"`
	ErrorCode string `json:"error_code,omitempty"`
}

// MaxInlineOutput bounds the output a result carries a copy of
// (Result.OutputInline).
const MaxInlineOutput = 64 << 10

// Result is written to result/ once per command, atomically.
type Result struct {
	ProtocolVersion int        `json:"protocol_version"`
	CmdID           string     `json:"cmd_id"`
	Seq             int64      `json:"seq"`
	Status          Status     `json:"status"`
	StartTS         Time       `json:"start_ts"`
	EndTS           Time       `json:"end_ts"`
	ExitReason      ExitReason `json:"exit_reason"`
	ToolRC          *int       `json:"tool_rc"`
	Value           *string    `json:"value,omitempty"`
	ValueTruncated  bool       `json:"value_truncated,omitempty"`
	OutputPath      string     `json:"output_path,omitempty"`
	TailPath        string     `json:"tail_path,omitempty"`
	Stats           Stats      `json:"stats"`
	// SpoolStart and SpoolEnd are the byte range of log/session.out that
	// this command's run covers (prompt and markers included).
	SpoolStart   int64  `json:"spool_start"`
	SpoolEnd     int64  `json:"spool_end"`
	ExitCode     *int   `json:"exit_code,omitempty"`
	Signal       string `json:"signal,omitempty"`
	Error        *Error `json:"error,omitempty"`
	RunnerHost   string `json:"runner_host,omitempty"`
	OutputSHA256 string `json:"output_sha256,omitempty"`
	// OutputInline is a copy of the output file's bytes (base64 in JSON),
	// carried by the result of a command that printed at most
	// MaxInlineOutput bytes when the runner fsyncs: the result's one fsync
	// makes the output durable, and the output file is fsynced after the
	// result appears. A runner starting after a machine crash rebuilds an
	// output file that does not match output_sha256 from it (PROTOCOL.md
	// section 13).
	OutputInline []byte `json:"output_inline,omitempty"`
	// ToolStart is which start of the tool (state.json tool_starts) ran the
	// command; ToolRestarted says the tool ended during or because of it:
	// the Tcl state it ran in is gone.
	ToolStart     int64 `json:"tool_start,omitempty"`
	ToolRestarted bool  `json:"tool_restarted,omitempty"`
	// CommandPath is where the executed command file is kept (archive/, or
	// log/rejected/ for an invalid one); PayloadSHA256 is the sha256 of its
	// payload as run. Together they trace a result to its exact input.
	CommandPath   string `json:"command_path,omitempty"`
	PayloadSHA256 string `json:"payload_sha256,omitempty"`
	// TraceID and Labels are the command's, copied.
	TraceID string            `json:"trace_id,omitempty"`
	Labels  map[string]string `json:"labels,omitempty"`
}

// Phase is the runner's phase in state.json.
type Phase string

// Phases.
const (
	PhaseStarting Phase = "starting"
	PhaseIdle     Phase = "idle"
	PhaseBusy     Phase = "busy"
	PhaseError    Phase = "error"
	PhaseStopping Phase = "stopping"
	PhaseStopped  Phase = "stopped"
)

// State is state/state.json.
type State struct {
	ProtocolVersion int     `json:"protocol_version"`
	Phase           Phase   `json:"phase"`
	SessionID       string  `json:"session_id"`
	RunnerPID       int     `json:"runner_pid"`
	ToolPID         int     `json:"tool_pid,omitempty"`
	Hostname        string  `json:"hostname"`
	CurrentCmdID    *string `json:"current_cmd_id"`
	CurrentSeq      int64   `json:"current_seq,omitempty"`
	CurrentStart    Time    `json:"current_start_ts,omitzero"`
	QueueDepth      int     `json:"queue_depth"`
	Reason          string  `json:"reason,omitempty"`
	Filesystem      string  `json:"filesystem,omitempty"`
	Watch           string  `json:"watch,omitempty"`
	Kind            Kind    `json:"kind"`
	UpdatedAt       Time    `json:"updated_at"`
	CommandsDone    int64   `json:"commands_done"`
	ToolStarts      int64   `json:"tool_starts"`
	// ToolPGID and ToolStartTime identify the tool's process group safely
	// (pid plus start time in clock ticks since boot, /proc/PID/stat), so
	// that the next runner can kill what a dead runner left behind.
	ToolPGID      int    `json:"tool_pgid,omitempty"`
	ToolStartTime uint64 `json:"tool_start_time,omitempty"`
	// LeaseError says why state/lease.json could not be understood.
	LeaseError string `json:"lease_error,omitempty"`
	// DiskFull is set while the disk is full and the spool and output
	// files are not written (results, state and heartbeat still are).
	DiskFull      bool  `json:"disk_full,omitempty"`
	RejectedCount int64 `json:"rejected_count"`
	SkippedCount  int64 `json:"skipped_count"`
	// CurrentLastLine is the running command's last partial line of output
	// (at most 256 bytes, whole UTF-8 characters); CurrentQuietMS is how
	// long ago it last printed (runner clock).
	CurrentLastLine *string `json:"current_last_line,omitempty"`
	CurrentQuietMS  *int64  `json:"current_quiet_ms,omitempty"`
	// CurrentOutBytes is how many bytes the running command has printed,
	// as the heartbeat's figure but as of this write: with the last line,
	// one snapshot (a status shows them together).
	CurrentOutBytes *int64 `json:"current_output_bytes,omitempty"`
	// CurrentTraceID and CurrentLabels are the running command's.
	CurrentTraceID string            `json:"current_trace_id,omitempty"`
	CurrentLabels  map[string]string `json:"current_labels,omitempty"`
	// Error is set when the runner stopped because it cannot serve
	// (code tool_start_failed).
	Error *Error `json:"error,omitempty"`
	// Retention is the runner's retention policy and what it did
	// (PROTOCOL.md section 23); absent when retention is off.
	Retention *Retention `json:"retention,omitempty"`
}

// Retention is state.json's "retention": the policy the runner's flags
// set (0: no such limit) and its counts.
type Retention struct {
	KeepResultsS  float64 `json:"keep_results_s"`
	KeepLast      int     `json:"keep_last"`
	PruneGraceS   float64 `json:"prune_grace_s"`
	KeepIDs       int     `json:"keep_ids"`
	MaxSpoolBytes int64   `json:"max_spool_bytes"`
	MaxMetaBytes  int64   `json:"max_meta_bytes"`
	// Kept is how many results the session holds now; Pruned how many
	// commands this runner pruned; SpoolCut the offset below which
	// log/session.out was cut (its bytes read as zeros).
	Kept     int   `json:"kept"`
	Pruned   int64 `json:"pruned"`
	SpoolCut int64 `json:"spool_cut"`
}

// Heartbeat is state/heartbeat.json. Counter grows by one per beat; a
// master on another host judges liveness by seeing it move on its own
// clock, never by comparing Timestamp with its clock.
type Heartbeat struct {
	ProtocolVersion int    `json:"protocol_version"`
	Timestamp       Time   `json:"timestamp"`
	Counter         int64  `json:"counter"`
	Hostname        string `json:"hostname"`
	RunnerPID       int    `json:"runner_pid"`
	SessionID       string `json:"session_id"`
	Phase           Phase  `json:"phase"`
	IntervalMS      int64  `json:"interval_ms"`
	CurrentCmdID    string `json:"current_cmd_id,omitempty"`
	CurrentOutBytes int64  `json:"current_output_bytes,omitempty"`
	SpoolSize       int64  `json:"spool_size"`
}

// Lease is state/lease.json, written by a master. With TTLMS > 0 the runner
// judges expiry on its own clock: the lease expires when no renewal (a change
// of the file's content) has been observed for TTLMS. With only ExpiresAt it
// compares ExpiresAt with its own clock.
type Lease struct {
	ProtocolVersion int    `json:"protocol_version,omitempty"`
	LeaseID         string `json:"lease_id"`
	ExpiresAt       Time   `json:"expires_at,omitzero"`
	TTLMS           int64  `json:"ttl_ms,omitempty"`
	Counter         int64  `json:"counter,omitempty"`
	Owner           string `json:"owner,omitempty"`
}

// CancelScope selects what ctl/cancel.json cancels.
type CancelScope string

// Cancel scopes.
const (
	ScopeCurrent CancelScope = "current"
	ScopeCmdID   CancelScope = "cmd_id"
)

// CancelRequest is ctl/cancel.json. An empty file means scope current.
type CancelRequest struct {
	Scope CancelScope `json:"scope"`
	CmdID string      `json:"cmd_id,omitempty"`
	TS    Time        `json:"ts,omitzero"`
}

// StopMode selects how the runner stops.
type StopMode string

// Stop modes.
const (
	StopGraceful StopMode = "graceful"
	StopForce    StopMode = "force"
)

// StopRequest is ctl/stop.json. An empty file means graceful.
type StopRequest struct {
	Mode StopMode `json:"mode"`
	TS   Time     `json:"ts,omitzero"`
}

// Event is one line of log/meta.log.
type Event struct {
	TS         Time       `json:"ts"`
	Event      string     `json:"event"`
	CmdID      string     `json:"cmd_id,omitempty"`
	Seq        int64      `json:"seq,omitempty"`
	Status     Status     `json:"status,omitempty"`
	ExitReason ExitReason `json:"exit_reason,omitempty"`
	SpoolStart *int64     `json:"spool_start,omitempty"`
	SpoolEnd   *int64     `json:"spool_end,omitempty"`
	// SpoolOffset is the size of log/session.out when a control event
	// (a request, an interrupt, a stop, a lease expiry) took effect.
	SpoolOffset *int64 `json:"spool_offset,omitempty"`
	// TraceID and Labels are the command's, on cmd_begin, cmd_end and
	// interrupt.
	TraceID string            `json:"trace_id,omitempty"`
	Labels  map[string]string `json:"labels,omitempty"`
	Detail  map[string]any    `json:"detail,omitempty"`
}

// Event names.
const (
	EvRunnerStart  = "runner_start"
	EvRunnerStop   = "runner_stop"
	EvToolStart    = "tool_start"
	EvToolExit     = "tool_exit"
	EvSessionReset = "session_reset"
	EvInitBegin    = "init_begin"
	EvInitEnd      = "init_end"
	EvCmdBegin     = "cmd_begin"
	EvCmdEnd       = "cmd_end"
	EvRejected     = "cmd_rejected"
	EvSkipped      = "cmd_skipped"
	EvCancel       = "cancel_request"
	EvStop         = "stop_request"
	EvInterrupt    = "interrupt" // the runner ends the running command (timeout, cancel, lease, force stop)
	EvInput        = "input"     // a send request
	EvSignal       = "signal"    // a signal request
	EvResize       = "resize"    // a resize request
	// EvRequestRejected answers a file in ctl/ that is meant as a request
	// but whose op cannot be known (a bad name, an unknown op).
	EvRequestRejected = "request_rejected"
	EvLease           = "lease"
	EvRecovered       = "recovered"
	// EvRecoverySummary is the one event a runner's recovery at start
	// writes when it settled or removed anything: its counts.
	EvRecoverySummary = "recovery_summary"
	EvLockTakeover    = "lock_takeover"
	EvWarning         = "warning"
	// EvStaleToolKilled: at start, the runner killed what was left of the
	// previous runner's tool process group.
	EvStaleToolKilled = "stale_tool_killed"
	// EvCmdOutput is a running command's output progress: the spool
	// range it printed since its last cmd_output (or its cmd_begin).
	EvCmdOutput = "cmd_output"
	// EvCmdQueued: the runner saw a command file in queue/ for the first
	// time (it learns of a command when it lists queue/, not when a master
	// wrote it).
	EvCmdQueued = "cmd_queued"
	// EvPruned: retention removed old commands' files (PROTOCOL.md
	// section 23): how many, the first and last, and why.
	EvPruned = "pruned"
	// EvLogRotated is the first event of a log/meta.log that continues
	// log/meta.log.1 (PROTOCOL.md section 23).
	EvLogRotated = "log_rotated"
)

// MaxKindLen bounds a kind's name.
const MaxKindLen = 32

// ValidKind reports whether k is a well-formed kind: tcl, sh, or a
// driver's name of 1 to 32 characters from [a-z0-9_-] starting with a
// letter. Whether a runner runs it is the runner's to say (its kind is in
// state.json).
func ValidKind(k Kind) bool {
	if len(k) == 0 || len(k) > MaxKindLen || k[0] < 'a' || k[0] > 'z' {
		return false
	}
	for i := 0; i < len(k); i++ {
		switch c := k[i]; {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

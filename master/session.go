package master

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/internal/sessionio"
	"github.com/skillpilot/skillpilot/protocol"
	"golang.org/x/sys/unix"
)

// Session is a handle on a session directory.
type Session struct {
	io *sessionio.Session // the directory and its files
	// PollInterval is how often waits (and Tail with follow) re-check
	// files when no inotify event arrives (the only mechanism on network
	// filesystems). 0 means DefaultPollInterval, which Open sets.
	PollInterval time.Duration

	// QuickPoll is how long a wait polls its file on a timer (from 250 µs,
	// growing; on a network filesystem from 2 ms, and at least until the
	// gaps reach PollInterval) before it joins the Session's shared
	// watcher. 0, the
	// default, joins at once: right for a long-lived process. A process
	// that waits once and exits, like the master CLI, sets it (the CLI
	// uses 50 ms), because an inotify instance costs milliseconds to set up
	// and to tear down at exit.
	QuickPoll time.Duration

	// WaitForRunner is how long a wait (Wait, Run, Follow, WaitFor, a
	// control request's reply, PendingStop's waits) goes on without seeing a live
	// runner before it fails with ErrRunnerNotAlive; 0 means
	// DefaultWaitForRunner (10 s). Raise it to wait for a runner that has
	// not started yet. A runner that stopped on purpose (phase stopped,
	// its lock free) ends the wait after at most a second whatever this
	// says: it does not come back by itself.
	WaitForRunner time.Duration

	mu      sync.Mutex // guards lastHB and kind
	lastHB  hbSeen
	kind    protocol.Kind // the runner's kind, once read (defaultKind)
	watchMu sync.Mutex    // guards wh
	wh      *watchHub     // the watcher every wait shares (watch.go), started on first use
}

// Core is the session directory s wraps, as the Go master's own packages
// (launch, pool, the master CLI) reach it beyond this package's API: its
// fsq.Root, owner, lock and heartbeat, seq allocation and forward records.
// Its type is internal: a flow outside this module has no use for it.
func (s *Session) Core() *sessionio.Session { return s.io }

// DefaultPollInterval is how often a wait re-checks its files when no
// inotify event arrives, unless Session.PollInterval says otherwise.
const DefaultPollInterval = 100 * time.Millisecond

// pollInterval is PollInterval, or its default when not positive.
func (s *Session) pollInterval() time.Duration {
	if s.PollInterval <= 0 {
		return DefaultPollInterval
	}
	return s.PollInterval
}

type hbSeen struct {
	session string // the heartbeat's session_id: a new runner counts from 1 again
	counter int64
	at      time.Time // our clock, when counter was first seen
	moved   bool      // at is when the counter was seen changing (not just first seen)
}

// Open returns a handle on the session in dir. It fails with
// ErrSessionMissing if dir has no queue/ directory.
func Open(dir string) (*Session, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	io, err := sessionio.Open(abs)
	if err != nil {
		return nil, withContext(fmt.Errorf("%w: %s", ErrSessionMissing, dir), map[string]any{"dir": dir})
	}
	return &Session{io: io, PollInterval: DefaultPollInterval}, nil
}

// OpenIn returns a handle on the session name inside the directory parent
// holds (a pool's member), opened relative to parent's handle: a name
// that is a symlink is refused (fsq.ErrLayout), never followed. Unlike
// Open's, the handle never opens its path again: once the path names
// another directory (the member was swapped for a symlink, renamed or
// removed) every operation fails with ErrSessionMissing.
func OpenIn(parent *fsq.Root, name string) (*Session, error) {
	io, err := sessionio.OpenIn(parent, name)
	if err != nil {
		return nil, err
	}
	return &Session{io: io, PollInterval: DefaultPollInterval}, nil
}

// Dir returns the session directory.
func (s *Session) Dir() string { return s.io.Dir() }

// SubmitOptions are the optional fields of a command.
type SubmitOptions struct {
	Kind         protocol.Kind         // default: the session runner's kind (state.json), else tcl
	Timeout      time.Duration         // 0: the runner's default
	CancelPolicy protocol.CancelPolicy // default ctrl_c
	CmdID        string                // default: a new time-ordered id
	Marker       *protocol.Marker      // default: runner_inject with the cmd_id as token
	Submitter    string                // default: master@<host>:<pid> (informational, kept in archive/)
	// TraceID and Labels are carried into the result, the events, status
	// and the report so a flow can find its steps (PROTOCOL.md section 4;
	// protocol.ValidateCorrelation gives the bounds).
	TraceID string
	Labels  map[string]string
	// MaxOutputBytes is the command's output budget (PROTOCOL.md 6.3): past
	// it the runner stops the command by its cancel policy and its result
	// says output_limit. 0: the runner's --max-output-bytes.
	MaxOutputBytes int64
	// Extra holds top-level fields added to the command file (the runner
	// ignores fields it does not know; a pool records its affinity key
	// so). Each value is marshalled to JSON; a key the command file has
	// anyway (cmd_id, payload, ...) is a usage error. nil: none.
	Extra map[string]any
}

// Command is a submitted command.
type Command struct {
	s    *Session
	ID   string
	Seq  int64
	Name string // cmd_<seq>_<cmd_id>.json
	// ResumeCursor is set by Submit: the spool size just before the
	// command was queued, so its output comes after it (a WaitFor from
	// here cannot match output printed before). 0 for a handle found by
	// Command or Resolve (PROTOCOL.md section 19, "Cursors").
	ResumeCursor int64
	hops         int // forwards followed to reach this handle (forward.go)
}

// buildCommand makes a command file's content from opts (all but its
// seq), with a new cmd_id and the session's kind by default.
func (s *Session) buildCommand(payload string, opts SubmitOptions) (protocol.Command, error) {
	kind := opts.Kind
	if kind == "" {
		kind = s.defaultKind()
	}
	return commandOf(payload, opts, kind, s.io.Owner())
}

// commandOf is the command file's content from opts with the given kind
// (all but its seq), checked as the runner checks it.
func commandOf(payload string, opts SubmitOptions, kind protocol.Kind, owner string) (protocol.Command, error) {
	c := protocol.Command{
		ProtocolVersion: protocol.Version, CmdID: opts.CmdID, Kind: kind, Payload: payload,
		TimeoutS: opts.Timeout.Seconds(), CancelPolicy: opts.CancelPolicy, Marker: opts.Marker,
		SubmittedAt: protocol.Now(), Submitter: owner, TraceID: opts.TraceID, Labels: opts.Labels,
		MaxOutputBytes: opts.MaxOutputBytes,
	}
	if c.CmdID == "" {
		c.CmdID = NewCmdID()
	}
	if opts.Submitter != "" {
		c.Submitter = opts.Submitter
	}
	if err := c.Validate(); err != nil {
		return c, usageFrom(err)
	}
	return c, nil
}

// Check reports the usage error Submit would give for these options
// (ErrUsage), with nothing written; an empty Kind stands for the
// session's. A pool door checks its options so before it chooses a
// session or writes an affinity pin.
func (o SubmitOptions) Check() error {
	kind := o.Kind
	if kind == "" {
		kind = protocol.KindTcl
	}
	c, err := commandOf("", o, kind, "")
	if err == nil {
		_, err = commandFile(c, o.Extra)
	}
	return err
}

// Submit allocates a seq (PROTOCOL.md, "Allocating seq"), writes the
// command atomically into queue/ and returns its handle. It returns with
// its work done: seq/hint is rewritten too.
func (s *Session) Submit(ctx context.Context, payload string, opts SubmitOptions) (*Command, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c, err := s.buildCommand(payload, opts)
	if err != nil {
		return nil, err
	}
	r, err := s.io.Root()
	if err != nil {
		return nil, err
	}
	var seq, hint int64
	if len(opts.Extra) == 0 {
		seq, hint, err = sessionio.ReserveSeq(r) // The hint is rewritten below, once the command is queued.
	} else {
		seq, err = sessionio.AllocSeq(r) // A pool's submit, as it always was: the hint at once.
		hint = seq
	}
	if err != nil {
		return nil, err
	}
	c.Seq = seq
	b, err := commandFile(c, opts.Extra)
	if err != nil {
		return nil, err
	}
	// Before the command is queued: the runner cannot have printed any of
	// its output yet. A spool that is not a regular file gives 0.
	cursor, _ := s.SpoolSize()
	name := protocol.CommandName(seq, c.CmdID)
	// Not fsynced: a command lost to a machine crash before the runner saw
	// it was never acknowledged by a result.
	if err := s.io.WriteNew(protocol.DirQueue+"/"+name, b); err != nil {
		return nil, wrapf(err, "write command")
	}
	if hint < seq {
		// After the command file, so that the runner starts on it
		// meanwhile; before Submit returns, so that nothing is left
		// running (best effort: PROTOCOL.md section 5).
		sessionio.WriteHint(r, seq)
	}
	return &Command{s: s, ID: c.CmdID, Seq: seq, Name: name, ResumeCursor: cursor}, nil
}

// commandFile is the command file's content: c, with the extra top-level
// fields (SubmitOptions.Extra) when there are any.
func commandFile(c protocol.Command, extra map[string]any) ([]byte, error) {
	if len(extra) == 0 {
		return c.AppendJSON(make([]byte, 0, 256+len(c.Payload))) // json.Marshal's bytes, without its reflection (issue 44).
	}
	m, err := toMap(c)
	if err != nil {
		return nil, err
	}
	for k, v := range extra {
		if _, ok := m[k]; ok || isCommandField(k) {
			return nil, usageErr("extra field %q is a field of the command file", k)
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, usageErr("extra field %q: %v", k, err)
		}
		m[k] = b
	}
	return json.Marshal(m)
}

// defaultKind is the kind of the session's runner (state.json), else tcl.
// It is read once per Session: on NFS every read is a round trip.
func (s *Session) defaultKind() protocol.Kind {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.kind != "" {
		return s.kind
	}
	if k, err := s.io.ReadKind(); err == nil && protocol.ValidKind(k) {
		s.kind = k
		return k
	}
	return protocol.KindTcl
}

// NewCmdID returns a new cmd_id: a UUID version 7 (time-ordered, random).
func NewCmdID() string {
	var b [16]byte
	randomBytes(b[:])
	ms := uint64(time.Now().UnixMilli())
	for i := 0; i < 6; i++ {
		b[i] = byte(ms >> (40 - 8*i))
	}
	b[6] = b[6]&0x0f | 0x70
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// randomBytes fills b from the kernel's random source (getrandom(2), as
// crypto/rand does on Linux), read directly so that the master does not
// link crypto/rand, whose DRBG, AES and SHA-512 code every start of the
// CLI would load (issue 44). /dev/urandom if getrandom is refused.
func randomBytes(b []byte) {
	for len(b) > 0 {
		n, err := unix.Getrandom(b, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n <= 0 {
			f, ferr := os.Open("/dev/urandom")
			if ferr == nil {
				_, _ = io.ReadFull(f, b)
				f.Close()
			}
			return
		}
		b = b[n:]
	}
}

// Command returns a handle on an existing command. ref names it by one
// rule in every master (PROTOCOL.md section 19, "Naming a command"): a
// cmd_id is the command with that cmd_id and the lowest seq in queue/,
// moved/, forward/, inflight/ and result/ (listed in the order a command
// moves in, so one that moves meanwhile is found in a later listing); a command file's name,
// cmd_<seq>_<id>.json, is exactly that file, and so is a path ending in one
// (queue/cmd_<seq>_<id>.json, as ls shows it). Anything else is a usage
// error; a command that is in none of those directories ErrUnknownCmdID.
func (s *Session) Command(ref string) (*Command, error) {
	name, cmdID, err := parseCommandRef(ref)
	if err != nil {
		return nil, err
	}
	if name != "" {
		seq, id, _ := protocol.ParseCommandName(name)
		for _, d := range lookupDirs {
			s.io.Revalidate(d)
			if s.io.Exists(d + "/" + name) {
				return &Command{s: s, ID: id, Seq: seq, Name: name}, nil
			}
		}
		if e, ok := s.findPruned(name, ""); ok {
			return nil, prunedError(e)
		}
		if s.io.Revalidate(dirWithdrawn); s.io.Exists(dirWithdrawn + "/" + name) {
			return nil, withdrawnLookupErr(id, name)
		}
		return nil, withContext(fmt.Errorf("%w: no command file %s is queued, running or finished in this session", ErrUnknownCmdID, name),
			map[string]any{"cmd_id": id})
	}
	if c := s.findByID(cmdID, lookupDirs); c != nil {
		if err := c.prunedBelow(); err != nil {
			return nil, err
		}
		return c, nil
	}
	if e, ok := s.findPruned("", cmdID); ok {
		return nil, prunedError(e)
	}
	if c := s.findByID(cmdID, []string{dirWithdrawn}); c != nil {
		return nil, withdrawnLookupErr(cmdID, c.Name)
	}
	return nil, withContext(fmt.Errorf("%w: no command %q is queued, running or finished in this session", ErrUnknownCmdID, cmdID),
		map[string]any{"cmd_id": cmdID})
}

// lookupDirs are where a lookup looks for a command, in the order a
// command moves: queue/ → inflight/ → result/, or queue/ → moved/ →
// forward/ when a pool moves it.
var lookupDirs = []string{protocol.DirQueue, sessionio.DirMoved, sessionio.DirForward, protocol.DirInflight, protocol.DirResult}

// findByID returns the command file of cmdID with the lowest seq in dirs
// (each listed once, in that order, each file name parsed and the whole
// cmd_id compared), or nil. Every directory is listed, not only up to the
// first that has one: a retry under an answered cmd_id, queued behind a
// backlog, must not hide the command that ran (PROTOCOL.md section 19,
// "Naming a command").
func (s *Session) findByID(cmdID string, dirs []string) *Command {
	var found *Command
	suffix := "_" + cmdID + ".json" // Most names of a big result/ are not parsed.
	for _, d := range dirs {
		names, err := s.io.ReadNames(d)
		if err != nil {
			continue
		}
		for _, n := range names {
			if !strings.HasSuffix(n, suffix) {
				continue
			}
			if seq, id, err := protocol.ParseCommandName(n); err == nil && id == cmdID && (found == nil || seq < found.Seq) {
				found = &Command{s: s, ID: id, Seq: seq, Name: n}
			}
		}
	}
	return found
}

// parseCommandRef parses a reference to a command (Session.Command): a
// command file's name, or a path ending in one (name set, cmdID its
// cmd_id), or a cmd_id (name ""). Anything else is a usage error.
func parseCommandRef(ref string) (name, cmdID string, err error) {
	base := ref
	if i := strings.LastIndexByte(ref, '/'); i >= 0 {
		base = ref[i+1:]
	}
	if _, id, err := protocol.ParseCommandName(base); err == nil {
		return base, id, nil
	}
	if base != ref {
		return "", "", usageErr("%q is not a command file's name (cmd_<seq>_<cmd_id>.json)", ref)
	}
	if !protocol.ValidCmdID(ref) {
		return "", "", usageErr("invalid cmd_id %q", ref)
	}
	return "", ref, nil
}

// Session returns the session the command was queued in.
func (c *Command) Session() *Session { return c.s }

// Result returns the command's result, or nil, nil while there is none.
// A command a pool moved to another session (forward/) is followed there.
// Fields a seed runner did not write stay zero. A result whose status is
// not ok is returned as it is, with a nil error (Wait adds a *ResultError).
func (c *Command) Result() (*protocol.Result, error) {
	r, _, err := c.RawResult()
	return r, err
}

// RawResult is Result with the result's bytes as the runner wrote them
// (the truth where the struct lacks a field, nil while there is none):
// master result prints them.
func (c *Command) RawResult() (*protocol.Result, []byte, error) {
	b, _, err := c.s.io.ReadFile(protocol.DirResult+"/"+c.Name, protocol.MaxCommandSize, true) // The runner may be on another NFS client.
	if errors.Is(err, os.ErrNotExist) {
		if fc := c.forwarded(); fc != nil { // forward.go
			return fc.RawResult()
		}
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var r protocol.Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, nil, wrapf(err, "result %s", c.Name)
	}
	return &r, b, nil
}

// outcome is what a wait returns once the command has a result (done):
// the result, with a *ResultError when its status is not ok. A result
// that cannot be read ends the wait too, with the error.
func (c *Command) outcome() (*protocol.Result, bool, error) {
	r, err := c.Result()
	switch {
	case err != nil:
		return nil, true, err
	case r == nil:
		return nil, false, nil
	case r.Status != protocol.StatusOK:
		return r, true, &ResultError{Result: r}
	}
	return r, true, nil
}

// WaitOptions say how a wait (Command.Wait, WaitReady) goes on. The zero
// value is the default of every field.
type WaitOptions struct {
	// WaitForRunner is how long the wait goes on without seeing a live
	// runner before it fails with ErrRunnerNotAlive. 0: the Session's
	// WaitForRunner (for WaitReady, DefaultWaitForRunner).
	WaitForRunner time.Duration
	// Progress, when not nil, is called on every look while what the
	// wait waits for is not there yet.
	Progress func()
}

// waitForRunner is the base of a wait's grace: WaitForRunner, else def
// (0 in turn: DefaultWaitForRunner, see graceFor).
func (opts WaitOptions) waitForRunner(def time.Duration) time.Duration {
	if opts.WaitForRunner > 0 {
		return opts.WaitForRunner
	}
	return def
}

// Wait returns the command's result as soon as it appears. A result whose
// status is not ok comes with a *ResultError; ctx's end gives
// ErrWaitTimeout (deadline) or its cause (cancelled); a wait that sees no
// live runner for its grace (WaitOptions.WaitForRunner, else
// Session.WaitForRunner; about a second when the runner stopped on
// purpose) fails with ErrRunnerNotAlive; the command stays queued for a
// later runner, and the error says so (Withdraw takes it back).
func (c *Command) Wait(ctx context.Context, opts WaitOptions) (*protocol.Result, error) {
	var wake <-chan struct{}
	w := c.newRunnerWatch()
	w.base = opts.waitForRunner(c.s.WaitForRunner)
	var goneAt time.Time // when to look whether it was pruned or withdrawn (after a second, then every second)
	for {
		if r, done, err := c.outcome(); done {
			return r, err
		}
		if now := time.Now(); goneAt.IsZero() {
			goneAt = now.Add(time.Second)
		} else if now.After(goneAt) {
			goneAt = now.Add(time.Second)
			if err := c.gone(); err != nil {
				return nil, err
			}
		}
		if err := w.check(); errors.Is(err, ErrSessionMissing) {
			return nil, withContext(err, map[string]any{"cmd_id": c.ID})
		} else if err != nil {
			return nil, withContext(c.noRunnerErr(err), map[string]any{"cmd_id": c.ID})
		}
		if opts.Progress != nil {
			opts.Progress()
		}
		if wake == nil {
			// Set up watching only when the result is not there yet;
			// check again after, or an event could be missed.
			var stop func()
			wake, stop = c.s.watch(ctx, protocol.DirResult)
			defer stop()
			continue
		}
		select {
		case <-ctx.Done():
			return nil, c.waitEnded(ctx)
		case <-wake:
		}
	}
}

// waitEnded is the error of a wait on c that ctx ended: a deadline says
// which command, and that it goes on (a wait does not stop it).
func (c *Command) waitEnded(ctx context.Context) error {
	err := ctxErr(ctx)
	if errors.Is(err, ErrWaitTimeout) {
		err = fmt.Errorf("%w for %s (it goes on)", err, c.ID)
	}
	return withContext(err, map[string]any{"cmd_id": c.ID})
}

// ctxErr maps ctx's end: a deadline is ErrWaitTimeout; a cancellation
// gives its cause (a *sessionio.InterruptedError when the CLI got a signal).
func ctxErr(ctx context.Context) error { return sessionio.ContextEnd(ctx) }

// Run is Submit followed by Wait with the zero WaitOptions.
func (s *Session) Run(ctx context.Context, payload string, opts SubmitOptions) (*protocol.Result, error) {
	c, err := s.Submit(ctx, payload, opts)
	if err != nil {
		return nil, err
	}
	return c.Wait(ctx, WaitOptions{})
}

// ReadState reads state/state.json as bounded input (never followed,
// never blocked on).
func (s *Session) ReadState() (protocol.State, error) { return s.io.ReadState() }

// isCommand reports names that are command files.
func isCommand(name string) bool {
	_, _, err := protocol.ParseCommandName(name)
	return err == nil && !strings.HasPrefix(name, ".")
}

// isCommandField reports whether name is the JSON name of a command
// file's field, also of one a command leaves out when empty. Looked up
// when asked (only with Extra fields), not built at every start (issue 44).
func isCommandField(name string) bool {
	t := reflect.TypeFor[protocol.Command]()
	for i := range t.NumField() {
		if n, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); n != "" && n != "-" && n == name {
			return true
		}
	}
	return false
}

func toMap(v any) (map[string]json.RawMessage, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	return m, json.Unmarshal(b, &m)
}

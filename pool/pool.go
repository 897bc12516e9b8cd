package pool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/internal/sessionio"
	"github.com/skillpilot/skillpilot/launch"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
	"github.com/skillpilot/skillpilot/sched"
)

// Files of a pool directory (PROTOCOL.md, "Pools").
const (
	FilePool           = "pool.json"      // how the pool's sessions are launched (written by pool start)
	DirAffinity        = "affinity"       // affinity/<key>.json: the session a key is pinned to
	FilePoolEvents     = "events.jsonl"   // what pool operations did: moves, respawns (append-only)
	filePoolClock      = ".clock"         // touched to read the filesystem's clock
	filePoolResizeLock = ".resize.lock"   // flock held by a grow or shrink (lockResize)
	DirMoved           = "moved"          // in a session: commands claimed by a mover, move in progress
	maxPoolCommand     = 16 << 20         // the runner's own limit on command files
	poolNamePrefix     = "s"              // sessions are s00, s01, ...
	poolDeadAfter      = 10 * time.Second // heartbeat age after which a session counts as dead (SPEC D's grace)
)

// Config is pool.json.
type Config struct {
	ProtocolVersion int           `json:"protocol_version"`
	Size            int           `json:"size"`
	Via             string        `json:"via"`
	SubmitArgs      []string      `json:"submit_args,omitempty"`
	RunnerArgs      []string      `json:"runner_args,omitempty"`
	Tool            []string      `json:"tool,omitempty"`
	Runner          string        `json:"runner,omitempty"`
	Respawn         bool          `json:"respawn"`      // heal relaunches dead sessions
	MaxRespawns     int           `json:"max_respawns"` // per session, counted by launch.json's launches
	CreatedAt       protocol.Time `json:"created_at"`
}

// Options say how Start launches the pool's sessions.
type Options struct {
	Size         int
	Via          string
	SubmitArgs   []string
	Init         []string // runner --init scripts (made absolute)
	RunnerArgs   []string
	Tool         []string
	Runner       string
	Respawn      bool
	MaxRespawns  int // 0: 3
	ReadyTimeout time.Duration
	Progress     func(string)
	Exec         sched.Exec
}

// Pool is a directory of sessions (s00, s01, ...) launched alike, and the
// rules that spread commands over them and move commands out of sessions
// that died. Its methods are safe for concurrent use.
type Pool struct {
	dir  string
	root *fsq.Root // the pool directory (sessionfs.go)
	cfg  Config
	// Progress, if set, receives a line for each thing heal does.
	Progress func(string)
	// Exec runs scheduler commands (nil: sched.RunCommand).
	Exec sched.Exec

	mu       sync.Mutex
	sessions map[string]*master.Session
}

// Open opens the pool in dir (it must have pool.json).
func Open(dir string) (*Pool, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	r, err := openPoolRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("%w: %s is not a pool (%v)", master.ErrSessionMissing, dir, err)
	}
	p := &Pool{dir: abs, root: r, sessions: map[string]*master.Session{}}
	b, err := p.readPoolFile(FilePool, 1<<20)
	if err != nil {
		return nil, fmt.Errorf("%w: %s is not a pool (%v)", master.ErrSessionMissing, dir, err)
	}
	if err := json.Unmarshal(b, &p.cfg); err != nil {
		return nil, fmt.Errorf("master: %s: %w", FilePool, err)
	}
	return p, nil
}

// Dir returns the pool directory.
func (p *Pool) Dir() string { return p.dir }

// Config returns pool.json as read by Open.
func (p *Pool) Config() Config { return p.cfg }

func (p *Pool) exec() sched.Exec {
	if p.Exec != nil {
		return p.Exec
	}
	return sched.RunCommand
}

// SessionName is the name of the i-th session of a pool of size n.
func SessionName(i, n int) string {
	w := max(2, len(strconv.Itoa(n-1)))
	return fmt.Sprintf("%s%0*d", poolNamePrefix, w, i)
}

// isPoolSessionName: "s" followed by digits.
func isPoolSessionName(n string) bool {
	rest, ok := strings.CutPrefix(n, poolNamePrefix)
	if !ok || rest == "" {
		return false
	}
	for _, r := range rest {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// SessionNames lists the pool's sessions in name order.
func (p *Pool) SessionNames() []string {
	var out []string
	for _, n := range p.sessionDirs() {
		if isPoolSessionName(n) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// session returns the (cached) handle on session name.
func (p *Pool) session(name string) (*master.Session, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := p.sessions[name]; s != nil {
		if _, err := s.Core().Root(); err == nil {
			return s, nil
		}
		// Its directory moved: a handle given out before keeps failing;
		// the name is opened anew below, relative to the pool's root.
		delete(p.sessions, name)
	}
	if !p.isSessionDir(name) {
		return nil, fmt.Errorf("%w: %s is not a directory of the pool", master.ErrSessionMissing, name)
	}
	// Opened relative to the pool's own root, never by path: a member
	// swapped for a symlink is refused, then and later.
	s, err := openIn(p.root, name)
	if err != nil {
		return nil, fmt.Errorf("%w (%s is not a directory of the pool)", err, name)
	}
	p.sessions[name] = s
	return s, nil
}

func (p *Pool) launchOptions(name string) launch.Options {
	return launch.Options{Via: p.cfg.Via, SubmitArgs: p.cfg.SubmitArgs, RunnerArgs: p.cfg.RunnerArgs, Tool: p.cfg.Tool,
		Runner: p.cfg.Runner, JobName: "sp-" + filepath.Base(p.dir) + "-" + name, Exec: p.Exec}
}

// Start creates (or extends) the pool in dir, writes pool.json and
// launches every session that is not already served or queued, waiting
// until all serve. Via slurm, sge or lsf the sessions are launched as one
// job array (one submission; see [launch.LaunchArray]); via local each is
// a process of its own. Sessions already served are left alone (reported with
// ErrAlreadyLaunched in their result). It returns one result per session.
func Start(ctx context.Context, dir string, opts Options) (*Pool, []SessionLaunch, error) {
	if opts.Size < 1 {
		return nil, nil, sessionio.UsageError("--size must be at least 1")
	}
	if _, err := sched.For(opts.Via); err != nil {
		return nil, nil, sessionio.UsageError("%v", err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, nil, err
	}
	runner, err := launch.FindRunner(opts.Runner)
	if err != nil {
		return nil, nil, err
	}
	cfg := Config{ProtocolVersion: protocol.Version, Size: opts.Size, Via: opts.Via, SubmitArgs: opts.SubmitArgs,
		Tool: opts.Tool, Runner: runner, Respawn: opts.Respawn, MaxRespawns: opts.MaxRespawns, CreatedAt: protocol.Now()}
	if cfg.MaxRespawns <= 0 {
		cfg.MaxRespawns = 3
	}
	for _, f := range opts.Init {
		a, err := filepath.Abs(f)
		if err != nil {
			return nil, nil, err
		}
		cfg.RunnerArgs = append(cfg.RunnerArgs, "--init", a)
	}
	cfg.RunnerArgs = append(cfg.RunnerArgs, opts.RunnerArgs...)
	if err := os.MkdirAll(abs, 0o700); err != nil { // The pool directory itself, named by path as Open names it.
		return nil, nil, err
	}
	r, err := openPoolRoot(abs)
	if err != nil {
		return nil, nil, err
	}
	if err := sessionio.MkdirMaster(r, DirAffinity); err != nil {
		return nil, nil, err
	}
	b, _ := json.MarshalIndent(cfg, "", "  ")
	err = r.WriteAtomic(FilePool, append(b, '\n'), 0o660, fsq.Durable)
	r.Close()
	if err != nil {
		return nil, nil, err
	}
	p, err := Open(abs)
	if err != nil {
		return nil, nil, err
	}
	p.Exec, p.Progress = opts.Exec, opts.Progress
	names := make([]string, opts.Size)
	for i := range names {
		names[i] = SessionName(i, opts.Size)
	}
	out := p.launch(ctx, names, opts.ReadyTimeout, opts.Progress)
	var errs []error
	for _, l := range out {
		if l.Err != nil && !errors.Is(l.Err, launch.ErrAlreadyLaunched) {
			errs = append(errs, fmt.Errorf("%s: %w", l.Session, l.Err))
		}
	}
	return p, out, errors.Join(errs...)
}

// SessionLaunch is the outcome of launching one session of a pool.
type SessionLaunch struct {
	Session string
	Result  *launch.Result
	Err     error
}

// SessionStop is the outcome of stopping one session of a pool.
type SessionStop struct {
	Session string            `json:"session"`
	Report  launch.StopReport `json:"report"`
	Error   string            `json:"error,omitempty"`
}

// Stop stops every session of the pool (StopLaunched, in parallel): a
// stop request first, then the scheduler's cancel, which for sessions that
// are elements of one job array is one cancel of the array (scancel JOB,
// qdel JOB, bkill JOB). Sessions with no live runner and no active job
// are reported, not errors. Commands still queued stay where they are.
// With opts.NoJobWait (master pool stop without --wait-jobs) it returns
// once every runner has stopped and each array's one cancel was sent,
// without waiting for the scheduler to list the jobs as ended.
func (p *Pool) Stop(ctx context.Context, opts launch.StopOptions) ([]SessionStop, error) {
	opts.WholeArrays = true
	return p.stopSessions(ctx, p.SessionNames(), opts)
}

// stopSessions stops the named sessions (launch.StopMany).
func (p *Pool) stopSessions(ctx context.Context, names []string, opts launch.StopOptions) ([]SessionStop, error) {
	out := make([]SessionStop, len(names))
	dirs := make([]string, len(names))
	for i, name := range names {
		dirs[i] = p.dirOf(name)
	}
	if opts.Exec == nil {
		opts.Exec = p.exec()
	}
	// The elements of an array share their squeue/qstat answers.
	opts.Exec = sched.SharedExec(opts.Exec, 200*time.Millisecond)
	reps, stopErrs := launch.StopMany(ctx, dirs, opts)
	for i, name := range names {
		out[i] = SessionStop{Session: name, Report: reps[i]}
		if err := stopErrs[i]; err != nil {
			out[i].Error = err.Error()
			if errors.Is(err, master.ErrRunnerNotAlive) {
				out[i].Report.Step = "already_stopped"
				out[i].Error = ""
				out[i].Report.Message = strings.TrimPrefix(err.Error(), master.ErrRunnerNotAlive.Error()+": ")
			}
		}
	}
	var errs []error
	for _, s := range out {
		if s.Error != "" {
			errs = append(errs, fmt.Errorf("%s: %s", s.Session, s.Error))
		}
	}
	return out, errors.Join(errs...)
}

// event appends one line to the pool's event log. Best effort: the log is
// for people; on NFS concurrent appends from several hosts may interleave.
func (p *Pool) event(kind string, fields map[string]any) {
	fields["ts"] = protocol.Now()
	fields["event"] = kind
	b, err := json.Marshal(fields)
	if err != nil {
		return
	}
	_ = p.appendEvent(append(b, '\n')) // Best effort, see above.
	if p.Progress != nil {
		p.Progress(eventLine(kind, fields))
	}
}

// eventLine is an event as a line for people: "moved from=s00
// name=cmd_... to=s02", keys in order, without ts and event.
func eventLine(kind string, fields map[string]any) string {
	keys := make([]string, 0, len(fields))
	for k := range fields {
		if k != "ts" && k != "event" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(kind)
	for _, k := range keys {
		v := fmt.Sprint(fields[k])
		if v == "" || strings.ContainsAny(v, " \t\"") {
			v = strconv.Quote(v)
		}
		fmt.Fprintf(&b, " %s=%s", k, v)
	}
	return b.String()
}

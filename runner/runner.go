package runner

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/gofrs/flock"
	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/protocol"
)

// toolPhase is where the tool is in its own life cycle.
type toolPhase int

const (
	toolNone    toolPhase = iota // no tool; restartAt says when to start one
	toolBooting                  // bootstrap typed, waiting for the first sync
	toolInit                     // running init scripts
	toolReady                    // at its prompt, nothing running
	toolBusy                     // running r.cur
	toolResync                   // interrupted; waiting for a fresh sync marker
	toolKilling                  // signalled; waiting for it to exit
)

// Runner serves one session directory. Create it with [Open]; call Run once.
type Runner struct {
	cfg       Config
	log       *slog.Logger
	dir       string // absolute session directory
	sessionID string
	hostname  string
	fsName    string
	network   bool
	lock      *flock.Flock
	meta      *fsq.Log
	drv       driver
	durable   fsq.Durability

	// Everything below is owned by the Run goroutine.
	spool      *os.File
	spoolW     *bufio.Writer // buffers spool writes; flushed by flushSpool
	bufferedAt time.Time     // when the spool or output buffers took their first unflushed byte
	spoolSize  int64
	pend       *pending
	doneIDs    map[string]bool // cmd_ids that have a result
	watcher    *fsq.Watcher
	chunks     chan chunk
	exited     chan toolExit
	fr         *framer
	tail       *tailRing

	tool       *tool
	tphase     toolPhase
	toolStarts int64
	fastDeaths int
	restartAt  time.Time
	deadline   time.Time // of the current tool-phase wait (boot, init, resync, kill)
	syncTokens map[string]bool
	syncSeq    int64
	nextSyncAt time.Time
	initIdx    int
	initStart  int64
	initOut    []byte
	killHard   bool
	cur        *running
	phase      protocol.Phase
	reason     string
	stopMode   protocol.StopMode // "" while running
	stopReason string
	done       bool
	beats      int64
	cmdsDone   int64
	lease      leaseWatch
	started    time.Time
	mbox       mailbox // ctl/: control requests (mailbox.go)
	scan       *scanner
	stateDirty bool
	signals    int

	pendingTakeover map[string]any
	sync            *syncer // nil with NoSync
	commits         *committer
	outSpares       *fsq.Spares // nil before Run
	resSpares       *fsq.Spares
	stateAt         time.Time
	startFailed     bool
	metrics         *metrics // nil without --metrics-file
}

// Open prepares the session directory (creating the layout, mode 0700),
// takes the single-instance lock, repairs the event log and recovers what a
// previous runner left in inflight/. It returns ErrLocked (wrapped) when
// another live runner holds the session.
func Open(cfg Config) (*Runner, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(cfg.Session)
	if err != nil {
		return nil, err
	}
	if err := makeLayout(dir); err != nil {
		return nil, err
	}
	r := &Runner{
		cfg: cfg, log: cfg.Logger, dir: dir, drv: newDriver(cfg.Kind),
		pend: newPending(), doneIDs: map[string]bool{}, fr: newFramer(),
		chunks: make(chan chunk, 16), exited: make(chan toolExit, 4),
		tail: newTailRing(cfg.TailLines), syncTokens: map[string]bool{},
		phase: protocol.PhaseStarting, started: time.Now(),
	}
	r.durable = fsq.Durable
	if cfg.NoSync {
		r.durable = fsq.Volatile
	}
	r.hostname, _ = os.Hostname()
	r.sessionID = newSessionID()
	r.fsName, r.network, _ = fsq.FSType(dir)
	if r.cfg.Poll <= 0 {
		r.cfg.Poll = time.Second
		if r.network {
			r.cfg.Poll = 250 * time.Millisecond
		}
	}
	if err := r.acquire(); err != nil {
		return nil, err
	}
	if r.metrics, err = newMetrics(r); err != nil {
		r.release()
		return nil, err
	}
	if err := r.openLogs(); err != nil {
		r.release()
		return nil, err
	}
	if err := r.recover(); err != nil {
		r.closeLogs()
		r.release()
		return nil, err
	}
	r.initMailbox() // Requests older than this were meant for an earlier runner.
	return r, nil
}

func makeLayout(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("runner: create session: %w", err)
	}
	for _, d := range protocol.Dirs {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return fmt.Errorf("runner: create session: %w", err)
		}
	}
	return nil
}

func newSessionID() string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux.
	return "session_" + time.Now().UTC().Format("20060102_150405") + "_" + hex.EncodeToString(b[:])
}

func (r *Runner) path(rel string) string { return filepath.Join(r.dir, rel) }

// rel returns a path relative to the session directory, as written on the wire.
func rel(parts ...string) string { return filepath.ToSlash(filepath.Join(parts...)) }

func (r *Runner) openLogs() error {
	// Appends are not fsynced one by one: the syncer does it off the
	// critical path (and shutdown does it last).
	meta, torn, err := fsq.OpenLog(r.path(protocol.FileMeta), false)
	if err != nil {
		return err
	}
	r.meta = meta
	if len(torn) > 0 {
		r.log.Warn("repaired a torn last line of the event log", "bytes", len(torn))
		r.event(protocol.Event{Event: protocol.EvWarning, Detail: map[string]any{"repaired_meta_log_bytes": len(torn)}})
	}
	spool, err := os.OpenFile(r.path(protocol.FileSpool), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	fi, err := spool.Stat()
	if err != nil {
		spool.Close()
		return err
	}
	r.spool, r.spoolSize = spool, fi.Size()
	r.spoolW = bufio.NewWriterSize(spool, 64<<10)
	return nil
}

func (r *Runner) closeLogs() {
	if r.spool != nil {
		r.flushSpool()
		_ = r.spool.Close() // Best effort at exit.
	}
	if r.meta != nil {
		_ = r.meta.Close()
	}
}

// event appends to log/meta.log; a failure is logged, not fatal: the
// results are the contract, the event log is the audit trail.
func (r *Runner) event(e protocol.Event) {
	if e.TS.IsZero() {
		e.TS = protocol.Now()
	}
	if err := r.meta.Append(e); err != nil {
		r.log.Error("append event", "event", e.Event, "err", err)
	}
}

// Run serves the session until a stop request, a signal-driven stop, lease
// expiry or ctx's end (treated as a graceful stop). It returns nil after a
// clean stop.
func (r *Runner) Run(ctx context.Context, signals <-chan os.Signal) error {
	defer r.release()
	defer r.closeLogs()
	if _, err := os.Lstat(r.path(protocol.FileTail)); errors.Is(err, os.ErrNotExist) {
		r.tail.dirty = true // Results name it (tail_path): it exists from the start.
		r.flushTail()
	}
	wctx, cancelWatch := context.WithCancel(context.Background())
	defer cancelWatch()
	useInotify := r.cfg.Watch == WatchInotify || (r.cfg.Watch == WatchAuto && !r.network)
	r.watcher = fsq.Watch(wctx, []string{r.path(protocol.DirQueue), r.path(protocol.DirCtl)}, r.cfg.Poll, useInotify, r.log)
	r.log.Info("runner started", "session", r.dir, "session_id", r.sessionID, "filesystem", r.fsName,
		"network_fs", r.network, "inotify", r.watcher.Inotify, "poll", r.cfg.Poll, "tool", r.cfg.Tool)
	r.event(protocol.Event{Event: protocol.EvRunnerStart, Detail: map[string]any{
		"session_id": r.sessionID, "runner_pid": os.Getpid(), "hostname": r.hostname,
		"filesystem": r.fsName, "inotify": r.watcher.Inotify, "tool": r.cfg.Tool}})
	var touch []string
	if r.network {
		touch = []string{r.path(protocol.DirResult), r.path(protocol.DirOutput), r.path(protocol.DirAck)}
	}
	if !r.cfg.NoSync || r.network {
		meta := r.meta
		if r.cfg.NoSync {
			meta = nil
		}
		r.sync = newSyncer(meta, []string{r.path(protocol.DirInflight), r.path(protocol.DirResult)}, touch,
			func(msg string, err error) { r.log.Warn(msg, "err", err) })
		defer r.sync.close()
	}
	// Files on the critical path are taken from pools of spares instead of
	// being created there (see fsq.Spares).
	// They live in tmp/, so that clients listing result/ or output/ never
	// see them.
	r.outSpares = fsq.NewSpares(r.path(protocol.DirTmp), 4, 0o600)
	r.resSpares = fsq.NewSpares(r.path(protocol.DirTmp), 4, 0o600)
	defer r.outSpares.Close()
	defer r.resSpares.Close()
	r.commits = newCommitter(r)
	r.lease.init(r, time.Now())
	r.scan = newScanner(r.path(protocol.DirQueue))
	defer r.scan.close()
	r.scan.start()
	r.startTool()
	r.writeState()
	r.beat()
	return r.loop(ctx, signals)
}

// flushSpool writes buffered spool bytes out. The spool is buffered because
// a PTY hands out at most 4 KiB per read; it is flushed before every result
// (so the result's spool range can be read) and within flushDelay of any
// byte printed.
func (r *Runner) flushSpool() {
	if r.spoolW.Buffered() == 0 {
		return
	}
	if err := r.spoolW.Flush(); err != nil {
		r.log.Error("write spool", "err", err)
	}
}

package runner

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/protocol"
	"golang.org/x/sys/unix"
)

// Runner serves one session directory. Create it with [Open]; call Run once.
//
// A Runner is made of parts (the package doc lists them), each a type with
// its own fields and methods, all owned by the Run goroutine (loop.go). The
// methods on *Runner make the parts work together.
type Runner struct {
	cfg    Config
	log    *slog.Logger
	dir    string       // absolute session directory
	root   *fsq.Root    // every file operation on the session goes through it
	hold   *sessionHold // is the session still this runner's? (lost.go)
	id     identity     // fixed by Open
	layout layoutState  // modes of the session, and what is wrong with it (layout.go)
	lock   *fileLock
	drv    driver
	clk    clock

	// Everything below is owned by the Run goroutine.
	status  runStatus // what state.json says (files.go)
	stop    stopState // why and how the runner stops (control.go)
	tool    toolLife  // the tool process and its phase (tool.go)
	cur     *running  // the running command (running.go)
	queue   cmdQueue  // queue/: commands seen, running order, results settling (queue.go)
	in      inputQueue
	mbox    mailbox   // ctl/: control requests (mailbox.go)
	disk    spoolDisk // the spool, the event log, a full disk and the reserve (disk.go, logs.go)
	lease   leaseWatch
	watcher *fsq.Watcher
	fr      *framer
	tail    *tailRing

	pendingTakeover map[string]any // the lock taken over from a dead runner, for its event
	sync            *syncer        // nil with NoSync
	results         *resultWriter
	resSpares       *fsq.Spares
	pending         writerStatus // results waiting for a retry (err nil: none)
	closeOnce       sync.Once
	metrics         *metrics // nil without --metrics-file

	// recovery counts what recover did at start (recover.go); Open only.
	recovery recoveryCounts
}

// identity is what a runner says about itself, fixed by Open.
type identity struct {
	sessionID string
	hostname  string
	fsName    string    // the session's filesystem type
	network   bool      // the session is on a network filesystem
	started   time.Time // when Open ran (clk)
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
	if err := createSession(dir); err != nil {
		return nil, err
	}
	root, err := fsq.OpenRoot(dir)
	if errors.Is(err, syscall.ENOTDIR) {
		return nil, fmt.Errorf("%w: %s is not a directory", ErrUntrusted, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("runner: session: %w", err)
	}
	p, warns, err := checkTrust(root)
	if err != nil {
		root.Close()
		return nil, err
	}
	if _, err := ensureLayout(root, p); err != nil {
		root.Close()
		return nil, err
	}
	r := &Runner{layout: layoutState{perms: p, warnings: warns}, root: root, hold: &sessionHold{}, disk: spoolDisk{root: root}, mbox: mailbox{root: root, log: cfg.Logger},
		cfg: cfg, log: cfg.Logger, dir: dir, drv: newDriver(cfg),
		queue: cmdQueue{root: root, log: cfg.Logger, pend: newPending(), done: map[string]string{}, settling: map[string]bool{}},
		in:    inputQueue{waiting: map[string][]*heldReq{}}, fr: newFramer(),
		tail: newTailRing(cfg.TailLines), tool: newToolLife(cfg.startTerm),
	}
	if ld := r.drv.line(); ld != nil {
		r.fr.prompts = newPromptFilter(ld.spec.Prompt)
		r.fr.anywhere, r.fr.echoGuard = true, ld.echoGuard()
		r.fr.markerStarts(protocol.DefaultMarkerPrefix)
		ld.alias, ld.passControl = r.aliasPath, cfg.PassControl
	}
	r.clk = cfg.clock
	if r.clk == nil {
		r.clk = realClock{}
	}
	r.id.started = r.clk.Now()
	r.id.hostname, _ = os.Hostname()
	r.id.sessionID = newSessionID()
	var sfs unix.Statfs_t
	if r.root.Statfs(".", &sfs) == nil {
		r.id.fsName, r.id.network = fsq.FSTypeOf(&sfs)
	}
	if r.cfg.Poll <= 0 {
		r.cfg.Poll = time.Second
		if r.id.network {
			r.cfg.Poll = 250 * time.Millisecond
		}
	}
	if err := r.acquire(); err != nil {
		r.Close()
		return nil, err
	}
	if r.metrics, err = newMetrics(r); err != nil {
		r.release()
		r.root.Close()
		return nil, err
	}
	if err := r.openSession(); err != nil {
		r.Close()
		return nil, err
	}
	if err := r.initRetention(); err != nil {
		r.Close()
		return nil, err
	}
	r.mbox.init(r.id.sessionID, r.clk) // Requests older than this were meant for an earlier runner.
	return r, nil
}

// openSession runs under the lock: it sweeps what a dead runner left,
// opens the logs, starts the result writer and settles inflight/.
func (r *Runner) openSession() error {
	if err := r.sweepLeftovers(); err != nil {
		return err
	}
	if err := r.openLogs(); err != nil {
		return err
	}
	r.disk.makeBallast()
	r.killPreviousTool()
	// Files on the critical path are taken from pools of spares instead of
	// being created there (see fsq.Spares). They live in tmp/, so that
	// clients listing result/ or output/ never see them.
	r.disk.outSpares = r.disk.root.NewSpares(protocol.DirTmp, 4, r.layout.perms.file)
	r.resSpares = r.root.NewSpares(protocol.DirTmp, 4, r.layout.perms.file)
	r.disk.reaper = r.root.NewReaper(16)
	r.results = newResultWriter(writerConfig{dir: r.dir, root: r.root, hold: r.hold, host: r.id.hostname, durable: !r.cfg.NoSync,
		network: r.id.network, filePerm: r.layout.perms.file, dirMode: r.layout.perms.dir, spares: r.resSpares, log: r.log, ops: r.cfg.writerOps})
	return r.recover()
}

// Close releases what Open took: it waits for results still being
// written, closes the logs and releases the session lock. Run calls it when
// it returns; calling it again, or instead of Run, is safe.
func (r *Runner) Close() error {
	r.closeOnce.Do(func() {
		if r.results != nil {
			r.disk.retain.loaded = false // Results still committed now are kept; nothing new is pruned.
			r.results.close(r.onResult)
		}
		r.closeRetention()
		if r.disk.closeSpares() {
			r.resSpares.Close()
		}
		r.closeLogs()
		if r.disk.reaper != nil {
			r.disk.reaper.Close()
		}
		r.release()
		r.root.SweepLater()
		r.root.Close()
		r.tool.close()
	})
	return nil
}

func newSessionID() string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux.
	return "session_" + wallNow().UTC().Format("20060102_150405") + "_" + hex.EncodeToString(b[:])
}

func (r *Runner) path(rel string) string { return filepath.Join(r.dir, rel) }

// rel returns a path relative to the session directory, as written on the wire.
func rel(parts ...string) string { return filepath.ToSlash(filepath.Join(parts...)) }

// Run serves the session until a stop request, a signal on signals (the
// first is a graceful stop, the second a forced one), lease expiry, giving
// up on a tool that does not start (ErrGaveUp), or ctx's end. Cancelling
// ctx is a graceful stop: the running command finishes and gets its
// result, queued commands stay queued, the tool and its process group are
// ended, and Run returns nil. Run closes the Runner when it returns (see
// Close); call it once.
func (r *Runner) Run(ctx context.Context, signals <-chan os.Signal) error {
	defer r.Close()
	if _, err := r.root.Lstat(protocol.FileTail); errors.Is(err, os.ErrNotExist) {
		r.tail.dirty = true // Results name it (tail_path): it exists from the start.
		r.flushTail()
	}
	wctx, cancelWatch := context.WithCancel(context.Background())
	defer cancelWatch()
	useInotify := r.cfg.Watch == WatchInotify || (r.cfg.Watch == WatchAuto && !r.id.network)
	// The watcher only listens (inotify or a poll of the names): it opens
	// nothing it reads, and the scan it triggers lists through r.root.
	r.watcher = fsq.Watch(wctx, []string{r.path(protocol.DirQueue), r.path(protocol.DirCtl)}, r.cfg.Poll, useInotify, r.log)
	r.log.Info("runner started", "session", r.dir, "session_id", r.id.sessionID, "filesystem", r.id.fsName,
		"network_fs", r.id.network, "inotify", r.watcher.Inotify, "poll", r.cfg.Poll, "tool", r.cfg.Tool)
	r.event(protocol.Event{Event: protocol.EvRunnerStart, Detail: map[string]any{
		"protocol_version": protocol.Version, "session_id": r.id.sessionID, "runner_pid": os.Getpid(), "hostname": r.id.hostname,
		"filesystem": r.id.fsName, "inotify": r.watcher.Inotify, "tool": r.cfg.Tool, "shared": r.layout.perms.shared,
		"cwd": workingDir()}})
	for _, w := range r.layout.warnings {
		r.log.Warn(string(w))
		r.event(protocol.Event{Event: protocol.EvWarning, Detail: map[string]any{"trust": string(w)}})
	}
	var touch []string
	if r.id.network {
		touch = []string{protocol.DirResult, protocol.DirOutput, protocol.DirAck}
	}
	if !r.cfg.NoSync || r.id.network {
		meta := r.disk.meta
		if r.cfg.NoSync {
			meta = nil
		}
		r.sync = newSyncer(r.root, meta, []string{protocol.DirInflight, protocol.DirResult}, touch, !r.id.network,
			func(msg string, err error) { r.log.Warn(msg, "err", err) })
		defer r.sync.close()
	}
	r.lease.init(r, r.clk.Now())
	list := r.cfg.listQueue
	if list == nil {
		list = func(string) ([]string, error) { return r.root.ReadNames(protocol.DirQueue) }
	}
	r.queue.startScan(r.path(protocol.DirQueue), list, r.clk)
	defer r.queue.scan.close()
	r.startTool()
	r.writeState()
	r.beat()
	return r.loop(ctx, signals)
}

// workingDir is the runner's working directory, which the tool inherits
// (runner --cwd sets it), or "" when it cannot be known (deleted).
func workingDir() string {
	d, err := os.Getwd()
	if err != nil {
		return ""
	}
	return d
}

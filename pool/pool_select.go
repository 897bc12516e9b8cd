package pool

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/internal/sessionio"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
)

// SessionView is what the pool's rules see of one session, read without
// waiting (PROTOCOL.md, "Pools": selection).
type SessionView struct {
	Name     string         `json:"session"`
	Phase    protocol.Phase `json:"phase"`
	Alive    bool           `json:"alive"` // heartbeat fresh on the filesystem's clock (and lock held, local fs)
	Dead     bool           `json:"dead"`  // stopped, lock free (local fs), never started, or heartbeat older than 10 s
	Why      string         `json:"why"`
	Queue    int            `json:"queue_depth"`
	Inflight int            `json:"inflight"`
	HBAge    time.Duration  `json:"heartbeat_age_ns"`
	Done     int64          `json:"commands_done"`
	s        *master.Session
}

// Load is what least-loaded compares: queued plus claimed commands.
func (v SessionView) Load() int { return v.Queue + v.Inflight }

// Serving reports whether new commands may go to the session: alive and
// idle or busy.
func (v SessionView) Serving() bool {
	return v.Alive && (v.Phase == protocol.PhaseIdle || v.Phase == protocol.PhaseBusy)
}

// fsNow returns the current time of the filesystem holding the pool: the
// mtime of a file touched with UTIME_NOW (on NFS the server's clock), so
// that heartbeat ages compare two times of one clock.
func (p *Pool) fsNow() (time.Time, error) { return p.touchClock() }

// Views reads every session of the pool once (no waiting).
func (p *Pool) Views() ([]SessionView, error) {
	now, err := p.fsNow()
	if err != nil {
		return nil, err
	}
	var out []SessionView
	for _, name := range p.SessionNames() {
		out = append(out, p.view(name, now))
	}
	return out, nil
}

// view judges one session against the filesystem time now:
//   - alive: phase is not stopped, heartbeat.json's mtime is at most
//     2 x interval_ms + 1 s older than now, and (local filesystem) the
//     runner's lock is held;
//   - dead: phase stopped, no state at all, (local filesystem) lock free,
//     or heartbeat older than 10 s. A session neither alive nor dead (a
//     heartbeat a few seconds late) keeps its commands but gets no new ones.
func (p *Pool) view(name string, now time.Time) SessionView {
	v := SessionView{Name: name}
	s, err := p.session(name)
	if err != nil {
		v.Dead, v.Why = true, "not a session yet (no runner has started)"
		return v
	}
	v.s = s
	q, qerr := s.QueueDepth()
	v.Queue = q
	v.Inflight = claimedCount(s)
	st, serr := s.ReadState()
	hb, herr := s.Core().ReadHeartbeat()
	fi, ferr := lstat(s, protocol.FileHeartbeat)
	if ferr == nil && !fi.Mode().IsRegular() {
		ferr = fsq.ErrNotRegular // A symlink or a FIFO there is no heartbeat.
	}
	if serr != nil || herr != nil || ferr != nil {
		v.Dead, v.Why = true, "no runner has written state yet"
		return v
	}
	v.Phase, v.Done = st.Phase, st.CommandsDone
	v.HBAge = max(now.Sub(fi.ModTime()), 0)
	window := 2*time.Duration(max(hb.IntervalMS, 100))*time.Millisecond + time.Second
	switch {
	case st.Phase == protocol.PhaseStopped || hb.Phase == protocol.PhaseStopped:
		v.Dead, v.Why = true, "the runner stopped: "+st.Reason
	case !s.Core().OnNetworkFS() && !s.Core().LockHeld():
		v.Dead, v.Why = true, "the runner's lock is free"
	case v.HBAge > max(poolDeadAfter, window):
		v.Dead, v.Why = true, fmt.Sprintf("heartbeat %v old", v.HBAge.Round(time.Second))
	case v.HBAge > window:
		v.Why = fmt.Sprintf("heartbeat %v old", v.HBAge.Round(100*time.Millisecond))
	case qerr != nil:
		// Neither alive nor dead: it keeps its commands, gets no new ones.
		v.Why = qerr.Error()
	default:
		v.Alive, v.Why = true, "heartbeat fresh"
	}
	return v
}

// claimedCount counts the commands in inflight/ that have no result yet
// (the runner moves a finished command to archive/ a little after its
// result is visible).
func claimedCount(s *master.Session) int {
	r := sessionRoot(s)
	if r == nil {
		return 0
	}
	names, _ := r.ReadNames(protocol.DirInflight)
	n := 0
	for _, name := range names {
		if isCommand(name) && !exists(s, protocol.DirResult+"/"+name) {
			n++
		}
	}
	return n
}

// leastLoaded picks among views: serving sessions first, else alive ones;
// the smallest Load, ties to the smallest name (views are in name order).
// except names a session to leave out.
func leastLoaded(views []SessionView, except string) (SessionView, bool) {
	for _, want := range []func(SessionView) bool{SessionView.Serving, func(v SessionView) bool { return v.Alive }} {
		best, found := SessionView{}, false
		for _, v := range views {
			if v.Name != except && want(v) && (!found || v.Load() < best.Load()) {
				best, found = v, true
			}
		}
		if found {
			return best, true
		}
	}
	return SessionView{}, false
}

// chooser judges the sessions of a pool on demand, each at most once, so
// that choosing a session reads two of them, not all (PROTOCOL.md section
// 18.3). It is not safe for concurrent use.
type chooser struct {
	p      *Pool
	now    time.Time // the filesystem's clock (fsNow)
	names  []string  // the pool's sessions, in name order
	judged map[string]SessionView
}

// newChooser lists the pool's sessions and reads the filesystem's clock.
func (p *Pool) newChooser() (*chooser, error) {
	now, err := p.fsNow()
	if err != nil {
		return nil, err
	}
	return &chooser{p: p, now: now, names: p.SessionNames(), judged: map[string]SessionView{}}, nil
}

// chooserOf is a chooser that knows every session already (views, as
// Views or Heal read them).
func (p *Pool) chooserOf(views []SessionView) *chooser {
	c := &chooser{p: p, judged: make(map[string]SessionView, len(views))}
	for _, v := range views {
		c.names = append(c.names, v.Name)
		c.judged[v.Name] = v
	}
	return c
}

// has reports whether name is a session of the pool.
func (c *chooser) has(name string) bool {
	_, found := slices.BinarySearch(c.names, name)
	return found
}

// view judges session name (once).
func (c *chooser) view(name string) SessionView {
	v, ok := c.judged[name]
	if !ok {
		v = c.p.view(name, c.now)
		c.judged[name] = v
	}
	return v
}

// seen returns the sessions judged so far, in name order.
func (c *chooser) seen() []SessionView {
	out := make([]SessionView, 0, len(c.judged))
	for _, n := range c.names {
		if v, ok := c.judged[n]; ok {
			out = append(out, v)
		}
	}
	return out
}

// twoChoices is the power of two choices: it judges the sessions in a
// random order until two are serving, and takes the less loaded of the
// two (ties to the smaller name). Its cost does not grow with the pool
// while most sessions serve. When fewer than two serve, every session has
// been judged and leastLoaded decides among them (serving first, else
// alive). except names a session to leave out.
func (c *chooser) twoChoices(except string) (SessionView, bool) {
	order := slices.Clone(c.names)
	var found []SessionView
	for i := 0; i < len(order) && len(found) < 2; i++ {
		j := i + rand.IntN(len(order)-i) // Fisher-Yates, one step at a time.
		order[i], order[j] = order[j], order[i]
		if order[i] == except {
			continue
		}
		if v := c.view(order[i]); v.Serving() {
			found = append(found, v)
		}
	}
	if len(found) < 2 {
		return leastLoaded(c.seen(), except)
	}
	a, b := found[0], found[1]
	if b.Load() < a.Load() || b.Load() == a.Load() && b.Name < a.Name {
		a = b
	}
	return a, true
}

// pick chooses the session for a command among views (every session of
// the pool, judged): see choose.
func (p *Pool) pick(views []SessionView, affinity, except string) (SessionView, error) {
	return p.choose(p.chooserOf(views), affinity, except)
}

// choose chooses the session for a command: the session the affinity key
// is pinned to while it is alive, else one by twoChoices (which then
// becomes the key's pin). except names a session to leave out.
func (p *Pool) choose(c *chooser, affinity, except string) (SessionView, error) {
	var pinned string
	if affinity != "" {
		pin, err := p.readPin(affinity)
		if err == nil {
			if pin.Session != except && c.has(pin.Session) {
				if v := c.view(pin.Session); v.Alive {
					return v, nil
				}
			}
			pinned = pin.Session
		}
	}
	v, ok := c.twoChoices(except)
	if !ok {
		return v, fmt.Errorf("%w: no live session in pool %s", master.ErrRunnerNotAlive, p.dir)
	}
	if affinity != "" {
		won, err := p.writePin(affinity, v.Name, pinned != "")
		if err != nil {
			return v, err
		}
		if won != v.Name && won != except && c.has(won) {
			if w := c.view(won); w.Alive {
				return w, nil // Another master pinned the key first.
			}
		}
	}
	return v, nil
}

// Pin is affinity/<key>.json.
type Pin struct {
	ProtocolVersion int           `json:"protocol_version"`
	Key             string        `json:"key"`
	Session         string        `json:"session"`
	TS              protocol.Time `json:"ts"`
}

// pinName is the pool file of key's pin.
func pinName(key string) string { return DirAffinity + "/" + key + ".json" }

func (p *Pool) readPin(key string) (Pin, error) {
	var pin Pin
	b, err := p.readPoolFile(pinName(key), 1<<16)
	if err != nil {
		return pin, err
	}
	return pin, json.Unmarshal(b, &pin)
}

// writePin pins key to session. A new pin is created exclusively (a hard
// link of a complete temp file): if another master created it first, its
// session is returned. A stale pin (replace) is overwritten atomically;
// two masters replacing one stale pin at once: the last rename wins.
func (p *Pool) writePin(key, session string, replace bool) (string, error) {
	b, _ := json.Marshal(Pin{ProtocolVersion: protocol.Version, Key: key, Session: session, TS: protocol.Now()})
	if replace {
		return session, p.writePoolFile(pinName(key), b, fsq.Volatile)
	}
	if err := p.mkdirPool(DirAffinity); err != nil {
		return "", err
	}
	ok, err := linkNew(p.root, pinName(key), b)
	if err != nil {
		return "", err
	}
	if !ok {
		pin, err := p.readPin(key)
		return pin.Session, err
	}
	return session, nil
}

// SubmitOptions are master.SubmitOptions plus the affinity key.
type SubmitOptions struct {
	master.SubmitOptions
	// Affinity pins related commands to one session: every command with
	// the same key goes to the session the key is pinned to, while that
	// session is alive. Same charset as a cmd_id.
	Affinity string
}

// Command is a command submitted to a pool.
type Command struct {
	*master.Command
	Session string // the session it was first queued in (it may have moved since)
	pool    *Pool
}

// Submit puts one command into the less loaded of two live sessions of the
// pool chosen at random (the power of two choices, PROTOCOL.md section
// 18.3), or the session its affinity key is pinned to. The command file carries
// an "affinity" field so that a move keeps it with its key.
func (p *Pool) Submit(ctx context.Context, payload string, opts SubmitOptions) (*Command, error) {
	if opts.Affinity != "" && !protocol.ValidCmdID(opts.Affinity) {
		return nil, sessionio.UsageError("affinity key %q: use 1-128 characters of [A-Za-z0-9._-]", opts.Affinity)
	}
	if err := opts.SubmitOptions.Check(); err != nil { // Before a session is chosen or a pin written.
		return nil, err
	}
	ch, err := p.newChooser()
	if err != nil {
		return nil, err
	}
	v, err := p.choose(ch, opts.Affinity, "")
	if err != nil {
		return nil, err
	}
	so := opts.SubmitOptions
	if opts.Affinity != "" { // Recorded in the command file, where a mover finds it.
		so.Extra = maps.Clone(so.Extra)
		if so.Extra == nil {
			so.Extra = map[string]any{}
		}
		so.Extra["affinity"] = opts.Affinity
	}
	c, err := v.s.Submit(ctx, payload, so)
	if err != nil {
		return nil, err
	}
	p.rescueQueued(ch)
	return &Command{Command: c, Session: v.Name, pool: p}, nil
}

// rescueQueued moves the queued commands of the dead sessions a submit
// judged to live ones among those it judged: what a heal does for them,
// and nothing else of a heal — no other session is read, nothing is
// respawned (a scheduler submission, seconds each), no leftover is swept.
// A submit ran a whole Heal inline; master pool heal
// --every, pool adapt and a waiting pool wait run those. Best effort: a
// heal reports what fails here.
func (p *Pool) rescueQueued(ch *chooser) {
	views := ch.seen()
	for _, v := range views {
		if !v.Dead || v.Queue == 0 || v.s == nil {
			continue
		}
		if _, ok := leastLoaded(views, v.Name); !ok {
			continue
		}
		for _, name := range commandNames(v.s, protocol.DirQueue) {
			_, _ = p.moveOne(views, v, name, ch.now)
		}
	}
}

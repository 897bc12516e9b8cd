package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
)

// sessions resolves the `session` argument of a tool call: with --session
// there is one session (named after its directory's base name); with --pool
// every real subdirectory of the pool that holds a queue/ is a session named
// by its directory name, looked up on every call so that sessions added to
// the pool later are found.
type sessions struct {
	pool string // pool directory, or "" in single-session mode
	one  *master.Session
	name string // the single session's name

	mu   sync.Mutex
	open map[string]*master.Session
}

func newSessions(single, pool string) (*sessions, error) {
	if pool != "" {
		fi, err := os.Stat(pool)
		if err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("%w: pool %s is not a directory", master.ErrSessionMissing, pool)
		}
		abs, err := filepath.Abs(pool)
		if err != nil {
			return nil, err
		}
		return &sessions{pool: abs, open: map[string]*master.Session{}}, nil
	}
	s, err := master.Open(single)
	if err != nil {
		return nil, err
	}
	return &sessions{one: s, name: filepath.Base(s.Dir())}, nil
}

// get returns the named session. In single-session mode name may be empty.
func (ss *sessions) get(name string) (*master.Session, string, error) {
	if ss.pool == "" {
		if name != "" && name != ss.name {
			return nil, "", fmt.Errorf("unknown session %q: this server serves only %q", name, ss.name)
		}
		return ss.one, ss.name, nil
	}
	if name == "" {
		return nil, "", errors.New("this server serves a pool: name the session (see the status tool for the list)")
	}
	if name != filepath.Base(name) || name == "." || name == ".." || strings.HasPrefix(name, ".") {
		return nil, "", fmt.Errorf("invalid session name %q", name)
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if s, ok := ss.open[name]; ok {
		return s, name, nil
	}
	dir := filepath.Join(ss.pool, name)
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
		return nil, "", fmt.Errorf("unknown session %q in pool %s", name, ss.pool)
	}
	s, err := master.Open(dir)
	if err != nil {
		return nil, "", fmt.Errorf("session %q: %w", name, err)
	}
	ss.open[name] = s
	return s, name, nil
}

// names lists the sessions, sorted.
func (ss *sessions) names() ([]string, error) {
	if ss.pool == "" {
		return []string{ss.name}, nil
	}
	ents, err := os.ReadDir(ss.pool)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		// Only real directories: a symlink in the pool is not followed.
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if fi, err := os.Lstat(filepath.Join(ss.pool, e.Name(), protocol.DirQueue)); err == nil && fi.IsDir() {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}

// pick returns the named session, or with no name the least-loaded one: a
// live runner before a dead one, then the fewest commands queued or
// running, then the first name.
func (ss *sessions) pick(ctx context.Context, name string) (*master.Session, string, error) {
	if name != "" || ss.pool == "" {
		return ss.get(name)
	}
	names, err := ss.names()
	if err != nil {
		return nil, "", err
	}
	if len(names) == 0 {
		return nil, "", fmt.Errorf("%w: the pool %s holds no session", master.ErrSessionMissing, ss.pool)
	}
	type cand struct {
		name  string
		s     *master.Session
		alive bool
		load  int
	}
	cands := make([]cand, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		cands[i] = cand{name: n, load: 1 << 30}
		s, _, err := ss.get(n)
		if err != nil {
			continue
		}
		cands[i].s = s
		wg.Add(1)
		go func(c *cand) {
			defer wg.Done()
			st, err := c.s.Status(ctx)
			if err != nil {
				return
			}
			c.alive, c.load = st.Alive, st.QueueDepth
			if st.CurrentCmdID != "" {
				c.load++
			}
		}(&cands[i])
	}
	wg.Wait()
	best := -1
	for i, c := range cands {
		if c.s == nil {
			continue
		}
		if best < 0 || (c.alive && !cands[best].alive) || (c.alive == cands[best].alive && c.load < cands[best].load) {
			best = i
		}
	}
	if best < 0 {
		return nil, "", fmt.Errorf("%w: no usable session in pool %s", master.ErrSessionMissing, ss.pool)
	}
	return cands[best].s, cands[best].name, nil
}

// command finds cmdID in the named session, or with no name in every
// session of the pool.
func (ss *sessions) command(name, cmdID string) (*master.Session, string, *master.Command, error) {
	names := []string{name}
	if name == "" && ss.pool != "" {
		var err error
		if names, err = ss.names(); err != nil {
			return nil, "", nil, err
		}
	}
	for _, n := range names {
		s, n, err := ss.get(n)
		if err != nil {
			return nil, "", nil, err
		}
		if c, err := lookup(s, cmdID); err == nil {
			return s, n, c, nil
		} else if !errors.Is(err, os.ErrNotExist) {
			return nil, "", nil, err
		}
	}
	return nil, "", nil, fmt.Errorf("unknown cmd_id %q: no such command in %s", cmdID, strings.Join(names, ", "))
}

// lookup is Session.Command, tried again when it finds nothing: a command
// moving from queue/ to inflight/ to result/ while the directories are
// listed one after the other can be missed once.
func lookup(s *master.Session, cmdID string) (*master.Command, error) {
	var err error
	for range 3 {
		var c *master.Command
		if c, err = s.Command(cmdID); err == nil || !errors.Is(err, os.ErrNotExist) {
			return c, err
		}
	}
	return nil, err
}

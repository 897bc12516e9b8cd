package master

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/skillpilot/skillpilot/internal/sessionio"
	"github.com/skillpilot/skillpilot/protocol"
)

// The directories of a pool's moves and of withdraw (sessionio).
const (
	dirMoved     = sessionio.DirMoved
	dirForward   = sessionio.DirForward
	dirWithdrawn = sessionio.DirWithdrawn
)

// moveWait bounds how long a withdraw waits for a pool mover that has
// claimed the command (moved/) to record where it goes (forward/): a live
// mover takes milliseconds; one that was killed leaves it to the next heal.
var moveWait = 5 * time.Second

// Withdraw takes back a command no runner has claimed yet: its file is
// renamed from queue/ into withdrawn/ (PROTOCOL.md section 19), so it
// never runs and gets no result. It is atomic against a runner's claim and
// a pool mover's, which rename the same entry: exactly one succeeds. A
// command a pool moved is followed through its forward/ records and
// withdrawn where it is now, also while the move is under way (its staged
// copy is taken before the mover can publish it).
//
// A command that is running (claimed) is ErrNotQueued, one that has its
// result ErrAlreadyFinished, one withdrawn before ErrAlreadyWithdrawn (all
// exit 7), and one that is nowhere ErrUnknownCmdID: such a command never
// runs. A command stuck in a killed mover's hands (moved/ without a
// forward record for moveWait) is ErrNotQueued too, saying it may still
// run once a heal finishes the move.
func (c *Command) Withdraw() error {
	_, err := c.withdraw()
	return err
}

// Withdraw takes back the command ref names (Session.Command's rule) and
// returns a handle on the file withdrawn: in the session and under the
// name it had when it was taken back (a pool may have moved it). A ref
// that names a command withdrawn earlier is ErrAlreadyWithdrawn; see
// Command.Withdraw for the other outcomes.
func (s *Session) Withdraw(ref string) (*Command, error) {
	c, err := s.Command(ref)
	if errors.Is(err, ErrUnknownCmdID) {
		if w := s.withdrawnRef(ref); w != nil {
			return nil, w.alreadyWithdrawn()
		}
	}
	if err != nil {
		return nil, err
	}
	return c.withdraw()
}

// withdrawnRef is the command ref names in withdrawn/, or nil.
func (s *Session) withdrawnRef(ref string) *Command {
	name, id, err := parseCommandRef(ref)
	if err != nil {
		return nil
	}
	if name == "" {
		return s.findByID(id, []string{dirWithdrawn})
	}
	s.io.Revalidate(dirWithdrawn)
	if !s.io.Exists(dirWithdrawn + "/" + name) {
		return nil
	}
	seq, _, _ := protocol.ParseCommandName(name)
	return &Command{s: s, ID: id, Seq: seq, Name: name}
}

func (c *Command) alreadyWithdrawn() error {
	return withContext(fmt.Errorf("%w: %s was withdrawn before (%s/%s): it never runs", ErrAlreadyWithdrawn, c.ID, dirWithdrawn, c.Name),
		map[string]any{"cmd_id": c.ID})
}

// withdraw follows the command from where c names it to where it is, in
// the order it moves, and takes it back there (Withdraw).
func (c *Command) withdraw() (*Command, error) {
	cur := c
	deadline := time.Now().Add(moveWait)
	for hops := 0; ; {
		s, name := cur.s, cur.Name
		ok, err := s.takeBack(protocol.DirQueue+"/"+name, name)
		if err != nil {
			return nil, wrapf(err, "withdrawing %s", c.ID)
		}
		if ok {
			return cur, nil
		}
		// Gone from queue/: a runner claimed it, a mover did, or a
		// withdraw. A mover renames it into moved/, records forward/, then
		// removes moved/: look in that order, so a move that ends meanwhile
		// is seen by the forward record.
		s.io.Revalidate(dirMoved)
		moving := s.io.Exists(dirMoved + "/" + name)
		f, ferr := s.io.ReadForward(name)
		switch {
		case ferr == nil:
			next, err := cur.follow(f)
			if err == nil && hops >= maxHops {
				err = fmt.Errorf("more than %d forward records in a row", maxHops)
			}
			if err != nil {
				return nil, fmt.Errorf("master: withdrawing %s: cannot follow %s/%s: %w", c.ID, dirForward, name, err)
			}
			// The mover may not have published it yet: its staged copy
			// is taken first (the publish, a rename of the same entry,
			// then finds nothing and the move ends there), then the
			// published file.
			if ok, err := next.s.takeBack(protocol.DirQueue+"/"+f.Stage, next.Name); err != nil {
				return nil, wrapf(err, "withdrawing %s", c.ID)
			} else if ok {
				return next, nil
			}
			cur, hops = next, hops+1
			continue
		case !errors.Is(ferr, os.ErrNotExist):
			return nil, wrapf(ferr, "withdrawing %s", c.ID)
		case moving && time.Now().Before(deadline):
			time.Sleep(10 * time.Millisecond) // A mover is staging it: wait for its forward record.
			continue
		case moving:
			return nil, withContext(fmt.Errorf("%w: %s is being moved by a pool (%s/%s) and may still run; "+
				"withdraw it again once master pool heal has finished the move", ErrNotQueued, c.ID, dirMoved, name),
				map[string]any{"cmd_id": c.ID})
		}
		ctx := map[string]any{"cmd_id": c.ID}
		// inflight/ before result/: the runner renames the result in,
		// then moves the claim out, so a claim seen beside a result is
		// finished, and no order of the two looks misses both.
		s.io.Revalidate(protocol.DirInflight)
		claimed := s.io.Exists(protocol.DirInflight + "/" + name)
		if r, _ := (&Command{s: s, ID: cur.ID, Seq: cur.Seq, Name: name, hops: maxHops}).Result(); r != nil {
			return nil, withContext(fmt.Errorf("%w: %s has its result (%s); nothing to withdraw", ErrAlreadyFinished, c.ID, r.Status), ctx)
		}
		if claimed {
			return nil, withContext(fmt.Errorf("%w: %s is running (a runner claimed it); cancel it instead", ErrNotQueued, c.ID), ctx)
		}
		s.io.Revalidate(dirWithdrawn)
		if s.io.Exists(dirWithdrawn + "/" + name) {
			return nil, cur.alreadyWithdrawn()
		}
		return nil, withContext(fmt.Errorf("%w: %s is no longer queued, running or finished in this session (it will not run)", ErrUnknownCmdID, c.ID), ctx)
	}
}

// takeBack renames the session file from into withdrawn/<name> (created
// if missing). It reports false, nil when from is gone: a runner, a mover
// or another withdraw took it first.
func (s *Session) takeBack(from, name string) (bool, error) {
	r, err := s.io.Root()
	if err != nil {
		return false, err
	}
	r.Revalidate(protocol.DirQueue)
	if _, err := r.Lstat(from); errors.Is(err, os.ErrNotExist) {
		return false, nil // Most calls: nothing to rename, nothing to create.
	}
	if err := sessionio.MkdirMaster(r, dirWithdrawn); err != nil {
		return false, err
	}
	return r.Claim(from, dirWithdrawn+"/"+name)
}

// follow is the command a forward record of c's session points to.
func (c *Command) follow(f *sessionio.Forward) (*Command, error) {
	t, err := Open(filepath.Join(c.s.io.Dir(), f.ToSession))
	if err != nil {
		return nil, err
	}
	seq, id, err := protocol.ParseCommandName(f.ToName)
	if err != nil || id != c.ID {
		return nil, fmt.Errorf("forward record names %q, not a command file of %s", f.ToName, c.ID)
	}
	t.PollInterval = c.s.PollInterval
	return &Command{s: t, ID: id, Seq: seq, Name: f.ToName, hops: c.hops + 1}, nil
}

// queued reports whether the command (followed where a pool moved it) is
// still in queue/, unclaimed.
func (c *Command) queued() bool {
	cur := c.Resolve()
	return cur.s.io.Exists(protocol.DirQueue + "/" + cur.Name)
}

// noRunnerErr is a wait's ErrRunnerNotAlive for c, saying plainly what
// becomes of c: a queued command stays queued, and a runner started later
// runs it unless it is withdrawn (a retrying script ran it
// twice).
func (c *Command) noRunnerErr(err error) error {
	if c.queued() {
		err = fmt.Errorf("%w; %s stays queued: a runner started later runs it unless it is withdrawn", err, c.ID)
	}
	return wrapf(err, "waiting for %s", c.ID)
}

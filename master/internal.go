package master

import (
	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/internal/sessionio"
	"github.com/skillpilot/skillpilot/protocol"
)

// The ways into a Session and a Command that only the Go master's own
// packages (launch, pool, the CLI) use, outside this package's API: see
// package internal/sessionio.
func init() {
	sessionio.Of = func(s any) sessionio.Session { return internals{s.(*Session)} }
	sessionio.CommandOf = func(c any) sessionio.Command { return commandInternals{c.(*Command)} }
	sessionio.OpenIn = func(parent *fsq.Root, name string) (any, error) {
		s, err := openIn(parent, name)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
}

// internals is a Session as sessionio.Session.
type internals struct{ s *Session }

func (i internals) Root() (*fsq.Root, error) { return i.s.fs() }
func (i internals) Owner() string            { return i.s.owner }
func (i internals) OnNetworkFS() bool        { return i.s.network }
func (i internals) LockHeld() bool           { return i.s.lockHeld() }
func (i internals) ReadHeartbeat() (protocol.Heartbeat, error) {
	return i.s.readHeartbeat()
}
func (i internals) NoRunnerHint(seq int64) string {
	return i.s.noRunnerHint(seq)
}
func (i internals) WatchDegraded() string { return i.s.watching().Degraded }

func (i internals) AllocSeq() (int64, error) {
	r, err := i.s.fs()
	if err != nil {
		return 0, err
	}
	return sessionio.AllocSeq(r)
}

func (i internals) ReadForward(name string) (*sessionio.Forward, error) {
	return i.s.readForward(name)
}

// commandInternals is a Command as sessionio.Command.
type commandInternals struct{ c *Command }

func (i commandInternals) ReadResult() (*protocol.Result, []byte, error) { return i.c.readResult() }

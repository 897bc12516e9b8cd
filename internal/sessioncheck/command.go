package sessioncheck

import (
	"github.com/rogpeppe/go-internal/testscript"
)

// Command is Check as a testscript command, registered by txtar test
// suites as "checksession":
//
//	checksession [-queued] [-running] DIR
//
// -queued allows commands still waiting in queue/ (AllowQueued), -running
// a runner that is still serving (Running). DIR is relative to the
// script's working directory. With "!" it requires a violation.
func Command(ts *testscript.TestScript, neg bool, args []string) {
	var opts Options
	var dir string
	for _, a := range args {
		switch a {
		case "-queued":
			opts.AllowQueued = true
		case "-running":
			opts.Running = true
		default:
			if dir != "" {
				ts.Fatalf("usage: checksession [-queued] [-running] DIR")
			}
			dir = a
		}
	}
	if dir == "" {
		ts.Fatalf("usage: checksession [-queued] [-running] DIR")
	}
	err := Check(ts.MkAbs(dir), opts)
	switch {
	case err != nil && !neg:
		ts.Fatalf("session invariants of %s:\n%v", dir, err)
	case err == nil && neg:
		ts.Fatalf("session %s holds every invariant", dir)
	}
}

// Package skillpilot holds what belongs to the whole project rather than to
// one of its packages: the protocol document, embedded so that `master
// protocol` can print it where the sources are not at hand (a farm host
// with only the binaries, an agent that asks how to talk to a session).
// The code is in the packages below: protocol, fsq, runner, master, pool,
// launch, history, mcpserver and the commands in cmd/.
package skillpilot

import _ "embed"

// Protocol is PROTOCOL.md, the normative description of the session
// directory.
//
//go:embed PROTOCOL.md
var Protocol string

// Package master is the client side of the SkillPilot file protocol: it
// submits commands into a session directory, waits for their results,
// answers the questions a running command asks (Session.Send, with an
// expect), cancels, signals, stops, reads and follows output, and keeps the
// runner's lease alive. It talks to the runner only through files (see PROTOCOL.md), so it
// works from another host over a shared filesystem, and it interoperates
// with the Python and Tcl masters in clients/python and clients/tcl.
//
// This package is only the library a flow imports. The master command line
// is package cmd/master/cli; starting runners through a scheduler and pools
// of sessions are packages launch and pool, which build on this one (a
// command a pool moved is still found here: see Command.Resolve). What
// those packages share beyond this API (the session's fsq.Root, seq
// allocation, forward records, error helpers) is in internal/sessionio.
//
// Every exported field whose zero value is not useful as it is says what 0
// means, and means it: a Session's PollInterval, QuickPoll and
// WaitForRunner; SubmitOptions, SendOptions and WaitOptions are all
// optional.
//
// A Session is safe for concurrent use by multiple goroutines; several
// processes (and hosts) may submit to one session at once.
//
// Guarantees: a command file appears in queue/ whole, under a seq no other
// master (of any language, on any host) holds; a control request is never
// written for a runner that is not alive; every wait ends — with the
// result, the caller's deadline, or ErrRunnerNotAlive once no live runner
// was seen for the grace — and a result, output or state file is read
// without following a symlink, blocking on a FIFO or exceeding its bound
// (io_error instead). Errors carry their code and CLI exit status
// (Classify), the same in every master.
package master

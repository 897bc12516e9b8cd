// Package master is the client side of the SkillPilot file protocol: it
// submits commands into a session directory, waits for their results,
// answers the questions a running command asks (Session.Send, with an
// expect), cancels, signals, stops, reads and follows output, and keeps the
// runner's lease alive. It talks to the runner only through files (see PROTOCOL.md), so it
// works from another host over a shared filesystem, and it interoperates
// with the Python and Tcl masters in master/python and master/tcl.
//
// This package is only the library a flow imports. The master command line
// is package cmd/master/cli; starting runners through a scheduler and pools
// of sessions are packages launch and pool, which build on this one (a
// command a pool moved is still found here: see Forward).
//
// A Session is safe for concurrent use by multiple goroutines; several
// processes (and hosts) may submit to one session at once.
package master

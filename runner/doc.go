// Package runner holds one long-lived interactive tool (tclsh, an EDA tool,
// a shell) on a PTY and serves commands dropped as files into a session
// directory, following the SkillPilot file protocol (see PROTOCOL.md).
//
// One goroutine, the one that calls [Runner.Run], owns all of the runner's
// state. The PTY reader, the process waiter, the directory watcher and the
// signal handler only send on channels to it.
package runner

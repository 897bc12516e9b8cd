// Package runner holds one long-lived interactive tool (tclsh, an EDA tool,
// a shell) on a PTY and serves commands dropped as files into a session
// directory, following the SkillPilot file protocol (see PROTOCOL.md).
//
// # Goroutines
//
// One goroutine, the one that calls [Runner.Run], owns all of the runner's
// state (loop.go). Every other goroutine only talks to it through
// channels, and none can block forever on a send once Run has returned:
//
//   - the tool session's reader and waiter (pty.go; a toolSession);
//   - the result writer (results.go), the only code that writes result/;
//   - the queue scanner (scan.go), the directory watcher (fsq.Watch), the
//     syncer (syncer.go) and the spare-file pools (fsq.Spares);
//   - the process starter (pty.go), an OS thread locked for the runner's
//     life so that the tool's parent-death signal fires only when the
//     runner dies;
//   - a send's writer (input.go), one at a time: it writes input into the
//     terminal as fast as the tool reads it, and is cut off (a write
//     deadline) before the runner types anything itself.
//
// Each has a close or stop that waits for it; [Runner.Close] releases them
// all. What the runner measures goes to a [Config.Observer] on the owner
// goroutine (runner/promfile writes it as a Prometheus file, with a
// goroutine of its own outside this package).
//
// # The tool
//
// The tool sits behind the toolSession interface (session.go), with a PTY
// implementation and, in the tests, a pipe-based fake. Time comes from a
// clock (clock.go), fake in the tests. The tool's phases (down, booting,
// init, ready, busy, resync, killing) are types in toolphase.go, each
// holding everything the runner does in that phase. Input for the running
// command (send, signal, resize: PROTOCOL.md section 9.8) is input.go, with
// the terminal's echo and the expect window in echo.go; the fence that
// keeps unread input away from the next command is in driver.go.
package runner

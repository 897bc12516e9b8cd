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
//   - the tool session's reader and waiter (pty.go; a toolTerm);
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
// # Parts
//
// A [Runner] is a few parts, each a type with its own fields and methods
// in its own file(s). They all belong to the owner goroutine, so the
// methods on *Runner that make them work together (an event that a
// command ended, a full disk that ends writes of output) read and set
// their plain fields where that is all there is to it; a part's methods
// are the verbs that do more:
//
//   - toolLife (tool.go, toolctl.go, toolphase.go): the tool process (its
//     toolTerm, nil when none runs), its phase, the counts of starts,
//     deaths and failed starts, sync tokens;
//   - cmdQueue (queue.go, scan.go, pace.go, intake.go): the scanner of queue/, the
//     pending names in running order, the cmd_ids that have a result and
//     the results still being written;
//   - inputQueue (input.go): send and signal requests held for the
//     running command, the write under way, sends waiting for a queued
//     command, the window size;
//   - spoolDisk (disk.go, logs.go): the spool and its buffer, the event log,
//     the spare output files, a full disk's suspension and the reserve;
//   - mailbox (mailbox.go, control.go): the control requests of ctl/;
//   - leaseWatch (lease.go) and the result writer (results.go, with a
//     goroutine of its own).
//
// Small types hold the rest: identity (fixed by Open), layoutState (the
// session's modes and what is wrong with it), runStatus (when state.json
// is rewritten), stopState (how and why the runner stops) and sessionHold
// (is the session still this runner's: lost.go). The phase state.json
// shows is derived from them and the tool's phase in one function
// (phase.go). The running command is a *running (running.go, budget.go,
// progress.go): intake.go takes commands in from queue/, command.go starts
// them and routes their output, finish.go hands their results to the
// result writer. Every session file is reached through the session's
// fsq.Root; structure_test.go checks that, and that no goroutine but the
// owner is handed the Runner.
//
// # The tool
//
// The tool sits behind the toolTerm interface (terminal.go), with a PTY
// implementation and, in the tests, a pipe-based fake. Time comes from a
// clock (clock.go), fake in the tests. The tool's phases (down, booting,
// init, ready, busy, resync, killing) are types in toolphase.go, each
// holding everything the runner does in that phase. Input for the running
// command (send, signal, resize: PROTOCOL.md section 9.8) is input.go, with
// the terminal's echo and the expect window in echo.go; the fence that
// keeps unread input away from the next command is in driver.go.
package runner

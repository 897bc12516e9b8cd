// Package review reads what a finished or live session directory records
// about its past: every result with its archived command file (archive/ or
// log/rejected/), the command still running (inflight/ and state.json), the
// events of log/meta.log, and the size of each output. It works from the
// session's files alone, so it reads a session copied to another host as
// well as one a runner is still writing.
//
// Every file of a session is treated as input that may be hostile: files are
// opened without following symlinks and without blocking (a FIFO), only
// regular files are read, every read is bounded, a directory that is a
// symlink is not entered, and a torn last line of meta.log (a runner killed
// mid-append, or an append in progress) is ignored. What could not be read
// is reported in [Session.Warnings], never silently dropped, and never an
// error for the whole session unless the directory is not a session at all.
//
// Consumers: the timeline report (package review/report), the stand-in
// generator (review/standin) and run comparison (review/diff).
package review

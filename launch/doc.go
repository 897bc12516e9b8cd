// Package launch starts a session's runner as a detached local process or
// as a batch job of the site's scheduler (Slurm, SGE, LSF; package sched),
// waits until it serves, and stops it again, escalating from a stop
// request to the scheduler's cancel and kill (PROTOCOL.md, "Launch and
// pools"). It records the job in state/launch.json under a flock, so two
// launchers never submit twice for one session; a launch of a session that
// is served, or whose job is still queued or running, fails with
// ErrAlreadyLaunched and submits nothing. LaunchArray starts several
// sessions as one job array, StopMany stops several, cancelling the
// elements of one array together.
//
// Its errors are sessionio.CodedError values, so master.Classify gives their
// codes and the CLI's exit codes.
package launch

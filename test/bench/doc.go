// Package bench holds the SkillPilot benchmark suite (make bench). Every
// figure is measured beside its reference in the same run, in alternating
// short rounds, and reported as a ratio; BENCHMARKS.md records a full run.
//
// The references are small, self-contained loops in refs_test.go: the PTY
// floor (a bare Go loop typing into tclsh on a PTY), one-shot tclsh per
// command, and a minimal file-queue loop (inotify + PTY + one fsync'd
// result), which is what the runner is held against.
package bench

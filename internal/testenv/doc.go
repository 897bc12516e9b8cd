// Package testenv is the one test environment of SkillPilot's tests: it
// builds a binary once, starts a runner on a temporary session, skips a
// test locally but fails it under CI=true when something it needs is
// missing, and runs the session-invariant check ([sessioncheck.Check]) when
// a test ends. It is test support only.
//
// The guarantees:
//
//   - [BuildBinary] builds a main package at most once per test process,
//     and at most once per module content across test processes: binaries
//     are kept in a directory keyed by a hash of the module's non-test
//     files, the Go version, the build tags and the build environment, so
//     the runner built for the runner's tests is reused by the MCP server's.
//   - [NeedTool] and [Unavailable] never silently skip under CI=true: a
//     missing tool or facility is a failure there, and a skip elsewhere,
//     naming what to install.
//   - [CheckSession] and [StartRunner] check every session they are given
//     at cleanup, after the runner has stopped; a test that legitimately
//     ends mid-state says so with an explicit reason ([RunnerOptions.NoCheck]
//     or [SkipCheck]), which is logged.
//
// [StartRunner]'s [RunnerProcess] is the one wrapper of a runner process
// in the tests (the runner's own tests and the benchmarks choose how the
// test's end stops it: [RunnerOptions.AtEnd]); [LockedBuffer] is the one
// buffer a process writes while a test reads.
//
// The in-process runner (runner.Open in the test's own process) lives in
// internal/testrunner, which builds on this package; this package does not
// import the runner library, so the runner's own tests can use it.
package testenv

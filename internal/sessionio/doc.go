// Package sessionio is the plumbing the Go master's packages share beyond
// package master's exported API: package master itself, and launch, pool,
// the master CLI (cmd/master/cli) and the MCP server built on it. A flow
// imports package master; nothing here is part of its API.
//
// It holds what those packages need of a session and of one another:
// the session's fsq.Root and the other accessors of a *master.Session
// (Of, set by package master), seq allocation (AllocSeq, PROTOCOL.md
// "Allocating seq") and its background hint rewrites
// (WaitBackgroundWrites), the forward records a pool writes (Forward),
// and the error helpers that make their errors read and classify as
// master's (UsageError, ContextEnd, WithContext, CodedError).
package sessionio

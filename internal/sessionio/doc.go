// Package sessionio is the typed core of the Go master: a session
// directory as package master and the packages built on it reach it
// (Session: its fsq.Root, owner, lock, heartbeat, state, forward records),
// seq allocation (AllocSeq, PROTOCOL.md "Allocating seq"), the forward
// records a pool writes (Forward), and the error helpers that make their
// errors read and classify as master's (UsageError, ContextEnd,
// WithContext, CodedError).
//
// Package master wraps a Session (master.Session) with the waits,
// liveness and requests of its API; launch, pool and the master CLI use
// the Session master.Session.Core returns, with its types. A flow imports
// package master; nothing here is part of its API.
package sessionio

// Package pool groups launched sessions (s00, s01, ...) in one directory,
// spreads commands over them (the less loaded of two sampled at random, or
// pinned by an affinity key), and heals: it moves the queued commands of a
// dead session to a live one, exactly once (a forward record in the dead
// session says where each went, and package master follows it), and
// relaunches dead sessions when the pool allows (PROTOCOL.md, "Launch and
// pools"). Via a scheduler the sessions are launched as one job array; a
// pool grows, shrinks (retired sessions' queued commands move as heal
// moves them) and adapts its size to the work waiting ([Adapter]). The
// Python and Tcl masters select sessions by the same rules.
//
// A Pool's methods are safe for concurrent use, by several processes too.
package pool

package runner

import (
	"cmp"
	"strings"
)

// Seq order and a listing that races with a writer.
//
// A directory listing takes several getdents calls (several READDIR calls
// on NFS), and a file created while it runs may or may not be in it,
// depending on where its name falls in the directory's order. A master
// that writes request 256 and then request 257 can thus be listed as
// {257}: taken alone, 257 would run first, and 256 would be taken after
// it. Any listing that starts after that one ended shows 256 too: 256
// existed before 257, which existed before the first listing ended. So
// when a listing shows something new, the runner lists again and takes
// from the second listing only what sorts no later than the last name
// of the first (their predecessors are all in the second). What sorts
// after it waits for the next look, which comes at once.

// seqKey is a name's place in (seq, name) order.
type seqKey struct {
	seq  int64
	name string
}

func (a seqKey) compare(b seqKey) int {
	return cmp.Or(cmp.Compare(a.seq, b.seq), strings.Compare(a.name, b.name))
}

func (a seqKey) self() seqKey { return a }

// settled returns the entries of second that sort no later than the last
// entry of first, in second's order, and whether second had any beyond
// it (they are left for the next look). With first empty, nothing is
// settled.
func settled[T any](first, second []T, key func(T) seqKey) (take []T, later bool) {
	var last seqKey
	have := false
	for _, e := range first {
		if k := key(e); !have || k.compare(last) > 0 {
			last, have = k, true
		}
	}
	for _, e := range second {
		if have && key(e).compare(last) <= 0 {
			take = append(take, e)
		} else {
			later = true
		}
	}
	return take, later
}

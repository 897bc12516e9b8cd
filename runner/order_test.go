package runner

import (
	"slices"
	"sync"
	"testing"

	"github.com/skillpilot/skillpilot/protocol"
)

func TestSettled(t *testing.T) {
	t.Parallel()
	k := func(s seqKey) seqKey { return s }
	a, b, c, d := seqKey{1, "a"}, seqKey{2, "b"}, seqKey{2, "c"}, seqKey{3, "d"}
	for _, tc := range []struct {
		name          string
		first, second []seqKey
		take          []seqKey
		later         bool
	}{
		{"the first listing missed a predecessor", []seqKey{c}, []seqKey{a, b, c}, []seqKey{a, b, c}, false},
		{"a newcomer in the second waits", []seqKey{a}, []seqKey{a, d}, []seqKey{a}, true},
		{"same name, lower seq", []seqKey{c}, []seqKey{b, c, d}, []seqKey{b, c}, true},
		{"taken meanwhile", []seqKey{a, b}, []seqKey{b}, []seqKey{b}, false},
		{"nothing first", nil, []seqKey{a}, nil, true},
		{"nothing at all", nil, nil, nil, false},
	} {
		take, later := settled(tc.first, tc.second, k)
		if !slices.Equal(take, tc.take) || later != tc.later {
			t.Errorf("%s: settled = %v, %v; want %v, %v", tc.name, take, later, tc.take, tc.later)
		}
	}
}

// hideOnce returns a lister that lists dir for real but, the first time
// a listing shows later, leaves earlier out of it: what a readdir racing
// with a writer that made earlier and then later can return (order.go).
// Until later exists, earlier is left out too, so that no listing shows
// earlier alone.
func hideOnce(earlier, later string) func(string) ([]string, error) {
	var mu sync.Mutex
	hidden := false
	return func(dir string) ([]string, error) {
		names, err := readNames(dir)
		mu.Lock()
		defer mu.Unlock()
		if !hidden {
			hidden = slices.Contains(names, later)
			names = slices.DeleteFunc(names, func(n string) bool { return n == earlier })
		}
		return names, err
	}
}

// Two commands queued before the start, and a first listing of queue/
// that shows only the later one: the earlier still runs first.
func TestSeqOrderListingRace(t *testing.T) {
	t.Parallel()
	h := newFakeHarness(t, nil)
	a := writeCmdQuiet(t, h.dir, 1, "a", "value 1")
	b := writeCmdQuiet(t, h.dir, 2, "b", "value 2")
	h.cfg.listQueue = hideOnce(a, b)
	h.start()
	h.result(a)
	h.result(b)
	var began []string
	for _, e := range h.events() {
		if e.Event == protocol.EvCmdBegin {
			began = append(began, e.CmdID)
		}
	}
	if !slices.Equal(began, []string{"a", "b"}) {
		t.Fatalf("commands began in the order %v; want [a b]", began)
	}
}

// Two sends written one after the other, and a listing of ctl/ that shows
// only the second: the first is still delivered first.
func TestRequestOrderListingRace(t *testing.T) {
	t.Parallel()
	n1, n2 := protocol.RequestName(1, "s1"), protocol.RequestName(2, "s2")
	h := newFakeHarness(t, nil, func(c *Config) { c.listCtl = hideOnce(n1, n2) }).start()
	a := h.submit("gets\ngets\nvalue done")
	tool := h.waitTool(1)
	waitEvent(t, tool, "gets")
	h.send(1, "c1", "x\n", nil)
	h.send(2, "c1", "y\n", nil)
	for _, n := range []string{n1, n2} {
		if r := h.reply(n); r.Outcome != protocol.OutcomeDelivered {
			t.Fatalf("%s: %+v", n, r)
		}
	}
	h.result(a)
	if got := h.output(a); got != "got x\ngot y\n" {
		t.Fatalf("output %q; want the sends in seq order", got)
	}
}

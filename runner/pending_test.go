package runner

import (
	"testing"
	"time"
)

// A parked entry that holds (a file still being written) keeps every
// entry that sorts after it from being taken; one that does not hold, or
// one that sorts after the head, keeps nothing back (PROTOCOL.md 6.1).
func TestPendingHold(t *testing.T) {
	t.Parallel()
	later := time.Now().Add(time.Hour)
	for _, tc := range []struct {
		name   string
		parked []int64 // seqs parked, in this order
		holds  bool
		ready  []int64
		want   int64 // the seq pop gives, 0: none
	}{
		{"nothing parked", nil, false, []int64{2, 3}, 2},
		{"an earlier file still being written holds the rest", []int64{1}, true, []int64{2, 3}, 0},
		{"an earlier file parked without holding", []int64{1}, false, []int64{2, 3}, 2},
		{"a later file still being written holds nothing before it", []int64{5}, true, []int64{2, 3}, 2},
		{"the lowest of several holding files counts", []int64{9, 1}, true, []int64{2}, 0},
	} {
		p := newPending()
		for _, s := range tc.parked {
			name := "cmd_" + string(rune('0'+s)) + "_p.json"
			p.add(name, s, "")
			e := p.pop()
			p.deferUntil(e, later, tc.holds)
		}
		for _, s := range tc.ready {
			p.add("cmd_"+string(rune('0'+s))+"_r.json", s, "")
		}
		var got int64
		if e := p.pop(); e != nil {
			got = e.seq
		}
		if got != tc.want {
			t.Errorf("%s: pop gave seq %d, want %d", tc.name, got, tc.want)
		}
	}
	// Once the file is complete (promoted, then taken), the rest follows.
	p := newPending()
	p.add("cmd_1_a.json", 1, "")
	p.deferUntil(p.pop(), time.Now(), true)
	p.add("cmd_2_b.json", 2, "")
	if e := p.pop(); e != nil {
		t.Fatalf("took %s while cmd_1_a.json was held", e.name)
	}
	p.promote(time.Now().Add(time.Second))
	for _, want := range []string{"cmd_1_a.json", "cmd_2_b.json"} {
		if e := p.pop(); e == nil || e.name != want {
			t.Fatalf("pop gave %v, want %s", e, want)
		}
	}
}

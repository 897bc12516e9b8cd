package runner

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
)

// The retention decisions are functions of plain values (retention.go).

func kept(n int, at time.Time, step time.Duration) []keptEntry {
	out := make([]keptEntry, n)
	for i := range out {
		out[i] = keptEntry{name: fmt.Sprintf("cmd_%d_c%d.json", i+1, i+1), id: fmt.Sprintf("c%d", i+1),
			at: at.Add(time.Duration(i) * step), start: int64(i) * 100, end: int64(i)*100 + 50}
	}
	return out
}

func TestToPrune(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	old := now.Add(-10 * 24 * time.Hour)
	cases := []struct {
		name     string
		pol      retentionPolicy
		kept     []keptEntry
		spoolEnd int64
		drop     int
		want     int
		why      string
	}{
		{"nothing set", retentionPolicy{}, kept(5, old, time.Hour), 500, noDrop, 0, ""},
		{"count", retentionPolicy{keepLast: 3}, kept(5, old, time.Hour), 500, noDrop, 2, whyCount},
		{"count within the grace", retentionPolicy{keepLast: 3, grace: time.Hour}, kept(5, now.Add(-30*time.Minute), time.Minute), 500, noDrop, 0, ""},
		{"the grace stops the run", retentionPolicy{keepLast: 1, grace: time.Hour}, kept(5, now.Add(-2*time.Hour), 30*time.Minute), 500, noDrop, 3, whyCount},
		{"age", retentionPolicy{keepAge: 7 * 24 * time.Hour}, kept(5, old, 24*time.Hour), 500, noDrop, 4, whyAge},
		{"age and count: whichever says more", retentionPolicy{keepAge: 7 * 24 * time.Hour, keepLast: 4}, kept(5, old, 24*time.Hour), 500, noDrop, 4, whyAge},
		{"spool cap", retentionPolicy{maxSpool: 250}, kept(5, old, time.Minute), 500, noDrop, 3, whySpool},
		{"meta cap: the generation to drop", retentionPolicy{maxMeta: 1 << 20}, func() []keptEntry {
			k := kept(4, old, time.Minute)
			k[0].metaGen, k[1].metaGen, k[2].metaGen, k[3].metaGen = 0, 0, 1, 1
			return k
		}(), 500, 0, 2, whyMeta},
		{"meta without a pending rotation", retentionPolicy{maxMeta: 1 << 20}, kept(4, old, time.Minute), 500, noDrop, 0, ""},
		{"strictly oldest first", retentionPolicy{keepAge: time.Hour}, func() []keptEntry {
			k := kept(3, old, 0)
			k[0].at = now // The oldest by order is young: nothing after it leaves either.
			return k
		}(), 500, noDrop, 0, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n, why := c.pol.toPrune(c.kept, now, c.spoolEnd, c.drop)
			if n != c.want || len(why) != n {
				t.Fatalf("toPrune = %d %v, want %d", n, why, c.want)
			}
			if n > 0 && why[n-1] != c.why {
				t.Errorf("why %v, want the last %q", why, c.why)
			}
		})
	}
}

func TestToPruneBatchBound(t *testing.T) {
	now := time.Now()
	n, _ := retentionPolicy{keepLast: 1}.toPrune(kept(3*pruneBatch, now.Add(-time.Hour), 0), now, 0, noDrop)
	if n != pruneBatch {
		t.Fatalf("%d, want one batch of %d", n, pruneBatch)
	}
}

func TestSpoolCut(t *testing.T) {
	for _, c := range []struct{ old, from, size, want int64 }{
		{0, 0, 10 << 20, 0},
		{0, punchStep - 1, 10 << 20, 0},
		{0, punchStep, 10 << 20, punchStep},
		{0, 3*punchStep + 7, 10 << 20, 3 * punchStep},
		{0, 5 * punchStep, 2*punchStep + 1, 2 * punchStep}, // Never past what is on disk.
		{4 * punchStep, 3 * punchStep, 10 << 20, 4 * punchStep},
	} {
		if got := spoolCut(c.old, c.from, c.size); got != c.want {
			t.Errorf("spoolCut(%d, %d, %d) = %d, want %d", c.old, c.from, c.size, got, c.want)
		}
	}
}

func TestMetaBlocked(t *testing.T) {
	k := kept(3, time.Now(), 0)
	k[0].metaGen, k[1].metaGen, k[2].metaGen = 1, 2, 2
	for _, c := range []struct {
		gens []int
		drop int
		want bool
	}{
		{nil, 0, false},
		{nil, 1, true},
		{[]int{0}, 0, true}, // A command begun in the generation to drop.
		{[]int{3}, 0, false},
	} {
		if got := metaBlocked(k, c.gens, c.drop); got != c.want {
			t.Errorf("metaBlocked(gens %v, drop %d) = %v", c.gens, c.drop, got)
		}
	}
}

func TestPolicySegment(t *testing.T) {
	if s := (retentionPolicy{}).metaSegment(); s != DefaultMetaSegment {
		t.Errorf("default segment %d", s)
	}
	if s := (retentionPolicy{maxMeta: 10 << 20}).metaSegment(); s != 5<<20 {
		t.Errorf("half of the cap: %d", s)
	}
	if (retentionPolicy{grace: time.Hour}).on() {
		t.Error("a grace alone turns retention on")
	}
}

func TestPrunedIndex(t *testing.T) {
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	line := func(name string) []byte {
		return protocol.PrunedEntry{Name: name, Status: protocol.StatusOK, EndTS: at}.AppendLine(nil)
	}
	old := append(line("cmd_0000000001_a.json"), line("cmd_0000000002_b.json")...)
	cur := append(line("cmd_3_c.json"), []byte("cmd_0000000004_d.json ok 2026-")...) // A torn last line.
	var p prunedIndex
	p.load(cur, old)
	for _, c := range []struct {
		id   string
		name string
	}{{"a", "cmd_0000000001_a.json"}, {"b", "cmd_0000000002_b.json"}, {"c", "cmd_3_c.json"}, {"d", ""}, {"cmd", ""}, {"x", ""}} {
		e, ok := p.lookup(c.id)
		if ok != (c.name != "") || e.Name != c.name {
			t.Errorf("lookup(%q) = %q %v, want %q", c.id, e.Name, ok, c.name)
		}
	}
	if p.lines() != 1 {
		t.Errorf("current generation holds %d lines, want 1", p.lines())
	}
	p.appendEntries([]protocol.PrunedEntry{{Name: "cmd_0000000005_e.json", Status: protocol.StatusError, EndTS: at}})
	if e, ok := p.lookup("e"); !ok || e.Status != protocol.StatusError || !e.EndTS.Equal(at) {
		t.Errorf("appended entry: %+v %v", e, ok)
	}
	p.rotate()
	if _, ok := p.lookup("a"); ok {
		t.Error("the oldest generation survived a rotation")
	}
	if _, ok := p.lookup("e"); !ok {
		t.Error("the current generation was lost at a rotation")
	}
	// Two cmd_ids with one hash: each is still told apart.
	p.gens[1].at[idHash("e")] = -1
	if _, ok := p.lookup("e"); !ok {
		t.Error("an ambiguous hash hides its cmd_id")
	}
}

func TestPrunedLineRoundTrip(t *testing.T) {
	at := time.Date(2026, 12, 1, 1, 2, 3, 4_000_000, time.UTC)
	for _, e := range []protocol.PrunedEntry{
		{Name: "cmd_0000000042_0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b.json", Status: protocol.StatusTimeout, EndTS: at},
		{Name: "cmd_7_x.json", Status: "", EndTS: time.Time{}},
	} {
		b := e.AppendLine(nil)
		got, err := protocol.ParsePrunedLine(b[:len(b)-1])
		if err != nil {
			t.Fatalf("%q: %v", b, err)
		}
		want := e
		if want.Status == "" {
			want.Status = "unknown"
		}
		if got.Name != want.Name || got.Status != want.Status || !got.EndTS.Equal(want.EndTS) {
			t.Errorf("%q read back as %+v", b, got)
		}
	}
	for _, bad := range []string{"", "cmd_1_x.json ok", "notes.txt ok -", "cmd_1_x.json ok yesterday"} {
		if _, err := protocol.ParsePrunedLine([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	data := slices.Concat(
		protocol.PrunedEntry{Name: "cmd_9_ab.json", Status: protocol.StatusOK}.AppendLine(nil),
		protocol.PrunedEntry{Name: "cmd_5_b.json", Status: protocol.StatusOK}.AppendLine(nil),
		protocol.PrunedEntry{Name: "cmd_3_b.json", Status: protocol.StatusError}.AppendLine(nil))
	if e, ok := protocol.FindPruned(data, "", "b"); !ok || e.Name != "cmd_3_b.json" {
		t.Errorf("by cmd_id: %+v %v, want the lowest seq, never a_b or ab", e, ok)
	}
	if e, ok := protocol.FindPruned(data, "cmd_5_b.json", ""); !ok || e.Name != "cmd_5_b.json" {
		t.Errorf("by name: %+v %v", e, ok)
	}
	if _, ok := protocol.FindPruned(data, "cmd_4_b.json", ""); ok {
		t.Error("a name not in the index found")
	}
}

package runner

// Retention (PROTOCOL.md section 23): which commands' files leave the
// session, when, and in what order. The decisions are functions of plain
// values (retentionPolicy.toPrune, spoolCut, metaBlocked); the pruner
// (pruner.go) carries them out on a goroutine of its own.

import (
	"time"

	"github.com/skillpilot/skillpilot/protocol"
)

// Retention defaults.
const (
	// DefaultPruneGrace is how young a result may be and still never be
	// pruned: a master waiting for a command reads its result and output
	// well within it.
	DefaultPruneGrace = 5 * time.Minute
	// DefaultKeepIDs is how many pruned cmd_ids the index remembers at
	// least (it holds up to twice as many).
	DefaultKeepIDs = 100_000
	// MaxKeepIDs bounds --keep-ids: a generation of the index holds up to
	// that many lines of at most ~190 bytes (a 128-byte cmd_id), within
	// protocol.MaxPrunedFile.
	MaxKeepIDs = 2_000_000
	// DefaultMetaSegment is the size at which log/meta.log is rotated when
	// no --max-meta-bytes is given (retention on).
	DefaultMetaSegment = 64 << 20
	// minMetaSegment bounds how small a rotation can make meta.log.
	minMetaSegment = 64 << 10
	// pruneBatch bounds one job of the pruner; minBatch is the least a
	// job triggered by a result carries (the heartbeat takes any number).
	pruneBatch = 4096
	minBatch   = 64
	// punchStep is the least the spool's cut moves by (whole blocks).
	punchStep = 1 << 20
)

// retentionPolicy is what the runner's flags say (Config.Keep…).
type retentionPolicy struct {
	keepAge  time.Duration // a result leaves once older (0: no age limit)
	keepLast int           // at most this many results are kept (0: no count limit)
	grace    time.Duration // no result younger than this leaves, whatever else says
	keepIDs  int           // lines per generation of the pruned index
	maxSpool int64         // kept bytes of log/session.out (0: no cap)
	maxMeta  int64         // bytes of meta.log and meta.log.1 together (0: no cap, segments of DefaultMetaSegment)
}

// on reports whether retention removes anything at all.
func (p retentionPolicy) on() bool {
	return p.keepAge > 0 || p.keepLast > 0 || p.maxSpool > 0 || p.maxMeta > 0
}

// metaSegment is the size at which meta.log is rotated: half the cap, so
// that the two generations together stay within it.
func (p retentionPolicy) metaSegment() int64 {
	if p.maxMeta > 0 {
		return max(p.maxMeta/2, minMetaSegment)
	}
	return DefaultMetaSegment
}

// keptEntry is a command whose result is in result/ and whose files
// retention will remove one day, oldest first.
type keptEntry struct {
	name    string          // result/<name>
	id      string          // its cmd_id ("" for a name that does not parse: not indexed)
	at      time.Time       // what its age is measured from: when this runner committed its result, or, for a result found at start, its end_ts (never later than the runner's clock then)
	ended   time.Time       // its result's end_ts, for the pruned index (at when the result has none)
	indexed bool            // found at start with its line already in the pruned index (a crash after the line)
	status  protocol.Status // for the pruned index
	start   int64           // its range of log/session.out, -1 when it has none
	end     int64
	metaGen int    // the event log generation its cmd_begin (or only event) is in
	cmdPath string // archive/<name> or log/rejected/<name> ("" none)
	outPath string // output/<name>.out ("" none)
}

// Reasons a command leaves (the pruned event counts them).
const (
	whyAge   = "age"
	whyCount = "count"
	whySpool = "spool"
	whyMeta  = "meta"
)

// toPrune decides how many of the oldest kept entries leave now (at most
// pruneBatch), and why each does. Entries leave strictly oldest first: the
// first that may stay ends the run. None younger than the grace leaves.
// spoolEnd is the spool's size; dropGen is the event log generation a
// pending hard rotation (an explicit --max-meta-bytes) must delete, or
// noDrop.
func (p retentionPolicy) toPrune(kept []keptEntry, now time.Time, spoolEnd int64, dropGen int) (n int, why []string) {
	// from[i] is the lowest spool start of the entries at i or after that
	// have a range (spoolEnd when none does): what the spool must keep
	// from once the entries before i are gone. Made when first needed.
	var from []int64
	for i := 0; i < len(kept) && n < pruneBatch; i++ {
		e := &kept[i]
		if now.Sub(e.at) < p.grace {
			break
		}
		reason := ""
		switch {
		case p.keepAge > 0 && now.Sub(e.at) >= p.keepAge:
			reason = whyAge
		case p.keepLast > 0 && len(kept)-i > p.keepLast:
			reason = whyCount
		case p.maxMeta > 0 && e.metaGen <= dropGen:
			reason = whyMeta
		case p.maxSpool > 0 && e.start >= 0 && spoolEnd-e.start > p.maxSpool:
			reason = whySpool
		case p.maxSpool > 0 && e.start < 0 && spoolEnd-suffixFrom(&from, kept, spoolEnd)[i] > p.maxSpool:
			reason = whySpool // No range of its own, but an older one's must go.
		}
		if reason == "" {
			break
		}
		n++
		why = append(why, reason)
	}
	return n, why
}

// noDrop is a dropGen below every generation.
const noDrop = -1 << 30

// firstStart is the lowest spool start of the entries of kept that have a
// range, or end when none has. Not the first entry's: kept is in the order
// of age, and results written by runners whose clocks disagreed (a session
// restarted on another host) are not in spool order.
func firstStart(kept []keptEntry, end int64) int64 {
	from := end
	for i := range kept {
		if kept[i].start >= 0 {
			from = min(from, kept[i].start)
		}
	}
	return from
}

// suffixFrom returns (*from made on first use) the lowest spool start of
// kept[i:] for every i, end when none has a range.
func suffixFrom(from *[]int64, kept []keptEntry, end int64) []int64 {
	if *from != nil {
		return *from
	}
	f := make([]int64, len(kept)+1)
	f[len(kept)] = end
	for i := len(kept) - 1; i >= 0; i-- {
		f[i] = f[i+1]
		if kept[i].start >= 0 {
			f[i] = min(f[i], kept[i].start)
		}
	}
	*from = f
	return f
}

// spoolCut is where the spool may be cut: below the first byte any kept
// or unfinished command needs (from), never past what is on disk (size),
// aligned down to whole punchStep units. It returns the old cut when the
// cut would not move by a whole unit.
func spoolCut(old, from, size int64) int64 {
	c := min(from, size) / punchStep * punchStep
	if c <= old {
		return old
	}
	return c
}

// metaBlocked reports whether a rotation that deletes generation dropGen
// must wait: a kept entry, or a command begun and not yet kept (gens),
// still has its events there.
func metaBlocked(kept []keptEntry, gens []int, dropGen int) bool {
	for _, g := range gens {
		if g <= dropGen {
			return true
		}
	}
	for i := range kept {
		if kept[i].metaGen <= dropGen {
			return true
		}
	}
	return false
}

package runner

import (
	"bytes"
	"hash/fnv"

	"github.com/skillpilot/skillpilot/protocol"
)

// prunedIndex is the runner's memory of log/pruned.log and
// log/pruned.log.1 (PROTOCOL.md section 23): the cmd_ids whose commands
// retention removed, so that they are still refused as duplicates. Each
// generation is the file's bytes and a map from a 64-bit hash of each
// cmd_id to where its line starts; a hit is confirmed against the line, so
// a hash collision never refuses a new cmd_id. A cmd_id whose hash two
// lines share (astronomically rare) is found by a scan of the generation.
// It is owned by the Run goroutine.
type prunedIndex struct {
	gens [2]prunedGen // [0]: log/pruned.log (appended to), [1]: log/pruned.log.1
}

type prunedGen struct {
	data  []byte
	at    map[uint64]int32 // hash of a cmd_id → offset of its line in data (-1: several lines)
	lines int
}

func idHash(cmdID string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(cmdID))
	return h.Sum64()
}

// load takes the two files' bytes (either may be nil). A torn last line of
// the current file is cut (the pruner appends whole lines and repairs the
// file the same way when it opens it).
func (p *prunedIndex) load(cur, old []byte) {
	p.gens[1] = newPrunedGen(old)
	p.gens[0] = newPrunedGen(cur)
}

func newPrunedGen(data []byte) prunedGen {
	if i := bytes.LastIndexByte(data, '\n'); i+1 < len(data) {
		data = data[:i+1]
	}
	g := prunedGen{data: data, at: map[uint64]int32{}}
	for off := 0; off < len(data); {
		i := bytes.IndexByte(data[off:], '\n')
		g.addLine(data[off:off+i], int32(off))
		off += i + 1
	}
	return g
}

// addLine indexes the line at off (its bytes without the newline).
func (g *prunedGen) addLine(line []byte, off int32) {
	sp := bytes.IndexByte(line, ' ')
	if sp <= 0 {
		return
	}
	_, id, err := protocol.ParseCommandName(string(line[:sp]))
	if err != nil {
		return
	}
	h := idHash(id)
	if _, dup := g.at[h]; dup {
		g.at[h] = -1
	} else {
		g.at[h] = off
	}
	g.lines++
}

// appendEntries records entries the pruner is writing to the current file.
func (p *prunedIndex) appendEntries(es []protocol.PrunedEntry) {
	g := &p.gens[0]
	for _, e := range es {
		off := len(g.data)
		g.data = e.AppendLine(g.data)
		g.addLine(g.data[off:len(g.data)-1], int32(off))
	}
}

// rotate makes the current generation the old one (the old one is
// forgotten) and starts an empty one, as the pruner does with the files.
func (p *prunedIndex) rotate() {
	p.gens[1] = p.gens[0]
	p.gens[0] = prunedGen{at: map[uint64]int32{}}
}

// lines is how many lines the current generation holds.
func (p *prunedIndex) lines() int { return p.gens[0].lines }

// find returns the line of cmdID's command in a generation (name set:
// of that command file), if there is one. A hash two lines share is
// resolved by a scan of the generation.
func (g *prunedGen) find(cmdID, name string) (protocol.PrunedEntry, bool) {
	off, ok := g.at[idHash(cmdID)]
	switch {
	case !ok:
		return protocol.PrunedEntry{}, false
	case off < 0:
		if name != "" {
			return protocol.FindPruned(g.data, name, "")
		}
		return protocol.FindPruned(g.data, "", cmdID)
	}
	line := g.data[off:]
	if j := bytes.IndexByte(line, '\n'); j >= 0 {
		line = line[:j]
	}
	e, err := protocol.ParsePrunedLine(line)
	if err != nil {
		return protocol.PrunedEntry{}, false
	}
	if _, id, _ := protocol.ParseCommandName(e.Name); id != cmdID || (name != "" && e.Name != name) {
		return protocol.PrunedEntry{}, false
	}
	return e, true
}

// lookup returns the pruned command with cmdID (the newest generation
// first), if there is one.
func (p *prunedIndex) lookup(cmdID string) (protocol.PrunedEntry, bool) {
	for i := range p.gens {
		if e, ok := p.gens[i].find(cmdID, ""); ok {
			return e, true
		}
	}
	return protocol.PrunedEntry{}, false
}

// hasName reports whether the index holds a line for the command file
// name, in either generation. A cmd_id may have several lines (a command
// and a duplicate_cmd_id refusal of a retry, pruned in turn, perhaps into
// different generations): each name is looked for, not the cmd_id's
// first line.
func (p *prunedIndex) hasName(name string) bool {
	_, id, err := protocol.ParseCommandName(name)
	if err != nil {
		return false
	}
	for i := range p.gens {
		if _, ok := p.gens[i].find(id, name); ok {
			return true
		}
	}
	return false
}

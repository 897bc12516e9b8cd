package conformance

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/rogpeppe/go-internal/txtar"
	"github.com/skillpilot/skillpilot/internal/sessioncheck"
)

// Scenario is one scenarios/*.txtar file.
type Scenario struct {
	Name     string
	Comment  string
	Requires []string             // runner flags the scenario needs
	Check    sessioncheck.Options // what the invariant check at the end is told ("check: queued")
	NoCheck  string               // why the session is not checked at the end ("nocheck: reason")
	Pool     bool                 // "layout: pool": the session is s00 of a pool directory (pool.json beside it)
	Masters  []string             // "masters: go cli ...": only these masters run it (default: all)
	Steps    []Step               // in order
	Files    map[string][]byte    // other files of the archive, by name
}

// Step is one line of a scenario's steps.
type Step struct {
	Line   int
	Kind   string   // harness command, or ">", "&>", "<-"
	Args   []string // harness arguments, or the master op and its K=V
	Expect []string // K=V, K~=V or K=>NAME
}

// LoadScenarios reads every *.txtar in dir, sorted by name.
func LoadScenarios(dir string) ([]Scenario, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.txtar"))
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	var out []Scenario
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		sc, err := ParseScenario(strings.TrimSuffix(filepath.Base(p), ".txtar"), data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		out = append(out, sc)
	}
	return out, nil
}

// ParseScenario parses a scenario archive.
func ParseScenario(name string, data []byte) (Scenario, error) {
	a := txtar.Parse(data)
	sc := Scenario{Name: name, Comment: string(a.Comment), Files: map[string][]byte{}}
	for _, l := range strings.Split(sc.Comment, "\n") {
		l = strings.TrimSpace(l)
		if r, ok := strings.CutPrefix(l, "requires:"); ok {
			sc.Requires = append(sc.Requires, strings.Fields(r)...)
		}
		if r, ok := strings.CutPrefix(l, "layout:"); ok {
			if strings.TrimSpace(r) != "pool" {
				return sc, fmt.Errorf("layout: only pool is known")
			}
			sc.Pool = true
		}
		if r, ok := strings.CutPrefix(l, "masters:"); ok {
			sc.Masters = strings.Fields(r)
		}
		if r, ok := strings.CutPrefix(l, "nocheck:"); ok {
			if sc.NoCheck = strings.TrimSpace(r); sc.NoCheck == "" {
				return sc, fmt.Errorf("nocheck: needs a reason")
			}
		}
		if r, ok := strings.CutPrefix(l, "check:"); ok {
			for _, w := range strings.Fields(strings.SplitN(r, "(", 2)[0]) {
				switch w {
				case "queued": // Commands may be left in queue/ with no runner to serve them.
					sc.Check.AllowQueued = true
				case "crashed": // The last runner was killed: what it was doing is left as a live runner's would be.
					sc.Check.Running = true
				default:
					return sc, fmt.Errorf("check: unknown word %q (queued, crashed)", w)
				}
			}
		}
	}
	var steps []byte
	for _, f := range a.Files {
		if f.Name == "steps" {
			steps = f.Data
			continue
		}
		sc.Files[f.Name] = f.Data
	}
	if steps == nil {
		return sc, fmt.Errorf("no steps file")
	}
	for i, line := range strings.Split(string(steps), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		words, err := splitWords(line)
		if err != nil {
			return sc, fmt.Errorf("steps line %d: %w", i+1, err)
		}
		st := Step{Line: i + 1, Kind: words[0], Args: words[1:]}
		switch st.Kind {
		case ">", "&>":
			if n := indexOf(st.Args, "->"); n >= 0 {
				st.Args, st.Expect = st.Args[:n], st.Args[n+1:]
			}
			if len(st.Args) == 0 {
				return sc, fmt.Errorf("steps line %d: no master op", i+1)
			}
		case "<-":
			st.Args, st.Expect = nil, st.Args
		}
		sc.Steps = append(sc.Steps, st)
	}
	return sc, nil
}

func indexOf(s []string, w string) int {
	for i, x := range s {
		if x == w {
			return i
		}
	}
	return -1
}

// splitWords splits a step line at blanks. A word or the value of a K=V
// word may be Go-quoted ("a b\n") or single-quoted (raw, 'a "b"').
func splitWords(line string) ([]string, error) {
	var words []string
	for line = strings.TrimLeft(line, " \t"); line != ""; line = strings.TrimLeft(line, " \t") {
		var w strings.Builder
		for line != "" && line[0] != ' ' && line[0] != '\t' {
			switch line[0] {
			case '"':
				q, err := strconv.QuotedPrefix(line)
				if err != nil {
					return nil, fmt.Errorf("bad quoted string at %q", line)
				}
				s, _ := strconv.Unquote(q)
				w.WriteString(s)
				line = line[len(q):]
			case '\'':
				end := strings.IndexByte(line[1:], '\'')
				if end < 0 {
					return nil, fmt.Errorf("unterminated ' at %q", line)
				}
				w.WriteString(line[1 : end+1])
				line = line[end+2:]
			default:
				w.WriteByte(line[0])
				line = line[1:]
			}
		}
		words = append(words, w.String())
	}
	return words, nil
}

package runner

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// What the runner's structure must keep, checked on its non-test source
// (go/parser, go/ast) by TestStructure. An earlier version enforced that a
// part's fields were read only by its own methods; that bought getter and
// setter pairs (30% of the runner's functions were one line), not safety:
// every part lives on the one owner goroutine, so reading a field where it
// is needed is as safe as calling a method that returns it. What does
// matter, and what this test checks, is:
//
//   - the state is the owner goroutine's: every goroutine the package
//     starts is listed here with why, and none of them is handed the
//     Runner (no *Runner reachable from a go statement), so nothing but
//     the owner touches its fields (the race detector then checks the
//     channels and atomics these goroutines use);
//   - the state.json phase is derived in one place: phase.go alone names
//     this runner's phases, and only showPhase records what was shown;
//   - session files are reached only through the session's fsq.Root
//     (which never follows a symlink and never leaves the session): no
//     path-based file call of package os, and of fsq only what needs no
//     session path, outside the listed exceptions;
//   - the owner's time comes from its clock (clock.go), so that the fake
//     clock governs every deadline in unit tests: package time's clock
//     reads, sleeps and timers appear only in clock.go and in the listed
//     functions of the result writer's and the syncer's own goroutines,
//     which pace the disk in real time;
//   - the Runner struct stays small.

// maxRunnerFields bounds Runner's fields.
const maxRunnerFields = 30

// goroutines lists the functions that may start a goroutine, and why.
// None may hand it the Runner.
var goroutines = map[string]string{
	"newProcStarter":       "the PTY starter's thread, locked for Setpgid/Setctty (pty.go); it handles start requests only",
	"startPTY":             "the tool's output reader and its waiter: they hand chunks and the exit over channels",
	"ptyTerm.Input":        "cuts a typed input's write off when abort closes; it touches only the terminal",
	"toolLife.startInput":  "types input of unbounded size without blocking the owner; it reports on a channel",
	"typist.start":         "types what the terminal could not take at once, without blocking the owner; it reports on a channel",
	"newScanner":           "lists queue/ (costly on a large queue); names come back on a channel",
	"newResultWriter":      "the result writer: commits results from its own jobs and reports on channels",
	"resultWriter.syncLag": "flushes lagging outputs (one fsync, or one syncfs for several), for the result writer",
	"resultWriter.commit":  "fsyncs a batch's outputs in parallel, for the result writer",
	"newSyncer":            "the syncer: makes the log and directories durable in rounds the owner rings",
	"newPruner":            "retention's pruner: writes log/pruned.log and removes old commands' files from its own jobs, reports on a channel",
}

// osFileCalls are the path-based file calls of package os that would
// reach session files around the root.
var osFileCalls = []string{"Open", "OpenFile", "Create", "ReadFile", "WriteFile", "Remove", "RemoveAll", "Rename",
	"Mkdir", "MkdirAll", "Lstat", "Stat", "ReadDir", "Chmod", "Chown", "Lchown", "Chtimes", "Truncate", "Symlink",
	"Link", "Readlink", "CreateTemp", "MkdirTemp", "DirFS"}

// osFileExceptions lists the functions that may make those calls, and why.
var osFileExceptions = map[string]string{
	"createSession":    "the session directory itself, made before there is a root to make it through",
	"readStat":         "/proc, not the session",
	"killPreviousTool": "/proc, not the session",
	"readActivity":     "/proc, not the session",
	"otherThreads":     "/proc, not the session",
	"treeOf":           "/proc, not the session",
	"readerOf":         "reopens a file already open through the root, by its descriptor (/proc/self/fd)",
	"readInit":         "the user's --init script, outside the session (non-blocking, bounded), copied for a line driver",
}

// fsqFuncs are the package-level functions of fsq the runner may call:
// none of them takes a path inside the session.
var fsqFuncs = map[string]bool{
	"OpenRoot": true, // the session's root itself
	"Watch":    true, // an inotify watch (or a poll) of queue/ and ctl/: it reads and writes nothing
	"FSTypeOf": true, // a statfs result's filesystem type
	"FileType": true, // names a FileInfo's type, for messages
	"SameFile": true, // compares two FileInfos
}

// timeCalls are package time's clock reads, sleeps and timers.
var timeCalls = []string{"Now", "Since", "Until", "Sleep", "After", "AfterFunc", "NewTimer", "NewTicker", "Tick"}

// timeExceptions lists the functions outside clock.go that may use them,
// and why: none runs on the owner goroutine.
var timeExceptions = map[string]string{
	"resultWriter.run":       "the result writer's own goroutine: paces fsyncs of lagging outputs",
	"resultWriter.commitAll": "the result writer's own goroutine: waits before retrying a commit",
	"resultWriter.move":      "the result writer's own goroutine: waits before retrying a rename",
	"syncer.run":             "the syncer's own goroutine: paces its rounds",
}

// phaseFile is the one file that names this runner's phases.
const phaseFile = "phase.go"

// phaseReaders lists functions outside phaseFile that may name a phase
// constant, and why.
var phaseReaders = map[string]string{
	"Runner.acquire": "reads the phase in another runner's heartbeat",
	"heartbeatMoves": "reads the phase in another runner's heartbeat",
}

// src is the runner package's non-test source, parsed.
type src struct {
	fset    *token.FileSet
	files   []*ast.File
	structs map[string]map[string]string // type -> field -> type name (pointer stripped; "" when not a named type)
	methods map[string]map[string]string // type -> method -> result type name
	funcs   map[string]string            // function -> result type name
}

func parseRunner(t *testing.T) *src {
	t.Helper()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	s := &src{fset: token.NewFileSet(), structs: map[string]map[string]string{}, methods: map[string]map[string]string{}, funcs: map[string]string{}}
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		data, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(s.fset, n, data, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		if f.Name.Name != "runner" {
			continue
		}
		s.files = append(s.files, f)
	}
	if len(s.files) == 0 {
		t.Fatal("no source files")
	}
	for _, f := range s.files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				for _, sp := range d.Specs {
					ts, ok := sp.(*ast.TypeSpec)
					if !ok {
						continue
					}
					st, ok := ts.Type.(*ast.StructType)
					if !ok {
						continue
					}
					fields := map[string]string{}
					for _, fl := range st.Fields.List {
						tn := typeName(fl.Type)
						if len(fl.Names) == 0 { // Embedded.
							fields[tn] = tn
						}
						for _, id := range fl.Names {
							fields[id.Name] = tn
						}
					}
					s.structs[ts.Name.Name] = fields
				}
			case *ast.FuncDecl:
				res := ""
				if d.Type.Results != nil && len(d.Type.Results.List) > 0 {
					res = typeName(d.Type.Results.List[0].Type)
				}
				if recv := recvType(d); recv != "" {
					if s.methods[recv] == nil {
						s.methods[recv] = map[string]string{}
					}
					s.methods[recv][d.Name.Name] = res
				} else {
					s.funcs[d.Name.Name] = res
				}
			}
		}
	}
	return s
}

// typeName is the name of a type expression, pointers stripped ("" when
// it is not a named type of this package).
func typeName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return typeName(e.X)
	case *ast.Ident:
		return e.Name
	case *ast.ParenExpr:
		return typeName(e.X)
	}
	return ""
}

func recvType(d *ast.FuncDecl) string {
	if d.Recv == nil || len(d.Recv.List) == 0 {
		return ""
	}
	return typeName(d.Recv.List[0].Type)
}

func funcName(d *ast.FuncDecl) string {
	if r := recvType(d); r != "" {
		return r + "." + d.Name.Name
	}
	return d.Name.Name
}

// scope is what one function's identifiers are known to be: a
// flow-insensitive guess, from declarations and assignments, good enough
// for code that names a part's value c, r, d, q.
type scope map[string]string

func (s *src) typeOf(sc scope, e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return sc[e.Name]
	case *ast.ParenExpr:
		return s.typeOf(sc, e.X)
	case *ast.StarExpr:
		return s.typeOf(sc, e.X)
	case *ast.UnaryExpr:
		if e.Op == token.AND {
			return s.typeOf(sc, e.X)
		}
	case *ast.CompositeLit:
		return typeName(e.Type)
	case *ast.SelectorExpr:
		if t := s.typeOf(sc, e.X); t != "" {
			if ft, ok := s.structs[t][e.Sel.Name]; ok {
				return ft
			}
		}
	case *ast.CallExpr:
		switch fn := e.Fun.(type) {
		case *ast.Ident:
			return s.funcs[fn.Name]
		case *ast.SelectorExpr:
			if t := s.typeOf(sc, fn.X); t != "" {
				return s.methods[t][fn.Sel.Name]
			}
		}
	}
	return ""
}

// scopeOf binds the receiver, parameters, declared variables and assigned
// identifiers of fn (closures included) to their types.
func (s *src) scopeOf(fn *ast.FuncDecl) scope {
	sc := scope{}
	bindFields := func(fl *ast.FieldList) {
		if fl == nil {
			return
		}
		for _, f := range fl.List {
			for _, id := range f.Names {
				sc[id.Name] = typeName(f.Type)
			}
		}
	}
	bindFields(fn.Recv)
	bindFields(fn.Type.Params)
	bindFields(fn.Type.Results)
	for range 3 { // Chains (a := r.x; b := a.y) settle in a few rounds.
		ast.Inspect(fn, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncLit:
				bindFields(n.Type.Params)
			case *ast.ValueSpec:
				for i, id := range n.Names {
					if n.Type != nil {
						sc[id.Name] = typeName(n.Type)
					} else if len(n.Values) == len(n.Names) {
						if t := s.typeOf(sc, n.Values[i]); t != "" {
							sc[id.Name] = t
						}
					}
				}
			case *ast.AssignStmt:
				if len(n.Lhs) != len(n.Rhs) {
					return true
				}
				for i, l := range n.Lhs {
					if id, ok := l.(*ast.Ident); ok && id.Name != "_" {
						if t := s.typeOf(sc, n.Rhs[i]); t != "" {
							sc[id.Name] = t
						}
					}
				}
			}
			return true
		})
	}
	return sc
}

func (s *src) eachFunc(f func(*ast.FuncDecl)) {
	for _, file := range s.files {
		for _, d := range file.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Body != nil {
				f(fn)
			}
		}
	}
}

// pkgCall reports whether n calls pkg.name for a name in names, and which.
func pkgCall(n ast.Node, pkg string, names []string) (string, bool) {
	call, ok := n.(*ast.CallExpr)
	if !ok {
		return "", false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return "", false
	}
	id, ok := sel.X.(*ast.Ident)
	if !ok || id.Name != pkg {
		return "", false
	}
	if names == nil || slices.Contains(names, sel.Sel.Name) {
		return sel.Sel.Name, true
	}
	return "", false
}

// file is the base name of the file fn is in.
func (s *src) file(n ast.Node) string { return filepath.Base(s.fset.Position(n.Pos()).Filename) }

func TestStructure(t *testing.T) {
	t.Parallel()
	s := parseRunner(t)
	runner := s.structs["Runner"]
	if runner == nil {
		t.Fatal("no Runner struct")
	}
	var bad []string
	report := func(n ast.Node, format string, args ...any) {
		bad = append(bad, s.fset.Position(n.Pos()).String()+": "+fmt.Sprintf(format, args...))
	}
	used := map[string]bool{} // Exceptions that are still needed.

	// The Runner stays small.
	t.Logf("Runner fields: %d (at most %d), methods: %d", len(runner), maxRunnerFields, len(s.methods["Runner"]))
	if len(runner) > maxRunnerFields {
		t.Errorf("Runner has %d fields, more than %d: group them", len(runner), maxRunnerFields)
	}

	s.eachFunc(func(fn *ast.FuncDecl) {
		name := funcName(fn)
		var sc scope
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GoStmt:
				// Only the owner goroutine touches the state.
				used["go "+name] = true
				if _, ok := goroutines[name]; !ok {
					report(n, "%s starts a goroutine: list it in goroutines, with why", name)
				}
				if sc == nil {
					sc = s.scopeOf(fn)
				}
				ast.Inspect(n.Call, func(m ast.Node) bool {
					if id, ok := m.(*ast.Ident); ok && sc[id.Name] == "Runner" {
						report(m, "%s hands the Runner (%s) to a goroutine: only the owner goroutine touches it", name, id.Name)
					}
					return true
				})
			case *ast.SelectorExpr:
				// One place names the phases.
				if id, ok := n.X.(*ast.Ident); ok && id.Name == "protocol" && strings.HasPrefix(n.Sel.Name, "Phase") && s.file(n) != phaseFile {
					if _, ok := phaseReaders[name]; ok {
						used["phase "+name] = true
					} else {
						report(n, "%s names protocol.%s: the phase is derived in %s alone", name, n.Sel.Name, phaseFile)
					}
				}
			case *ast.AssignStmt:
				for _, l := range n.Lhs {
					if sel, ok := l.(*ast.SelectorExpr); ok && (sel.Sel.Name == "shown" || sel.Sel.Name == "shownWhy") && name != "Runner.showPhase" {
						report(n, "%s sets %s: only showPhase records the phase shown", name, sel.Sel.Name)
					}
				}
			case *ast.CallExpr:
				// Session files through the root.
				if f, ok := pkgCall(n, "os", osFileCalls); ok {
					if _, ok := osFileExceptions[name]; ok {
						used["os "+name] = true
					} else {
						report(n, "%s calls os.%s: reach session files through the root (fsq.Root)", name, f)
					}
				}
				if f, ok := pkgCall(n, "fsq", nil); ok && !fsqFuncs[f] {
					report(n, "%s calls fsq.%s: reach session files through the root (fsq.Root's methods)", name, f)
				}
				// The owner's time from its clock.
				if f, ok := pkgCall(n, "time", timeCalls); ok && s.file(n) != "clock.go" {
					if _, ok := timeExceptions[name]; ok {
						used["time "+name] = true
					} else {
						report(n, "%s calls time.%s: take the time from the runner's clock (clock.go)", name, f)
					}
				}
			}
			return true
		})
	})
	slices.Sort(bad)
	for _, b := range bad {
		t.Error(b)
	}
	for what, m := range map[string]map[string]string{"go": goroutines, "os": osFileExceptions, "time": timeExceptions, "phase": phaseReaders} {
		for name := range m {
			if !used[what+" "+name] {
				t.Errorf("the %s exceptions name %s, which no longer needs one", what, name)
			}
		}
	}
}

package runner

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// The runner is a few owned parts (doc.go, issue 21 item 3): each a type
// with its own fields and methods, which the orchestration on *Runner
// reaches only through those methods. TestStructure reads the package's
// non-test source (go/parser, go/ast) and fails when that promise breaks.

// partFields maps each part field of Runner to its type. Keep it in step
// with runner.go's Runner struct (the test checks it).
var partFields = map[string]string{
	"status": "runStatus",
	"stop":   "stopState",
	"tool":   "toolLife",
	"cur":    "running",
	"queue":  "cmdQueue",
	"in":     "inputQueue",
	"mbox":   "mailbox",
	"disk":   "spoolDisk",
	"lease":  "leaseWatch",
	"layout": "layoutState",
}

// maxRunnerFields bounds Runner's fields (issue 21).
const maxRunnerFields = 30

// fieldExceptions lists functions, by name ("recv.method" or "func"), that
// may select a part's fields without being its method, and why.
var fieldExceptions = map[string]string{}

// onePartExceptions lists methods on *Runner that may use a single part,
// and why.
var onePartExceptions = map[string]string{}

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

// constructs reports whether fn (a function, not a method) builds a T
// with a composite literal: it may then fill in T's fields.
func constructs(fn *ast.FuncDecl, typ string) bool {
	if fn.Recv != nil {
		return false
	}
	found := false
	ast.Inspect(fn, func(n ast.Node) bool {
		if cl, ok := n.(*ast.CompositeLit); ok && typeName(cl.Type) == typ {
			found = true
		}
		return !found
	})
	return found
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

// fieldViolations lists, as "file:line: func selects T.field", every
// selection of a part's field outside the part's own methods (and the
// functions that construct it, and fieldExceptions).
func (s *src) fieldViolations(parts map[string]bool) []string {
	var out []string
	s.eachFunc(func(fn *ast.FuncDecl) {
		if _, ok := fieldExceptions[funcName(fn)]; ok {
			return
		}
		sc := s.scopeOf(fn)
		own := recvType(fn)
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			t := s.typeOf(sc, sel.X)
			if !parts[t] || t == own {
				return true
			}
			if _, isField := s.structs[t][sel.Sel.Name]; !isField || constructs(fn, t) {
				return true
			}
			out = append(out, s.fset.Position(sel.Pos()).String()+": "+funcName(fn)+" selects "+t+"."+sel.Sel.Name)
			return true
		})
	})
	return out
}

// partsUsed returns the Runner fields a method on *Runner selects through
// its receiver, and whether it does anything else with it (calls another
// method on *Runner, passes the receiver on).
func (s *src) partsUsed(fn *ast.FuncDecl) (fields map[string]bool, other bool) {
	fields = map[string]bool{}
	if len(fn.Recv.List[0].Names) == 0 {
		return fields, false
	}
	r := fn.Recv.List[0].Names[0].Name
	selected := map[*ast.Ident]bool{}
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			id, ok := n.X.(*ast.Ident)
			if !ok || id.Name != r {
				return true
			}
			selected[id] = true
			if _, ok := s.structs["Runner"][n.Sel.Name]; ok {
				fields[n.Sel.Name] = true
			} else {
				other = true // A method.
			}
		case *ast.Ident:
			if n.Name == r && !selected[n] {
				other = true
			}
		}
		return true
	})
	return fields, other
}

func TestStructure(t *testing.T) {
	s := parseRunner(t)
	runner := s.structs["Runner"]
	if runner == nil {
		t.Fatal("no Runner struct")
	}

	// (a) Runner stays small.
	t.Logf("Runner fields: %d (at most %d)", len(runner), maxRunnerFields)
	if len(runner) > maxRunnerFields {
		t.Errorf("Runner has %d fields, more than %d: group them into a part", len(runner), maxRunnerFields)
	}
	parts := map[string]bool{}
	for f, typ := range partFields {
		if runner[f] != typ {
			t.Errorf("partFields says Runner.%s is a %s; runner.go says %q", f, typ, runner[f])
		}
		if s.structs[typ] == nil {
			t.Errorf("part type %s is not a struct of the package", typ)
		}
		parts[typ] = true
	}

	// Figures.
	t.Logf("Runner methods: %d", len(s.methods["Runner"]))
	var fs []string
	for f := range partFields {
		fs = append(fs, f)
	}
	sort.Strings(fs)
	for _, f := range fs {
		typ := partFields[f]
		t.Logf("part %-6s %-12s fields %2d, methods %2d", f, typ, len(s.structs[typ]), len(s.methods[typ]))
	}

	// (b) A part's fields are selected only in its own methods.
	for _, v := range s.fieldViolations(parts) {
		t.Errorf("%s: reach the part through its methods", v)
	}
	for name := range fieldExceptions {
		if !s.hasFunc(name) {
			t.Errorf("fieldExceptions names %s, which no longer exists", name)
		}
	}

	// (c) No method on *Runner uses only one part: it belongs to the part.
	var one []string
	s.eachFunc(func(fn *ast.FuncDecl) {
		if recvType(fn) != "Runner" {
			return
		}
		fields, other := s.partsUsed(fn)
		if other || len(fields) != 1 {
			return
		}
		for f := range fields {
			if partFields[f] == "" {
				return
			}
			if _, ok := onePartExceptions[fn.Name.Name]; ok {
				return
			}
			one = append(one, fmt.Sprintf("%s: Runner.%s uses only r.%s: make it a method of %s",
				s.fset.Position(fn.Pos()), fn.Name.Name, f, partFields[f]))
		}
	})
	slices.Sort(one)
	for _, v := range one {
		t.Error(v)
	}
	for name := range onePartExceptions {
		if !s.hasFunc("Runner." + name) {
			t.Errorf("onePartExceptions names Runner.%s, which no longer exists", name)
		}
	}
}

func (s *src) hasFunc(name string) bool {
	found := false
	s.eachFunc(func(fn *ast.FuncDecl) {
		if funcName(fn) == name {
			found = true
		}
	})
	return found
}

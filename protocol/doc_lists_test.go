package protocol

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// TestDocumentedLists keeps PROTOCOL.md's lists equal to the code's:
// the stable error.code values of section 7 and the two of
// state.json's error in section 8, the event names of section 22, the
// warning kinds of section 22's warning row, and state.json's fields in
// section 8. Each is documented and each is written: the codes and events
// are this package's constants and the runner names each; the warnings
// are the keys of the details the runner gives its warning events (read
// from its source); the fields are State's.
func TestDocumentedLists(t *testing.T) {
	spec := readSpec(t)
	runner := runnerSources(t)

	codes := stringConsts(t, "Code")
	stateCodes := []string{CodeToolStartFailed, CodeSessionLost} // state.json's error only, never a result's
	sec7 := section(t, spec, "## 7. ", "## 8. ")
	stable := between(t, sec7, "Stable `error.code` values:", "(`state.json`")
	var resultCodes []string
	for _, c := range codes {
		if !slices.Contains(stateCodes, c) {
			resultCodes = append(resultCodes, c)
		}
	}
	sameSet(t, "section 7's stable error.code values", ticked(stable), resultCodes)
	sec8 := section(t, spec, "## 8. ", "## 9. ")
	errRow := line(t, sec8, "| `error` |")
	sameSet(t, "section 8's state.json error codes", intersect(ticked(errRow), codes), stateCodes)

	events := stringConsts(t, "Ev")
	var documented []string
	sec22 := section(t, spec, "## 22. ", "## 23. ")
	for _, l := range strings.Split(sec22, "\n") {
		if cells := strings.Split(l, "|"); len(cells) > 2 && strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			documented = append(documented, ticked(cells[1])...)
		}
	}
	sameSet(t, "section 22's events", documented, events)

	all := consts(t)
	for _, name := range append(constNames(t, "Code"), constNames(t, "Ev")...) {
		written := strings.Contains(runner, "protocol."+name)
		for _, r := range constNames(t, "Reason") { // tool_exit, tool_died: the code is the exit reason's (string(reason)).
			written = written || all[r] == all[name] && strings.Contains(runner, "protocol."+r)
		}
		if !written {
			t.Errorf("the runner never writes protocol.%s", name)
		}
	}

	warnRow := line(t, sec22, "| `warning` |")
	var kinds []string
	for _, w := range ticked(warnRow) {
		k, _, _ := strings.Cut(w, ":")
		if regexp.MustCompile(`^[a-z_]+$`).MatchString(k) && k != "cmd_id" && k != EvWarning {
			kinds = append(kinds, k)
		}
	}
	sameSet(t, "section 22's warning detail keys", kinds, warningKeys(t))

	var fields []string
	st := reflect.TypeFor[State]()
	for i := range st.NumField() {
		name, _, _ := strings.Cut(st.Field(i).Tag.Get("json"), ",")
		fields = append(fields, name)
	}
	stateDoc := between(t, sec8, "`state/state.json` is rewritten", "Busy/idle flips")
	var stateNamed []string
	for _, l := range strings.Split(stateDoc, "\n") {
		if cells := strings.Split(l, "|"); len(cells) > 2 && strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			stateNamed = append(stateNamed, ticked(cells[1])...) // The table's field column names fields only.
		}
	}
	for _, f := range fields {
		if !slices.Contains(ticked(stateDoc), f) {
			t.Errorf("state.json field %s is not in section 8", f)
		}
	}
	for _, f := range stateNamed {
		if !slices.Contains(fields, f) {
			t.Errorf("section 8's table names %s, which state.json does not have", f)
		}
	}
}

// TestDocumentTablesWhole: every table of PROTOCOL.md starts with its
// header and separator; a row after a blank line is a table of its own
// that Markdown shows as text (row 3.20 of 15.1 was cut off so).
func TestDocumentTablesWhole(t *testing.T) {
	lines := strings.Split(readSpec(t), "\n")
	for i := 1; i < len(lines); i++ {
		if strings.HasPrefix(lines[i], "|") && strings.TrimSpace(lines[i-1]) == "" &&
			(i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "|---")) {
			t.Errorf("PROTOCOL.md line %d: a table row after a blank line, not a table's header: %.60s", i+1, lines[i])
		}
	}
}

func readSpec(t *testing.T) string {
	b, err := os.ReadFile("../PROTOCOL.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// section is the text from the heading starting with from to the next
// starting with to ("": the end).
func section(t *testing.T, spec, from, to string) string {
	t.Helper()
	i := strings.Index(spec, "\n"+from)
	if i < 0 {
		t.Fatalf("PROTOCOL.md has no %q", from)
	}
	s := spec[i+1:]
	if to != "" {
		if j := strings.Index(s, "\n"+to); j >= 0 {
			s = s[:j]
		}
	}
	return s
}

func between(t *testing.T, s, from, to string) string {
	t.Helper()
	_, rest, ok := strings.Cut(s, from)
	if !ok {
		t.Fatalf("PROTOCOL.md has no %q", from)
	}
	out, _, ok := strings.Cut(rest, to)
	if !ok {
		t.Fatalf("PROTOCOL.md has no %q after %q", to, from)
	}
	return out
}

func line(t *testing.T, s, prefix string) string {
	t.Helper()
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	t.Fatalf("PROTOCOL.md has no line %q", prefix)
	return ""
}

var tickRE = regexp.MustCompile("`([^`]+)`")

// ticked lists the `quoted` words of s.
func ticked(s string) []string {
	var out []string
	for _, m := range tickRE.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

func intersect(a, b []string) []string {
	var out []string
	for _, x := range a {
		if slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

func sameSet(t *testing.T, what string, doc, code []string) {
	t.Helper()
	for _, x := range code {
		if !slices.Contains(doc, x) {
			t.Errorf("%s: %s is written by the code but not documented", what, x)
		}
	}
	for _, x := range doc {
		if !slices.Contains(code, x) {
			t.Errorf("%s: %s is documented but the code has no such one", what, x)
		}
	}
}

// consts are this package's string constants by name.
func consts(t *testing.T) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "types.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, sp := range g.Specs {
			vs := sp.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if i < len(vs.Values) {
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						out[n.Name], _ = strconv.Unquote(lit.Value)
					}
				}
			}
		}
	}
	return out
}

func constNames(t *testing.T, prefix string) []string {
	var out []string
	for n := range consts(t) {
		if strings.HasPrefix(n, prefix) && len(n) > len(prefix) && n[len(prefix)] >= 'A' && n[len(prefix)] <= 'Z' {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

func stringConsts(t *testing.T, prefix string) []string {
	c := consts(t)
	var out []string
	for _, n := range constNames(t, prefix) {
		out = append(out, c[n])
	}
	return out
}

// runnerFiles parses the runner's non-test sources.
func runnerFiles(t *testing.T) ([]*ast.File, *token.FileSet) {
	t.Helper()
	paths, err := filepath.Glob("../runner/*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files, fset
}

func runnerSources(t *testing.T) string {
	t.Helper()
	paths, _ := filepath.Glob("../runner/*.go")
	var b strings.Builder
	for _, p := range paths {
		if !strings.HasSuffix(p, "_test.go") {
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			b.Write(data)
		}
	}
	return b.String()
}

// warningKeys are the keys of the details the runner gives its warning
// events: a map literal given as Detail; a variable given as Detail, with
// the map literal it is made of and the keys set on it in its function;
// or a value ranged over a field (d.displaced), with the map literals
// appended to a field of that name anywhere. A warning whose detail is
// none of these fails the test: write it so that it can be read.
func warningKeys(t *testing.T) []string {
	t.Helper()
	files, fset := runnerFiles(t)
	keys := map[string]bool{}
	litKeys := func(e ast.Expr) bool {
		cl, ok := e.(*ast.CompositeLit)
		if !ok {
			return false
		}
		if _, isMap := cl.Type.(*ast.MapType); !isMap {
			return false
		}
		for _, el := range cl.Elts {
			if kv, ok := el.(*ast.KeyValueExpr); ok {
				if lit, ok := kv.Key.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					k, _ := strconv.Unquote(lit.Value)
					keys[k] = true
				}
			}
		}
		return true
	}
	appendedTo := func(field string) bool { // Map literals appended to x.field anywhere.
		found := false
		for _, f := range files {
			ast.Inspect(f, func(n ast.Node) bool {
				c, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				if id, isID := c.Fun.(*ast.Ident); !isID || id.Name != "append" || len(c.Args) < 2 {
					return true
				}
				if sel, ok := c.Args[0].(*ast.SelectorExpr); ok && sel.Sel.Name == field {
					for _, a := range c.Args[1:] {
						found = litKeys(a) || found
					}
				}
				return true
			})
		}
		return found
	}
	for _, f := range files {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				cl, ok := n.(*ast.CompositeLit)
				if !ok || !isEventLit(cl) || !hasField(cl, "Event", "EvWarning") {
					return true
				}
				detail := fieldValue(cl, "Detail")
				pos := fset.Position(cl.Pos())
				switch x := detail.(type) {
				case *ast.CompositeLit:
					litKeys(x)
				case *ast.Ident:
					if !identKeys(fn.Body, x.Name, litKeys) && !(rangedField(fn.Body, x.Name) != "" && appendedTo(rangedField(fn.Body, x.Name))) {
						t.Errorf("%s: the warning's detail %s is neither a map literal nor made of one", pos, x.Name)
					}
				default:
					t.Errorf("%s: cannot read the warning's detail: give it as a map literal", pos)
				}
				return true
			})
		}
	}
	var out []string
	for k := range keys {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func isEventLit(cl *ast.CompositeLit) bool {
	sel, ok := cl.Type.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "Event"
}

func fieldValue(cl *ast.CompositeLit, name string) ast.Expr {
	for _, el := range cl.Elts {
		if kv, ok := el.(*ast.KeyValueExpr); ok {
			if id, ok := kv.Key.(*ast.Ident); ok && id.Name == name {
				return kv.Value
			}
		}
	}
	return nil
}

func hasField(cl *ast.CompositeLit, name, sel string) bool {
	s, ok := fieldValue(cl, name).(*ast.SelectorExpr)
	return ok && s.Sel.Name == sel
}

// identKeys collects the keys of the map literal name is assigned in body
// and of the string keys set on it (name["k"] = ...); false when it is
// assigned no map literal there.
func identKeys(body *ast.BlockStmt, name string, litKeys func(ast.Expr) bool) bool {
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		as, ok := n.(*ast.AssignStmt)
		if !ok {
			return true
		}
		for i, l := range as.Lhs {
			if id, ok := l.(*ast.Ident); ok && id.Name == name && i < len(as.Rhs) {
				found = litKeys(as.Rhs[i]) || found
			}
			if ix, ok := l.(*ast.IndexExpr); ok {
				if id, ok := ix.X.(*ast.Ident); ok && id.Name == name {
					litKeys(&ast.CompositeLit{Type: &ast.MapType{}, Elts: []ast.Expr{&ast.KeyValueExpr{Key: ix.Index}}})
				}
			}
		}
		return true
	})
	return found
}

// rangedField is F when name is the value of a range over x.F in body.
func rangedField(body *ast.BlockStmt, name string) string {
	field := ""
	ast.Inspect(body, func(n ast.Node) bool {
		rs, ok := n.(*ast.RangeStmt)
		if !ok {
			return true
		}
		if id, ok := rs.Value.(*ast.Ident); ok && id.Name == name {
			if sel, ok := rs.X.(*ast.SelectorExpr); ok {
				field = sel.Sel.Name
			}
		}
		return true
	})
	return field
}

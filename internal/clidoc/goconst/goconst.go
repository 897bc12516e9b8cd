// Package goconst reads the integer constants of a Go package from its
// source, for tests: it lives apart from clidoc so that the binaries,
// which link clidoc, do not link go/parser.
package goconst

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// IntConstants are the integer constants of the Go package in dir whose
// names start with prefix and whose values are written as literals
// (ExitLost = 5), by name. Tests use it to check that a table of exit
// codes lists every code the package defines, so that a code added to the
// package and not to the table (and so to --help) fails.
func IntConstants(dir, prefix string) (map[string]int, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	out := map[string]int{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		file, err := parser.ParseFile(fset, f, src, 0)
		if err != nil {
			return nil, err
		}
		for _, d := range file.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if !strings.HasPrefix(name.Name, prefix) || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.INT {
						continue
					}
					n, err := strconv.Atoi(lit.Value)
					if err != nil {
						return nil, err
					}
					out[name.Name] = n
				}
			}
		}
	}
	return out, nil
}

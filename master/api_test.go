package master

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strings"
	"testing"
)

// api is package master's exported API, one identifier a line: what a
// flow needs. What launch, pool, the CLI and the MCP server
// need beyond it belongs in internal/sessionio, not here; a change to this
// list is a change of the Go library's API (CHANGELOG.md).
const api = `
const CodeAlreadyFinished
const CodeAlreadyWithdrawn
const CodeCancelled
const CodeCannotServe
const CodeCommandFailed
const CodeCommandTimeout
const CodeExpectTimeout
const CodeIO
const CodeIdle
const CodeInterrupted
const CodeNotQueued
const CodeNotRunning
const CodePruned
const CodeRefusedEcho
const CodeRejected
const CodeRunnerNotAlive
const CodeSessionMissing
const CodeStale
const CodeUnknownCmdID
const CodeUsage
const CodeWaitTimeout
const DefaultPollInterval
const DefaultWaitForRunner
const ExitCancelled
const ExitFailed
const ExitIO
const ExitNoRunner
const ExitNothingToDo
const ExitOK
const ExitPruned
const ExitSIGINT
const ExitSIGTERM
const ExitTimeout
const ExitUnknownCmdID
const ExitUsage
const MaxMatchLen
func Classify
func ErrorContext
func NewCmdID
func Open
func OpenIn
func WaitReady
method Command.Follow
method Command.Output
method Command.RawResult
method Command.Resolve
method Command.Result
method Command.Session
method Command.Wait
method Command.Withdraw
method ContextError.ErrorContext
method Match.MarshalJSON
method Match.UnmarshalJSON
method PendingStop.Reply
method PendingStop.Wait
method RequestError.Error
method RequestError.ErrorContext
method RequestError.Unwrap
method ResultError.Error
method ResultError.ErrorContext
method ResultError.Unwrap
method Session.Alive
method Session.Cancel
method Session.CancelCurrent
method Session.Close
method Session.Command
method Session.Core
method Session.Dir
method Session.KeepLease
method Session.NoRunnerHint
method Session.QueueDepth
method Session.ReadState
method Session.Request
method Session.Resize
method Session.Run
method Session.Send
method Session.Signal
method Session.SpoolSize
method Session.Status
method Session.Stop
method Session.Submit
method Session.Tail
method Session.WaitFor
method Session.WatchDegraded
method Session.Withdraw
method Session.WriteLease
method SubmitOptions.Check
type Command
type ContextError
type LeaseStatus
type Match
type PendingStop
type RequestError
type ResultBrief
type ResultError
type SendOptions
type Session
type Status
type SubmitOptions
type WaitOptions
var ErrAlreadyFinished
var ErrAlreadyWithdrawn
var ErrCancelled
var ErrCannotServe
var ErrCommandFailed
var ErrCommandTimeout
var ErrExpectTimeout
var ErrIdle
var ErrInterrupted
var ErrNotQueued
var ErrNotRunning
var ErrPruned
var ErrRefusedEcho
var ErrRequestRejected
var ErrRunnerNotAlive
var ErrSessionMissing
var ErrStaleRequest
var ErrUnknownCmdID
var ErrUsage
var ErrWaitTimeout
`

// exportedAPI lists the exported functions, methods (of exported types,
// interface methods included), types, vars and consts of the package's
// non-test files in dir, as api spells them.
func exportedAPI(t *testing.T, dir string) []string {
	fset := token.NewFileSet()
	files, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range files {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, dir+"/"+e.Name(), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv == nil {
					out = append(out, "func "+d.Name.Name)
					continue
				}
				rt := d.Recv.List[0].Type
				if s, ok := rt.(*ast.StarExpr); ok {
					rt = s.X
				}
				if id, ok := rt.(*ast.Ident); ok && id.IsExported() {
					out = append(out, "method "+id.Name+"."+d.Name.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if !s.Name.IsExported() {
							continue
						}
						out = append(out, "type "+s.Name.Name)
						if it, ok := s.Type.(*ast.InterfaceType); ok {
							for _, m := range it.Methods.List {
								for _, n := range m.Names {
									if n.IsExported() {
										out = append(out, "method "+s.Name.Name+"."+n.Name)
									}
								}
							}
						}
					case *ast.ValueSpec:
						kind := "var "
						if d.Tok == token.CONST {
							kind = "const "
						}
						for _, n := range s.Names {
							if n.IsExported() {
								out = append(out, kind+n.Name)
							}
						}
					}
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestExportedAPI fails when the exported API changes without api (and
// CHANGELOG.md) saying so. -v logs the count (150
// when this test was written, of which 77 functions and methods).
func TestExportedAPI(t *testing.T) {
	got := exportedAPI(t, ".")
	want := strings.Fields(strings.ReplaceAll(strings.TrimSpace(api), " ", "_"))
	for i := range want {
		want[i] = strings.Replace(want[i], "_", " ", 1)
	}
	for _, g := range got {
		if !slices.Contains(want, g) {
			t.Errorf("exported but not in api: %s (is it what a flow needs? else internal/sessionio)", g)
		}
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("in api but not exported: %s", w)
		}
	}
	funcs := 0
	for _, g := range got {
		if strings.HasPrefix(g, "func ") || strings.HasPrefix(g, "method ") {
			funcs++
		}
	}
	t.Logf("package master exports %d identifiers, of which %d functions and methods", len(got), funcs)
}

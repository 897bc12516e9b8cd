// Package clidoc renders a command line's reference — its synopsis, what
// it does, every command, flag and exit code — as Markdown and as a man
// page, from the same values the command's --help is printed from: the
// flag sets the command parses and the tables it dispatches and exits by.
// A reference written from those values cannot say something the command
// does not do (internal/refdoc checks the files it writes are current).
package clidoc

import (
	"flag"
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// Flag is one flag as a reference lists it.
type Flag struct {
	Name    string // without dashes: "session"
	Arg     string // the value's name ("DIR", "duration"); empty for a boolean flag
	Default string // empty when the default is the type's zero value
	Usage   string
}

// Flags lists the flags of fs in name order, as flag.PrintDefaults shows
// them: the value's name from a back-quoted word of the usage (or the
// type's name), the default unless it is the zero value.
func Flags(fs *flag.FlagSet) []Flag {
	var out []Flag
	fs.VisitAll(func(f *flag.Flag) {
		arg, usage := flag.UnquoteUsage(f)
		def := f.DefValue
		if isZeroValue(f) {
			def = ""
		}
		out = append(out, Flag{Name: f.Name, Arg: arg, Default: def, Usage: usage})
	})
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// isZeroValue reports whether f's default is its type's zero value, the
// rule flag.PrintDefaults uses to leave a default out.
func isZeroValue(f *flag.Flag) bool {
	t := reflect.TypeOf(f.Value)
	var z reflect.Value
	if t.Kind() == reflect.Pointer {
		z = reflect.New(t.Elem())
	} else {
		z = reflect.Zero(t)
	}
	v, ok := z.Interface().(flag.Value)
	if !ok {
		return false
	}
	return f.DefValue == v.String()
}

// Exit is one exit code and what it means.
type Exit struct {
	Code    int
	Meaning string
}

// ExitList is codes as one sentence for a --help: "0 ok, 1 command
// failed, ...".
func ExitList(codes []Exit) string {
	parts := make([]string, len(codes))
	for i, e := range codes {
		parts[i] = fmt.Sprintf("%d %s", e.Code, e.Meaning)
	}
	return strings.Join(parts, ", ")
}

// Wrap fills text into lines of at most width columns (a longer word
// stands alone on its line), each line after the first starting with
// indent.
func Wrap(text string, width int, indent string) string {
	return wrapFrom(text, width, indent, 0)
}

// wrapFrom is Wrap for text that starts at column col.
func wrapFrom(text string, width int, indent string, col int) string {
	var b strings.Builder
	for i, w := range strings.Fields(text) {
		switch {
		case i == 0:
		case col+1+len(w) > width:
			b.WriteString("\n" + indent)
			col = len(indent)
		default:
			b.WriteByte(' ')
			col++
		}
		b.WriteString(w)
		col += len(w)
	}
	return b.String()
}

// Command is one command of a program with commands (master submit,
// master pool grow).
type Command struct {
	Name     string // "submit", "pool grow"
	Synopsis string // what follows "PROG NAME" on its usage line: "[flags] CMD_ID"
	Summary  string // one line: what it does
	About    string // what it does, at length (paragraphs; indented lines are kept as written)
	Flags    []Flag
	// Ref, when set, is where the command is described instead (a command
	// of another binary): its flags are still listed.
	Ref string
}

// Env is an environment variable a program reads.
type Env struct {
	Name, Meaning string
}

// Page is the reference of one program.
type Page struct {
	Name     string   // "runner"
	Summary  string   // the man page's NAME line: what it is, in a few words
	Synopsis []string // usage lines, without the program's name
	About    string   // DESCRIPTION: paragraphs; indented lines are kept as written
	Flags    []Flag   // the program's own flags
	Commands []Command
	Exit     []Exit
	Env      []Env
	SeeAlso  []string // "master(1)", "PROTOCOL.md"
	// Source says what the page is generated from and how to regenerate
	// it (a comment at its top).
	Source string
}

// blocks splits text into paragraphs (blank-line separated); a paragraph
// whose lines start with a space is preformatted.
func blocks(text string) (paras []string, pre []bool) {
	for _, p := range strings.Split(strings.Trim(text, "\n"), "\n\n") {
		if strings.TrimSpace(p) == "" {
			continue
		}
		lines := strings.Split(p, "\n")
		var run []string
		flush := func(isPre bool) {
			if len(run) > 0 {
				paras = append(paras, strings.Join(run, "\n"))
				pre = append(pre, isPre)
				run = nil
			}
		}
		prev := false
		for _, l := range lines {
			isPre := strings.HasPrefix(l, " ")
			if isPre != prev {
				flush(prev)
			}
			run = append(run, l)
			prev = isPre
		}
		flush(prev)
	}
	return paras, pre
}

// ExitTable is codes as a --help lists them, one a line, each meaning
// filled to width columns:
//
//	0  stopped cleanly
//	1  error (...)
func ExitTable(codes []Exit, width int) string {
	var b strings.Builder
	for _, e := range codes {
		head := fmt.Sprintf("  %-3d ", e.Code)
		b.WriteString(head + wrapFrom(e.Meaning, width, strings.Repeat(" ", len(head)), len(head)) + "\n")
	}
	return b.String()
}

// Package flaghelp prints a flag set's defaults as every SkillPilot
// binary's usage lines spell flags: with two dashes (--init, not -init),
// and parses what every duration flag takes as plain seconds (Seconds).
package flaghelp

import (
	"bytes"
	"flag"
	"io"
	"regexp"
	"sync"
)

// flagLine is the start of a long flag's line in flag.PrintDefaults'
// output (a name of two characters or more). It is compiled on first use,
// not at every start (issue 44).
var flagLine = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?m)^  -([A-Za-z0-9][A-Za-z0-9_.-])`) })

// PrintDefaults writes fs's defaults to w as flag.PrintDefaults does, each
// long flag named with two dashes ("  --init FILE") and a one-letter flag
// with one ("  -f FILE"), as the usage lines and the documents spell them.
// The flag package accepts both forms.
func PrintDefaults(w io.Writer, fs *flag.FlagSet) {
	var buf bytes.Buffer
	out := fs.Output()
	fs.SetOutput(&buf)
	fs.PrintDefaults()
	fs.SetOutput(out)
	_, _ = w.Write(flagLine().ReplaceAll(buf.Bytes(), []byte("  --$1"))) // A help on stdout or stderr: nothing to do on error.
}

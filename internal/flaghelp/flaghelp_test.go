package flaghelp

import (
	"bytes"
	"flag"
	"strings"
	"testing"
)

// Flags are listed as --name, the way usage lines spell them
// (--help listed -init while the usage said --init); a one-letter flag as
// -f (it was listed as --f while the usage line said -f FILE).
func TestPrintDefaults(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.String("init", "", "run `FILE` first")
	fs.Bool("json", false, "print JSON; -not a flag in text")
	fs.String("f", "", "read `FILE`")
	fs.Bool("v", false, "verbose")
	var b bytes.Buffer
	PrintDefaults(&b, fs)
	got := b.String()
	for _, want := range []string{"  --init FILE\n", "  --json\n", "-not a flag in text", "  -f FILE\n", "  -v\t"} {
		if !strings.Contains(got, want) {
			t.Errorf("lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "\n  -init") || strings.HasPrefix(got, "  -i") || strings.Contains(got, "--f") || strings.Contains(got, "--v") {
		t.Errorf("single dash left:\n%s", got)
	}
}

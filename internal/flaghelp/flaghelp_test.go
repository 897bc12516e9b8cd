package flaghelp

import (
	"bytes"
	"flag"
	"strings"
	"testing"
)

// Flags are listed as --name, the way usage lines spell them
// (--help listed -init while the usage said --init).
func TestPrintDefaults(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.String("init", "", "run `FILE` first")
	fs.Bool("json", false, "print JSON; -not a flag in text")
	var b bytes.Buffer
	PrintDefaults(&b, fs)
	got := b.String()
	for _, want := range []string{"  --init FILE\n", "  --json\n", "-not a flag in text"} {
		if !strings.Contains(got, want) {
			t.Errorf("lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "\n  -init") || strings.HasPrefix(got, "  -i") {
		t.Errorf("single dash left:\n%s", got)
	}
}

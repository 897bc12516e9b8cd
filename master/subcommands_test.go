package master

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
)

// Main runs a registered subcommand with its own arguments and exit code,
// and lists it in the help; a duplicate or built-in name panics.
func TestRegisterSubcommand(t *testing.T) {
	var got []string
	RegisterSubcommand("x-test", "[--flag] does a test thing", func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
		got = args
		b, _ := io.ReadAll(stdin)
		stdout.Write(b)
		return 42
	})
	var out, errb bytes.Buffer
	if rc := Main([]string{"x-test", "--flag", "a"}, strings.NewReader("in"), &out, &errb); rc != 42 || out.String() != "in" ||
		strings.Join(got, " ") != "--flag a" {
		t.Fatalf("rc %d out %q args %v", rc, out.String(), got)
	}
	out.Reset()
	Main([]string{"help"}, nil, &out, &errb)
	if !strings.Contains(out.String(), "  x-test [--flag] does a test thing\n") {
		t.Fatalf("help:\n%s", out.String())
	}
	for _, name := range []string{"x-test", "submit", "tail", ""} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%q: no panic", name)
				}
			}()
			RegisterSubcommand(name, "", func(context.Context, []string, io.Reader, io.Writer, io.Writer) int { return 0 })
		}()
	}
}

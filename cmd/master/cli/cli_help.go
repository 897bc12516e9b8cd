package cli

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/skillpilot/skillpilot/internal/flaghelp"
	"github.com/skillpilot/skillpilot/internal/suggest"
)

// printHelp prints a command's help in the one style every command uses:
// the usage line, what it does, then its flags.
func printHelp(w io.Writer, fs *flag.FlagSet, name, args, about string) {
	fmt.Fprintf(w, "usage: master %s [flags] %s\n\n%s\n\nFlags:\n", name, args, strings.TrimSpace(about))
	flaghelp.PrintDefaults(w, fs)
}

// describe gives a flag set built by hand (the table's hand verbs:
// report, standin, diff, launch; the pool's) the help of printHelp,
// printed by c.parse.
func (c *cli) describe(fs *flag.FlagSet, args, about string) {
	name := c.verb
	fs.Usage = func() { printHelp(c.stderr, fs, name, args, about) }
}

// didYouMean returns " (did you mean X?)" for the nearest of names to
// word, or "".
func didYouMean(word string, names []string, prefix string) string {
	if s := suggest.Closest(word, names); s != "" {
		return fmt.Sprintf(" (did you mean %s%s?)", prefix, s)
	}
	return ""
}

// flagErr is a flag set's parse error, with the flag the user probably
// meant when the error is an unknown flag.
func flagErr(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	name, ok := strings.CutPrefix(msg, "flag provided but not defined: -")
	if !ok {
		return msg
	}
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	return msg + didYouMean(strings.TrimLeft(name, "-"), names, "--")
}

// poolHelp is the help of one pool subcommand, from its lines of
// poolUsage: the synopsis (lines of flags) and what it does.
func poolHelp(name string) (args, about string) {
	lines := strings.Split(poolUsage(), "\n")
	var synopsis, what []string
	add := func(part string) {
		switch part = strings.TrimSpace(part); {
		case part == "":
		case strings.HasPrefix(part, "-") || strings.HasPrefix(part, "["):
			synopsis = append(synopsis, part)
		default:
			what = append(what, part)
		}
	}
	for i, l := range lines {
		rest, ok := strings.CutPrefix(l, "  "+name+" ")
		if !ok {
			continue
		}
		first := strings.SplitN(strings.TrimSpace(rest), "   ", 2) // Synopsis, then after a gap what it does.
		for _, part := range first {
			add(part)
		}
		for _, m := range lines[i+1:] {
			if !strings.HasPrefix(m, "         ") {
				break
			}
			add(m)
		}
		break
	}
	args = strings.TrimSpace("--pool DIR " + strings.Join(synopsis, " "))
	return args, strings.Join(what, "\n") + "\n\n(master pool --help lists every pool subcommand.)"
}

// helpUsage is what master help help prints.
const helpUsage = `usage: master help [COMMAND [SUBCOMMAND]]

Print master's overview (the commands, exit codes and --json), or with a
command the help of that command, as COMMAND --help does: master help submit,
master help pool grow.
`

// isHelpWord reports whether w asks for help.
func isHelpWord(w string) bool {
	switch w {
	case "help", "-h", "-help", "--help":
		return true
	}
	return false
}

package master

import (
	"context"
	"io"
	"sort"
	"strings"
	"sync"
)

// SubcommandFunc runs a subcommand registered with RegisterSubcommand. ctx
// ends on SIGINT or SIGTERM (context.Cause names the signal); the returned
// int is the process exit code.
type SubcommandFunc func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int

type subcommand struct {
	usage string
	run   SubcommandFunc
}

var (
	subMu       sync.Mutex
	subcommands = map[string]subcommand{}
)

// RegisterSubcommand adds a subcommand to Main, for packages that build on
// this one and so cannot be imported by it (the MCP server, package
// mcpserver, is registered by cmd/master). usage is one help line without
// the command name, shown by `master help`. A name registered twice, or one
// of Main's built-in commands, panics: it is a programming error.
func RegisterSubcommand(name, usage string, run SubcommandFunc) {
	subMu.Lock()
	defer subMu.Unlock()
	if _, dup := subcommands[name]; dup || name == "" || run == nil || strings.Contains(cliUsage, "\n  "+name+" ") {
		panic("master: RegisterSubcommand: bad or duplicate subcommand " + name)
	}
	subcommands[name] = subcommand{usage: usage, run: run}
}

func lookupSubcommand(name string) (subcommand, bool) {
	subMu.Lock()
	defer subMu.Unlock()
	sc, ok := subcommands[name]
	return sc, ok
}

// subcommandUsage returns the help lines of the registered subcommands.
func subcommandUsage() string {
	subMu.Lock()
	defer subMu.Unlock()
	if len(subcommands) == 0 {
		return ""
	}
	names := make([]string, 0, len(subcommands))
	for n := range subcommands {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("\nMore commands:\n")
	for _, n := range names {
		b.WriteString("  " + n + " " + subcommands[n].usage + "\n")
	}
	return b.String()
}

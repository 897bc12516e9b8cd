//go:build lean

package cli

import (
	"context"
	"fmt"

	"github.com/skillpilot/skillpilot/master"
)

// The lean master (make build, make install, make dist: go build -tags
// lean ./cmd/master) links neither package review nor what it needs
// (html/template, compress/flate, net/url, a diff library): report,
// standin and diff run in the master-history binary beside it, which is
// this CLI built without the tag (issue 44: every other command starts
// without initialising them). Their entries in the table stay, so the
// overview, did-you-mean and master help are the same; what runs them is
// master-history, with the same arguments, standard streams and exit code.

// HistoryEnv names the master-history binary the lean master runs for
// report, standin and diff, when it is not beside the master or on $PATH.
const HistoryEnv = "SP_MASTER_HISTORY"

// leanVerbs makes report, standin and diff run master-history.
func leanVerbs(table []verb) {
	for i := range table {
		switch table[i].name {
		case "report", "standin", "diff":
			table[i].flags, table[i].hand, table[i].run = nil, false, (*cli).history
		}
	}
}

// history runs `master-history VERB ARGS` on this process's streams and
// exits with its exit code.
func (c *cli) history(ctx context.Context, args []string) error {
	path, err := siblingBinary("master-history", HistoryEnv, "report, standin and diff are the master-history binary, installed beside master")
	if err != nil {
		fmt.Fprintf(c.stderr, "master %s: %v\n", c.verb, err)
		return exitOnly(master.ExitIO) // Not 1: for diff that means "the runs differ".
	}
	return exitOnly(runBinary(ctx, path, append([]string{c.verb}, args...), c.stdin, c.stdout, c.stderr))
}

// The flags of report, standin and diff are master-history's: the lean
// table has none (leanVerbs clears them).
var reportFlags, standinFlags, diffFlags func(*command) runFunc

// Command master-history is the master CLI built in full: the lean master
// that make build installs (go build -tags lean ./cmd/master) runs it for
// report, standin and diff, which read a session's history and need
// packages (html/template, compress/flate, a diff library) whose
// initialisation every other command would pay at its start (issue 44).
// Run directly, it is the whole master CLI.
package main

import (
	"os"

	"github.com/skillpilot/skillpilot/cmd/master/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

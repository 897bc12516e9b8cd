// Command runner holds one interactive tool on a PTY and serves the
// commands written into a session directory. See PROTOCOL.md.
package main

import (
	"os"

	"github.com/skillpilot/skillpilot/cmd/runner/runnercli"
)

func main() { os.Exit(runnercli.Main(os.Args[1:], os.Stdout, os.Stderr)) }

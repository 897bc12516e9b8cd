// Command runner holds one interactive tool on a PTY and serves the
// commands written into a session directory. See PROTOCOL.md.
package main

import (
	"os"

	"github.com/skillpilot/skillpilot/runner"
)

func main() { os.Exit(runner.Main(os.Args[1:], os.Stdout, os.Stderr)) }

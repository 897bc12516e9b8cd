// Command master talks to a SkillPilot runner through its session
// directory: submit, wait, cancel, stop, status, lease, tail, and `mcp` (a
// Model Context Protocol server for AI agents, package mcpserver). See
// docs/reference/master.md and `man master`. The command line is package
// cmd/master/cli: this package only
// runs cli.Main, which tests register too.
package main

import (
	"os"

	"github.com/skillpilot/skillpilot/cmd/master/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

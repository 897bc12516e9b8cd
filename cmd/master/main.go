// Command master talks to a SkillPilot runner through its session
// directory: submit, wait, cancel, stop, status, lease, tail, and `mcp` (a
// Model Context Protocol server for AI agents, package mcpserver). See
// README.md.
package main

import (
	"os"

	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/mcpserver"
)

func main() {
	master.RegisterSubcommand("mcp", mcpserver.Usage, mcpserver.Main)
	os.Exit(master.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// Command master-mcp is the Model Context Protocol server behind `master
// mcp` (package mcpserver): AI agents drive a session through it over
// stdio. It is a binary of its own so that the master CLI's hot commands
// (submit, wait, run, status, cancel, send) do not load the MCP SDK, its
// JSON schemas, gob and net/http at every start; `master mcp ARGS` runs
// this program with ARGS (see cmd/master/cli/mcp.go for how it is found).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/skillpilot/skillpilot/mcpserver"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	rc := mcpserver.Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(rc)
}

package cli

import (
	"fmt"

	"github.com/skillpilot/skillpilot/master"
)

// moreUsage lists the commands other binaries implement: `master mcp`,
// the MCP server (package mcpserver, binary master-mcp; see mcp.go).
const moreUsage = "\nMore commands:\n  mcp " + mcpUsage + "\n"

func usageErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", master.ErrUsage, fmt.Sprintf(format, args...))
}

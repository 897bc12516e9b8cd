package cli

import (
	"fmt"

	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/mcpserver"
)

// moreUsage lists the commands other packages implement: `master mcp`,
// the MCP server (package mcpserver).
const moreUsage = "\nMore commands:\n  mcp " + mcpserver.Usage + "\n"

func usageErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", master.ErrUsage, fmt.Sprintf(format, args...))
}

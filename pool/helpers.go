package pool

import (
	"strings"

	"github.com/skillpilot/skillpilot/protocol"
)

// isCommand reports whether name is a command file's name (not a dot-file).
func isCommand(name string) bool {
	_, _, err := protocol.ParseCommandName(name)
	return err == nil && !strings.HasPrefix(name, ".")
}

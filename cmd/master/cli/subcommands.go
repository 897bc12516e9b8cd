package cli

import (
	"fmt"

	"github.com/skillpilot/skillpilot/master"
)

func usageErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", master.ErrUsage, fmt.Sprintf(format, args...))
}

package runnercli

import (
	"flag"

	"github.com/skillpilot/skillpilot/protocol"
	"github.com/skillpilot/skillpilot/runner"
)

// ReadDriver, CheckTool and FlagErrorLine are the runner command's own
// checks of a --driver file, of the tool's program and of a flag error,
// for `runner check` (cmd/runner/checkcli), which takes the same flags.
func ReadDriver(path string) (*runner.DriverSpec, error) { return readDriver(path) }

// CheckTool: see ReadDriver.
func CheckTool(tool []string, kind protocol.Kind, drv *runner.DriverSpec) error {
	return checkTool(tool, kind, drv)
}

// FlagErrorLine: see ReadDriver.
func FlagErrorLine(fs *flag.FlagSet, err error) string { return flagErrorLine(fs, err) }

// Command runner holds one interactive tool on a PTY and serves the
// commands written into a session directory. See PROTOCOL.md.
package main

import (
	"os"

	"github.com/skillpilot/skillpilot/cmd/runner/checkcli"
	"github.com/skillpilot/skillpilot/cmd/runner/runnercli"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "check" {
		os.Exit(checkcli.Main(os.Args[2:], os.Stdout, os.Stderr))
	}
	os.Exit(runnercli.Main(os.Args[1:], os.Stdout, os.Stderr))
}

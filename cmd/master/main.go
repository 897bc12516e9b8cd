// Command master talks to a SkillPilot runner through its session
// directory: submit, wait, cancel, stop, status, lease, tail. See README.md.
package main

import (
	"os"

	"github.com/skillpilot/skillpilot/master"
)

func main() { os.Exit(master.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

// Package version is the version both binaries (runner, master) print for
// --version.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/skillpilot/skillpilot/protocol"
)

// Version is the release, set at build time with
//
//	go build -ldflags "-X github.com/skillpilot/skillpilot/internal/version.Version=1.2.3"
//
// When empty, the module version from the build information is used
// ("(devel)" for a build from a source tree), with the VCS revision when
// the build recorded one.
var Version = ""

// String returns the one-line version of program prog, e.g.
// "runner (SkillPilot) 1.2.3, go1.26.8, protocol version 1".
func String(prog string) string {
	v := Version
	if v == "" {
		v = "(devel)"
		if bi, ok := debug.ReadBuildInfo(); ok {
			if bi.Main.Version != "" {
				v = bi.Main.Version
			}
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" && len(s.Value) >= 12 {
					v += " " + s.Value[:12]
				}
			}
		}
	}
	return fmt.Sprintf("%s (SkillPilot) %s, %s, protocol version %d", prog, v, runtime.Version(), protocol.Version)
}

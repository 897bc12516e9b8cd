// Package version is the version every binary (runner, master,
// master-mcp) prints for --version.
package version

import (
	_ "embed" // VERSION
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/skillpilot/skillpilot/protocol"
)

// release is the one version of SkillPilot: every binary prints it, and
// the Python package (pyproject.toml, skillpilot.__version__) and the Tcl
// package (package provide skillpilot, skillpilot::release) carry it,
// copied from this file by scripts/sync-version.sh and checked by
// TestVersionsAgree.
//
//go:embed VERSION
var release string

// Release is the version of SkillPilot, e.g. "1.0.0" (the file VERSION).
func Release() string { return strings.TrimSpace(release) }

// Version is the build, set at build time (make sets git describe)
//
//	go build -ldflags "-X github.com/skillpilot/skillpilot/internal/version.Version=a874940"
//
// When empty, the module version from the build information is used
// ("(devel)" for a build from a source tree), with the VCS revision when
// the build recorded one.
var Version = ""

// String returns the one-line version of program prog, e.g.
// "runner (SkillPilot) 1.0.0 (build a874940), go1.26.8, protocol version 1".
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
	// Concatenated, not formatted: the line is all `--version` does, and
	// fmt's first use costs the start page faults (issue 44).
	return prog + " (SkillPilot) " + Release() + " (build " + v + "), " + runtime.Version() + ", protocol version " + strconv.Itoa(protocol.Version)
}

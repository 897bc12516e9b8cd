// Package refdoc writes the command-line reference of the binaries —
// docs/reference/*.md and the man pages docs/man/*.1 — from the
// commands' own tables (runnercli.Reference, cli.Reference, and master
// mcp's flags from mcpserver.Flags), through package clidoc. Its test
// fails when a checked-in file differs from what the tables produce;
// `make docs` rewrites them.
package refdoc

import (
	"github.com/skillpilot/skillpilot/cmd/master/cli"
	"github.com/skillpilot/skillpilot/cmd/runner/checkcli"
	"github.com/skillpilot/skillpilot/cmd/runner/runnercli"
	"github.com/skillpilot/skillpilot/internal/clidoc"
	"github.com/skillpilot/skillpilot/internal/version"
	"github.com/skillpilot/skillpilot/mcpserver"
)

// Regenerate is the command that rewrites the files Files returns.
const Regenerate = "make docs"

// Pages are the programs with a reference, as their tables describe them.
func Pages() []clidoc.Page {
	m := cli.Reference()
	for i := range m.Commands {
		if m.Commands[i].Name == "mcp" {
			m.Commands[i].Flags = clidoc.Flags(mcpserver.Flags())
		}
	}
	r := runnercli.Reference()
	r.Commands = append(r.Commands, checkcli.Command())
	r.Synopsis = append(r.Synopsis, "check "+checkcli.Command().Synopsis)
	pages := []clidoc.Page{r, m}
	for i := range pages {
		pages[i].Source = "Generated from the command's own tables by `" + Regenerate + "`; do not edit."
	}
	return pages
}

// Files are the reference files, by path from the repository's root.
func Files() map[string]string {
	out := map[string]string{}
	for _, p := range Pages() {
		out["docs/reference/"+p.Name+".md"] = p.Markdown()
		out["docs/man/"+p.Name+".1"] = p.Man(version.Release())
	}
	return out
}

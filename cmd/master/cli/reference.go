package cli

import (
	"io"
	"strings"

	"github.com/skillpilot/skillpilot/internal/clidoc"
)

// Reference is master's reference page, made from what its --help is
// made from: the verb tables (verbs, poolVerbs), the flag set each
// command's dispatch builds, the overview's paragraphs and exitCodes.
// master mcp is listed without flags: they are the master-mcp binary's
// (internal/refdoc adds them from package mcpserver, which this package
// does not import).
func Reference() clidoc.Page {
	loadVerbs() // Built on first use (commands.go); the reference lists them all.
	p := clidoc.Page{
		Name:     "master",
		Summary:  "drive a SkillPilot session or pool: submit commands, wait, read results, control the runner",
		Synopsis: []string{"COMMAND [flags] [args]", "help [COMMAND [SUBCOMMAND]]", "--version"},
		About:    overviewNotes + "\n\n" + jsonNotes,
		Exit:     exitCodes,
		Env: []clidoc.Env{
			{Name: "SP_SESSION_DIR", Meaning: "the session directory when --session is not given"},
			{Name: "SP_POOL_DIR", Meaning: "the pool directory of master pool when --pool is not given"},
			{Name: "SP_RUNNER", Meaning: "the runner launch and pool start run when --runner is not given (default: the runner beside master, else runner on $PATH)"},
			{Name: MCPEnv, Meaning: "the master-mcp binary master mcp runs (default: beside master, else on $PATH)"},
		},
		SeeAlso: []string{"runner(1)", "PROTOCOL.md", "docs/reference/master.md", "docs/mcp.md"},
	}
	for i := range verbs {
		v := &verbs[i]
		switch {
		case v.list == listHidden:
			continue
		case v.name == "help":
			p.Commands = append(p.Commands, clidoc.Command{Name: "help", Synopsis: "[COMMAND [SUBCOMMAND]]",
				Summary: "print the overview, or a command's help", About: strings.TrimPrefix(helpUsage, "usage: master help [COMMAND [SUBCOMMAND]]\n\n")})
		case v.name == "version":
			p.Commands = append(p.Commands, clidoc.Command{Name: "version", Summary: "print the version (also --version)",
				About: "Print the version of master, the same as runner's and master-mcp's, with its build and the protocol version."})
		case v.name == "pool":
			for j := range poolVerbs {
				p.Commands = append(p.Commands, poolReference(&poolVerbs[j]))
			}
		case v.name == "mcp":
			synopsis, about, _ := strings.Cut(mcpUsage, "\n")
			p.Commands = append(p.Commands, clidoc.Command{Name: "mcp", Synopsis: synopsis, Summary: strings.TrimSpace(about),
				Ref: "Runs the master-mcp binary; its tools and their schemas are in docs/mcp.md."})
		default:
			h := &cli{stdout: &trackWriter{w: io.Discard}, stderr: io.Discard, verb: v.name}
			cmd, _ := h.build(v)
			p.Commands = append(p.Commands, clidoc.Command{Name: v.name, Synopsis: strings.TrimSpace("[flags] " + v.usage),
				Summary: strings.Join(strings.Fields(v.about), " "), About: v.long, Flags: clidoc.Flags(cmd.FlagSet)})
		}
	}
	return p
}

// poolReference is the reference of the pool subcommand v, from what its
// --help is made of (poolHelp, newPoolCommand).
func poolReference(v *verb) clidoc.Command {
	h := &cli{stdout: &trackWriter{w: io.Discard}, stderr: io.Discard, verb: "pool " + v.name}
	cmd, _ := h.build(v)
	args, about := poolHelp(v.name)
	what, _, _ := strings.Cut(about, "\n\n")
	return clidoc.Command{Name: "pool " + v.name, Synopsis: "[flags] " + args, Summary: strings.Join(strings.Fields(what), " "),
		About: about, Flags: clidoc.Flags(cmd.FlagSet)}
}

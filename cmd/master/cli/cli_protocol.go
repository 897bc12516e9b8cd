package cli

import (
	"context"
	"io"
	"io/fs"
	"sort"
	"strings"

	"encoding/json"

	"github.com/skillpilot/skillpilot"
	"github.com/skillpilot/skillpilot/protocol"
)

// protocolDoc prints PROTOCOL.md, the normative description of a session
// directory, from the binary itself; with --json, one document holding it
// and the JSON Schema of every file (document 001's protocol-help, for a
// program or an agent that must learn the protocol on a host with only the
// binaries).
func (c *cli) protocolDoc(_ context.Context, args []string) error {
	cmd := c.newCommand("", `
Print PROTOCOL.md, the file protocol every master and the runner follow, as built
into this binary. With --json: {"protocol_version", "document" (the Markdown),
"schemas" (file name: JSON Schema of that file)}.`, false)
	pos, err := cmd.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usageErr("unexpected arguments %q", pos)
	}
	if !c.json {
		_, err := io.WriteString(c.stdout, skillpilot.Protocol)
		return err
	}
	schemas := map[string]json.RawMessage{}
	sfs := protocol.Schemas()
	names, err := fs.Glob(sfs, "*.json")
	if err != nil {
		return err
	}
	sort.Strings(names)
	for _, n := range names {
		b, err := fs.ReadFile(sfs, n)
		if err != nil {
			return err
		}
		schemas[strings.TrimSuffix(n, ".json")] = b
	}
	c.printJSON(map[string]any{"protocol_version": protocol.Version, "document": skillpilot.Protocol, "schemas": schemas})
	return nil
}

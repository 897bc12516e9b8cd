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

// protocolFlags is master protocol's flags (none of its own; see its
// entry in verbs) and its run: it prints PROTOCOL.md, the normative
// description of a session directory, from the binary itself; with
// --json, one document holding it and the JSON Schema of every file
// (document 001's protocol-help, for a program or an agent that must
// learn the protocol on a host with only the binaries).
func protocolFlags(cmd *command) runFunc {
	return func(_ context.Context, pos []string) error {
		c := cmd.c
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
}

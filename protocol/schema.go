package protocol

import (
	"embed"
	"io/fs"
)

//go:embed schema/*.json
var schemas embed.FS

// Schemas holds a JSON Schema (draft 2020-12) for every file of the
// protocol, named after the file it describes: command.json, result.json,
// state.json, heartbeat.json, lease.json, cancel.json, stop.json, request.json (a mailbox
// request), reply.json (its reply) and event.json.
func Schemas() fs.FS {
	sub, err := fs.Sub(schemas, "schema")
	if err != nil {
		panic(err) // The embedded tree is fixed at build time.
	}
	return sub
}

// Package mcpserver is `master mcp`: a Model Context Protocol server (on the
// official Go SDK, github.com/modelcontextprotocol/go-sdk) that lets an AI
// agent drive a SkillPilot session. Every tool call is an ordinary master
// request made with package master: commands an agent runs are queued,
// executed, archived and logged exactly like any other client's.
//
// Tools: run, submit, wait, read_output, wait_for, tail, cancel, send,
// status (see toolDefs; docs/mcp.md documents their schemas). Output comes back as a
// bounded preview (head and tail within a byte budget) with the size, sha256
// and path of the whole, read exactly by range with read_output; nothing
// larger than the budget is ever sent inline, whatever a command printed.
//
// wait_for follows the cursor rules of the agent PTY data model: one cursor
// (resume_cursor); the first match at or after from_cursor is returned,
// never a later one, and resume_cursor is the end of the match; on a
// timeout resume_cursor is the spool size.
//
// The server guarantees: every request line it reads is answered, also
// the lines the SDK would end the session on (a batch, an id that is an
// object, a line over MaxLine: drain.go); --allow and --deny are checked
// before anything reaches the session, for send against the whole line
// the tool will read; --read-only offers only tools that change nothing.
package mcpserver

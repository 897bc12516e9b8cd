package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/skillpilot/skillpilot/master"
)

// toolDef is one tool of the server: its name, its access (--read-only
// keeps only the `reads` tools and refuses calls to the others), and how to
// add it to a server.
//
// Adding a tool is one handler method and one line in toolDefs (as `send`,
// input to the running command, in tool_send.go).
type toolDef struct {
	name    string
	access  access
	desc    string
	in, out reflect.Type // documented in docs/mcp.md (see TestDocsToolReference)
	add     func(*mcp.Server, *handler)
}

type access int

const (
	changes  access = iota // queues or cancels commands
	observes               // changes nothing, yet not offered by --read-only (wait: an agent's wait belongs with its run)
	reads                  // offered by --read-only
)

// toolDefs lists the tools (tools/list sorts them by name).
var toolDefs = []toolDef{
	def("run", changes, descRun, (*handler).run),
	def("submit", changes, descSubmit, (*handler).submit),
	def("wait", observes, descWait, (*handler).wait),
	def("read_output", reads, descReadOutput, (*handler).readOutput),
	def("wait_for", reads, descWaitFor, (*handler).waitFor),
	def("tail", reads, descTail, (*handler).tail),
	def("cancel", changes, descCancel, (*handler).cancel),
	def("send", changes, descSend, (*handler).send),
	def("signal", changes, descSignal, (*handler).signal),
	def("resize", changes, descResize, (*handler).resize),
	def("status", reads, descStatus, (*handler).status),
}

// def binds a typed handler method: the SDK derives the input and output
// schemas from In and Out (field tags `jsonschema` are the descriptions),
// validates arguments against the input schema, and turns a returned error
// into a tool error (isError, with the message as text, followed by the
// error's context as JSON when it has one: withContext). Every call is
// logged.
func def[In, Out any](name string, acc access, desc string, fn func(*handler, context.Context, *mcp.CallToolRequest, In) (Out, error)) toolDef {
	return toolDef{name: name, access: acc, desc: desc, in: reflect.TypeFor[In](), out: reflect.TypeFor[Out](), add: func(s *mcp.Server, h *handler) {
		mcp.AddTool(s, &mcp.Tool{Name: name, Description: desc, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: acc != changes}},
			func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
				start := time.Now()
				out, err := fn(h, ctx, req, in)
				err = withContext(err)
				if err != nil {
					h.cfg.Logger.Info("tool call", "tool", name, "error", err, "ms", time.Since(start).Milliseconds())
				} else {
					h.cfg.Logger.Info("tool call", "tool", name, "ms", time.Since(start).Milliseconds())
				}
				return nil, out, err
			})
	}}
}

const (
	descRun = `Run a payload (Tcl by default) in the session's tool and wait for its result, at most wait_timeout_s ` +
		`(capped by the server). Returns status (ok, error, timeout, cancelled), the Tcl value, error, duration, ` +
		`and the output as a bounded preview: head and tail within the server's byte budget, total size, sha256 ` +
		`and path; fetch any byte range with read_output. If the wait ends first, done is false: call wait with ` +
		`the cmd_id. The command is an ordinary SkillPilot command: it queues behind others and is kept in the ` +
		`session's audit trail.`
	descSubmit = `Queue a payload without waiting; returns its cmd_id and resume_cursor (the spool size when it ` +
		`was queued: pass it to wait_for to watch this command's output). Use wait for the result.`
	descWait = `Wait (at most wait_timeout_s, capped by the server) for a command's result; same answer as run. ` +
		`Changes nothing, but is left out with --read-only.`
	descReadOutput = `Read an exact byte range of a command's output file (offset, length; length capped by the ` +
		`server). data is UTF-8 text when the bytes are valid UTF-8, else base64 (see encoding). Works while ` +
		`the command runs: size is the output so far.`
	descWaitFor = `Wait until the RE2 pattern matches the session's output spool (log/session.out, every byte ` +
		`the tool printed, raw) at or after from_cursor. The first match at or after from_cursor is returned, ` +
		`never a later one: resume_cursor is match_span.end. On timeout matched is false, error is "timeout" and ` +
		`resume_cursor is the spool size. Pass resume_cursor as from_cursor of the next call, and never skip a match.`
	descTail = `Read a bounded range of the session's output spool (log/session.out, raw bytes) from ` +
		`from_cursor (negative: that many bytes before the end). Returns data, the offset it starts at, and ` +
		`resume_cursor (offset + bytes returned) for the next call.`
	descCancel = `Cancel a command (queued or running) by cmd_id, or with no cmd_id the running command. Waits ` +
		`(at most wait_timeout_s, default 10 s) for its result and reports the outcome.`
	descSignal = `Send a signal to the tool while a command runs (INT, QUIT, TSTP, CONT, HUP, USR1, USR2, TERM, KILL), ` +
		`as master signal does: no cancel semantics, the command goes on or ends as the tool decides (KILL or TERM ` +
		`kill plain tclsh: the command ends tool_died and the tool restarts). A command that is not running gets nothing ` +
		`(outcome not_running with cmd_state). Use cancel to stop a command.`
	descResize = `Set the size of the tool's terminal (cols x rows, 1 to 10000 each); its foreground process group ` +
		`gets SIGWINCH and later starts of the tool keep the size. Outcome delivered.`
	descSend = `Answer a question the running command asks (a prompt such as "Overwrite? (y/n) ", a Tcl ` +
		`gets stdin): type text (and a newline) into the tool while cmd_id runs. With expect, the text is typed ` +
		`only once the pattern matches the command's output, searched from the end of the last match a send ` +
		`consumed, so asking twice is answered twice; a queued command is waited for. Input for a command ` +
		`that is not running is refused (outcome not_running, cmd_state says why) and never reaches another ` +
		`command; text the command does not read is dropped when it ends. secret keeps a password out of the ` +
		`session's files. The server's --allow/--deny rules apply to text as to payloads.`
	descStatus = `The session's state: runner alive or not, phase, running command, queue depth, and ` +
		`resume_cursor (the spool size now). With a pool and no session: every session.`
)

// withContext appends err's context (master.ErrorContext: the cmd_id, the
// grace, the resume_cursor, ...) to its message as
// "(context: {...})", the one place a tool error's text can carry it: the
// SDK turns a handler's error into text content only (PROTOCOL.md section
// 19, "Errors carry context").
func withContext(err error) error {
	ctx := master.ErrorContext(err)
	if len(ctx) == 0 {
		return err
	}
	b, jerr := json.Marshal(ctx)
	if jerr != nil {
		return err
	}
	return fmt.Errorf("%w (context: %s)", err, b)
}

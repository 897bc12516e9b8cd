package runner

import (
	"fmt"

	"github.com/skillpilot/skillpilot/protocol"
)

// Output budgets (PROTOCOL.md 6.3). A command's budget is its
// max_output_bytes, else the runner's --max-output-bytes; 0 is none. Its
// output file keeps the first budget bytes of what it printed; the first
// byte past the budget makes the runner stop it by its cancel policy, as
// a cancel would, and its result is an error with code output_limit. What
// it prints until the stop takes effect is counted, not kept (the spool,
// log/session.out, still records it, as it records everything the tool
// prints).

// clip returns the part of b the output budget lets c keep, and counts the
// rest. It runs inside the framer's sink: it only records that the budget
// was passed; enforceBudget acts on it.
func (c *running) clip(b []byte) []byte {
	if c.budget <= 0 {
		return b
	}
	room := max(c.budget-c.bytes, 0)
	if int64(len(b)) <= room {
		return b
	}
	c.dropped += int64(len(b)) - room
	return b[:room]
}

// enforceBudget stops the running command once it printed past its budget.
// It runs after each chunk, outside the framer (an interrupt changes what
// the framer captures), and acts once per command.
func (r *Runner) enforceBudget() {
	c := r.cur
	if c == nil {
		return
	}
	if budget, ok := c.overBudget(); ok {
		r.interrupt(protocol.StatusError, "", fmt.Sprintf("output limit: printed more than max_output_bytes (%d)", budget), "")
	}
}

// overBudget reports, once per command, that c printed past its budget
// (and returns the budget) when nothing else ends it already: the budget
// then is what ends it.
func (c *running) overBudget() (int64, bool) {
	if c.dropped == 0 || c.limitStop {
		return 0, false
	}
	c.limitStop = true
	if c.endStatus != "" {
		return 0, false // Already ending (timeout, cancel): describeLimit notes the cut.
	}
	c.limitEnds = true
	return c.budget, true
}

// describeLimit makes the result of a command that printed past its
// budget say so: an error with code output_limit when the budget is what
// ended it (or nothing else went wrong), otherwise a note in its error.
// Its stats and output_sha256 already describe the kept bytes.
func (c *running) describeLimit(res *protocol.Result) {
	if c.dropped == 0 {
		return
	}
	msg := fmt.Sprintf("output limit: the command printed more than max_output_bytes (%d); %s holds its first %d bytes, %d more were not kept",
		c.budget, res.OutputPath, c.bytes, c.dropped)
	if res.Error == nil || c.limitEnds {
		// The code and message become the budget's; the context keeps what
		// the end already said (how the tool ended: signal, exit_code).
		var ctx map[string]any
		if res.Error != nil {
			ctx = res.Error.Context
		}
		res.Status = protocol.StatusError
		res.Error = &protocol.Error{Code: protocol.CodeOutputLimit, Message: msg, Context: ctx}
	} else {
		res.Error.Message += "; " + msg
	}
	res.Error.Context = addContext(res.Error.Context, "max_output_bytes", c.budget, "file", res.OutputPath)
}

package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
)

// withdraw takes back a queued command (issue 26.9), named by cmd_id or by
// its file's name (issue 34.5), followed where a pool moved it (34.4).
func (c *cli) withdraw(_ context.Context, args []string) error {
	cmd := c.newCommand("CMD_ID", `
Take back a command no runner has claimed: its file leaves queue/ (for
withdrawn/), so it never runs and gets no result (a retry cannot run it
twice). A command file's name, or a path ending in one, names exactly that
file; a cmd_id the first file with it. A command a pool moved is followed and
taken back where it is now. Needs no runner. Exit 0 withdrawn; 7 it is running
(cancel it instead), already has its result, or was withdrawn before; 6
unknown: it will not run. With --json: {"protocol_version","cmd_id",
"withdrawn":true,"name"} (name: the file taken back, in the session --json
"session" names when a pool moved it elsewhere).`, false)
	pos, err := cmd.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErr("one CMD_ID expected")
	}
	s, err := cmd.open()
	if err != nil {
		return err
	}
	command, err := s.Withdraw(pos[0])
	if err != nil {
		return err
	}
	if c.json {
		reply := map[string]any{"protocol_version": protocol.Version, "cmd_id": command.ID, "withdrawn": true, "name": command.Name}
		if dir := command.Session().Dir(); dir != s.Dir() {
			reply["session"] = dir
		}
		c.printJSON(reply)
		return nil
	}
	fmt.Fprintf(c.stdout, "withdrawn: %s (it will not run)\n", command.ID)
	return nil
}

// noRunnerHint reports err of a wait that gave up for want of a runner
// while cmd is still queued, then says on a line of its own how to take
// the command back; it returns what Main should see (exitOnly then, the
// error being reported). Any other err is returned as it is.
func (c *cli) noRunnerHint(s *master.Session, cmd *master.Command, err error) error {
	if !errors.Is(err, master.ErrRunnerNotAlive) || commandWhere(s, cmd) != "queued" {
		return err
	}
	exit := c.fail(err)
	c.diag("to take %s back: master withdraw %s --session %s", cmd.ID, cmd.ID, s.Dir())
	return exitOnly(exit)
}

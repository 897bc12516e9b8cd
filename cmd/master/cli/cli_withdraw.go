package cli

import (
	"errors"
	"fmt"

	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
)

// withdraw takes back a queued command (issue 26.9).
func (c *cli) withdraw(args []string) error {
	cmd := c.newCommand("withdraw", "CMD_ID", `
Take back a command no runner has claimed: its file leaves queue/, so it never
runs and gets no result (a retry cannot run it twice). Needs no runner. Exit 0
withdrawn; 7 it is running (cancel it instead) or already has its result; 6
unknown cmd_id. With --json: {"protocol_version","cmd_id","withdrawn":true}.`, false)
	pos, err := cmd.parse(args)
	if err != nil {
		return err
	}
	_, command, err := c.lookup(cmd, pos)
	if errors.Is(err, master.ErrUnknownCmdID) {
		// A withdrawn command leaves no file: a second withdraw finds
		// nothing, and says why that may be.
		return fmt.Errorf("%w (a command withdrawn earlier leaves nothing behind)", err)
	}
	if err != nil {
		return err
	}
	if err := command.Withdraw(); err != nil {
		return err
	}
	if c.json {
		c.printJSON(map[string]any{"protocol_version": protocol.Version, "cmd_id": command.ID, "withdrawn": true})
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

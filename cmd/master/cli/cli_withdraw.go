package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
)

// withdrawFlags is master withdraw's flags (none of its own; see its
// entry in verbs) and its run: it takes back a queued command, named
// by cmd_id or by its file's name, followed where a pool moved it.
func withdrawFlags(cmd *command) runFunc {
	return func(_ context.Context, pos []string) error {
		c := cmd.c
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

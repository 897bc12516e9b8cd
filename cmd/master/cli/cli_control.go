package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
)

func cancelFlags(cmd *command) runFunc {
	var timeout time.Duration
	cmd.Duration(&timeout, "wait-timeout", 0, "how long to wait for the runner's reply (0: forever); exit 3 when exceeded")
	return func(ctx context.Context, pos []string) error {
		c := cmd.c
		if len(pos) > 1 {
			return usageErr("at most one CMD_ID")
		}
		s, err := cmd.open()
		if err != nil {
			return err
		}
		ctx, cancel := withTimeout(ctx, timeout)
		defer cancel()
		var rep *protocol.ControlReply
		if len(pos) == 0 {
			rep, err = s.CancelCurrent(ctx)
		} else {
			rep, err = s.Cancel(ctx, pos[0])
		}
		return c.reply(rep, err, "")
	}
}

// reply reports a control request's reply: the reply document with --json
// (and then no second, error document), else "<outcome>: <message>" on
// stdout for a success (done is added when not empty) or the error on
// stderr.
func (c *cli) reply(rep *protocol.ControlReply, err error, done string) error {
	if rep == nil {
		return err
	}
	if c.json {
		c.printJSON(rep)
		if err != nil {
			c.json = false
		}
		return err
	}
	if err == nil {
		fmt.Fprintf(c.stdout, "%s: %s\n", rep.Outcome, rep.Message)
		if done != "" {
			fmt.Fprintln(c.stdout, done)
		}
	}
	return err
}

func stopFlags(cmd *command) runFunc {
	force := cmd.Bool("force", false, "end the current command at once")
	wait := cmd.Bool("wait", false, "wait until the runner has stopped")
	var timeout time.Duration
	cmd.Duration(&timeout, "wait-timeout", 0, "how long to wait for the reply (and with --wait the stop) (0: forever)")
	return func(ctx context.Context, pos []string) error {
		c := cmd.c
		if len(pos) > 0 {
			return usageErr("stop takes no arguments")
		}
		s, err := cmd.open()
		if err != nil {
			return err
		}
		mode := protocol.StopGraceful
		if *force {
			mode = protocol.StopForce
		}
		ctx, cancel := withTimeout(ctx, timeout)
		defer cancel()
		var rep *protocol.ControlReply
		p, err := s.Stop(ctx, mode)
		switch {
		case err == nil && *wait:
			rep, err = p.Wait(ctx)
		case err == nil:
			rep, err = p.Reply(ctx)
		}
		done := ""
		if *wait && err == nil {
			done = "stopped"
		}
		return c.reply(rep, err, done)
	}
}

func leaseFlags(cmd *command) runFunc {
	var ttl time.Duration
	cmd.Duration(&ttl, "ttl", 0, "lease time to live (required)")
	keep := cmd.Bool("keep", false, "keep renewing every ttl/3 until interrupted")
	return func(ctx context.Context, pos []string) error {
		c := cmd.c
		if len(pos) > 0 {
			return usageErr("lease takes no arguments")
		}
		if ttl <= 0 {
			return usageErr("--ttl is required")
		}
		s, err := cmd.open()
		if err != nil {
			return err
		}
		id := "lease-" + master.NewCmdID()
		if !*keep {
			l, err := s.WriteLease(id, ttl)
			if err == nil && c.json {
				c.printJSON(l)
			}
			return err
		}
		t := time.NewTicker(max(ttl/3, 10*time.Millisecond))
		defer t.Stop()
		for {
			l, err := s.WriteLease(id, ttl)
			switch {
			case err != nil && c.json:
				c.printJSONLine(map[string]any{"protocol_version": protocol.Version, "error": errorJSON(master.CodeIO, err)})
			case err != nil:
				c.diag("renew lease: %v", err)
			case c.json:
				c.printJSONLine(l)
			}
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
			}
		}
	}
}

func readyFlags(cmd *command) runFunc {
	var timeout time.Duration
	cmd.Duration(&timeout, "wait-timeout", time.Minute, "how long to wait; exit 3 when exceeded")
	return func(ctx context.Context, pos []string) error {
		c := cmd.c
		if len(pos) > 0 {
			return usageErr("ready takes no arguments")
		}
		if cmd.session == "" {
			return usageErr("--session is required (or set SP_SESSION_DIR)")
		}
		ctx, cancel := withTimeout(ctx, timeout)
		defer cancel()
		st, err := master.WaitReady(ctx, cmd.session, master.WaitOptions{WaitForRunner: cmd.waitForRunner})
		if c.json && err == nil {
			c.printJSON(st)
		}
		return err
	}
}

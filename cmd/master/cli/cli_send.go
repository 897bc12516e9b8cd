package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
)

func sendFlags(cmd *command) runFunc {
	expect := cmd.String("expect", "", "wait for this RE2 regular expression in the command's output first")
	var expectTimeout, timeout time.Duration
	cmd.Duration(&expectTimeout, "expect-timeout", 30*time.Second, "how long --expect waits (the runner's clock); exit 3 when it passes")
	from := cmd.Decimal64("expect-from", -1, "search from this output `OFFSET` instead of the expect cursor")
	secret := cmd.Bool("secret", false, "write the bytes nowhere in the session (no echo, no hash, no log)")
	noNewline := cmd.Bool("no-newline", false, "do not add a newline to TEXT")
	file := cmd.String("file", "", "send the bytes of this file (- for stdin)")
	cmd.Duration(&timeout, "wait-timeout", 0, "how long to wait for the runner's reply (0: forever); exit 3 when exceeded")
	return func(ctx context.Context, pos []string) error {
		c := cmd.c
		if len(pos) < 1 || len(pos) > 2 {
			return usageErr("send takes CMD_ID and at most one TEXT (see 'master send --help')")
		}
		fromGiven := false
		cmd.Visit(func(f *flag.Flag) { fromGiven = fromGiven || f.Name == "expect-from" })
		if fromGiven && *from < 0 {
			return usageErr("--expect-from %d: an output offset is 0 or more (leave it out to search from the expect cursor)", *from)
		}
		if len(pos) == 2 && *file != "" {
			return usageErr("give TEXT or --file, not both")
		}
		var data []byte
		var err error
		switch {
		case len(pos) == 2:
			data = []byte(pos[1])
			if !*noNewline {
				data = append(data, '\n')
			}
		case *file == "" || *file == "-":
			data, err = readBounded(c.stdin, "stdin")
		default:
			data, err = readFileBounded(*file)
		}
		if err != nil {
			return err
		}
		s, err := cmd.open()
		if err != nil {
			return err
		}
		opts := master.SendOptions{Expect: *expect, ExpectTimeout: expectTimeout, Secret: *secret}
		if *from >= 0 {
			opts.ExpectFrom = from
		}
		if *expect != "" && expectTimeout == 0 {
			opts.ExpectTimeout = time.Millisecond // 0 means "look once", not "the default".
		}
		ctx, cancel := withTimeout(ctx, timeout)
		defer cancel()
		rep, err := s.Send(ctx, pos[0], data, opts)
		if rep != nil && err == nil && !c.json {
			fmt.Fprintln(c.stdout, describeSend(rep))
			return nil
		}
		return c.reply(rep, err, "")
	}
}

// readBounded reads at most protocol.MaxSendBytes from r.
func readBounded(r io.Reader, what string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, protocol.MaxSendBytes+1))
	if err != nil {
		return nil, fmt.Errorf("master: read %s: %w", what, err)
	}
	if len(b) > protocol.MaxSendBytes {
		return nil, usageErr("%s holds more than %d bytes, the limit of one send", what, protocol.MaxSendBytes)
	}
	return b, nil
}

func readFileBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, usageErr("--file: %v", err)
	}
	defer f.Close()
	return readBounded(f, path)
}

func signalFlags(cmd *command) runFunc {
	var timeout time.Duration
	cmd.Duration(&timeout, "wait-timeout", 0, "how long to wait for the runner's reply (0: forever); exit 3 when exceeded")
	return func(ctx context.Context, pos []string) error {
		c := cmd.c
		if len(pos) != 2 {
			return usageErr("signal takes CMD_ID and a signal name (%v)", protocol.Signals)
		}
		s, err := cmd.open()
		if err != nil {
			return err
		}
		ctx, cancel := withTimeout(ctx, timeout)
		defer cancel()
		rep, err := s.Signal(ctx, pos[0], pos[1])
		return c.reply(rep, err, "")
	}
}

func resizeFlags(cmd *command) runFunc {
	var timeout time.Duration
	cmd.Duration(&timeout, "wait-timeout", 0, "how long to wait for the runner's reply (0: forever); exit 3 when exceeded")
	return func(ctx context.Context, pos []string) error {
		c := cmd.c
		if len(pos) != 2 {
			return usageErr("resize takes COLS and ROWS")
		}
		cols, err1 := strconv.Atoi(pos[0])
		rows, err2 := strconv.Atoi(pos[1])
		if err1 != nil || err2 != nil {
			return usageErr("resize %s %s: COLS and ROWS are numbers", pos[0], pos[1])
		}
		s, err := cmd.open()
		if err != nil {
			return err
		}
		ctx, cancel := withTimeout(ctx, timeout)
		defer cancel()
		rep, err := s.Resize(ctx, cols, rows)
		return c.reply(rep, err, "")
	}
}

// describeSend is the line the CLI prints for a delivered send.
func describeSend(rep *protocol.ControlReply) string {
	msg := fmt.Sprintf("%s: %s", rep.Outcome, rep.Message)
	if rep.Outcome == protocol.OutcomeDelivered {
		msg += fmt.Sprintf(" (spool offset %d)", rep.SpoolOffset)
	}
	return msg
}

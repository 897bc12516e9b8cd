package toolcheck

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
)

// exact: the payload's output is exactly want.
func (c *checker) exact(name, payload, want string) {
	if payload == "" {
		c.add(Check{Name: name})
		return
	}
	_, res, out, err := c.submit(payload, master.SubmitOptions{})
	switch {
	case err != nil:
		c.add(Check{Name: name, Status: Fails, Detail: err.Error()})
	case res.Status != protocol.StatusOK:
		c.add(Check{Name: name, Status: Fails, Detail: c.ended(res, out)})
	case out != want:
		c.add(Check{Name: name, Status: Fails, Detail: fmt.Sprintf("printed %s, want %s", quote(out), quote(want))})
	default:
		c.add(Check{Name: name, Status: Holds, Detail: quote(out)})
	}
}

func (c *checker) checkValue() {
	if c.l.value == "" {
		c.add(Check{Name: "value"})
		return
	}
	_, res, out, err := c.submit(c.l.value, master.SubmitOptions{})
	switch {
	case err != nil:
		c.add(Check{Name: "value", Status: Fails, Detail: err.Error()})
	case res.Status != protocol.StatusOK:
		c.add(Check{Name: "value", Status: Fails, Detail: c.ended(res, out)})
	case res.Value == nil || *res.Value != c.l.valueWant:
		c.add(Check{Name: "value", Status: Fails, Detail: fmt.Sprintf("value %s, want %q", valueOf(res), c.l.valueWant)})
	default:
		c.add(Check{Name: "value", Status: Holds, Detail: fmt.Sprintf("%q", *res.Value)})
	}
}

func valueOf(res *protocol.Result) string {
	if res.Value == nil {
		return "none"
	}
	return quote(*res.Value)
}

func (c *checker) checkError() {
	if c.l.errPayload == "" {
		c.add(Check{Name: "error"})
		return
	}
	_, res, out, err := c.submit(c.l.errPayload, master.SubmitOptions{})
	switch {
	case err != nil:
		c.add(Check{Name: "error", Status: Fails, Detail: err.Error()})
	case res.Status != protocol.StatusError || res.ExitReason == protocol.ReasonToolExit || res.ExitReason == protocol.ReasonToolDied:
		c.add(Check{Name: "error", Status: Fails, Detail: "a failing command ended " + c.ended(res, out)})
	case res.Error == nil || !strings.Contains(res.Error.Message, c.l.errMsg):
		c.add(Check{Name: "error", Status: Fails, Detail: fmt.Sprintf("error %s, want one naming %q", quote(errMessage(res)), c.l.errMsg)})
	case strings.Contains(out, "after"):
		c.add(Check{Name: "error", Status: Fails, Detail: "the command went on after its error: " + quote(out)})
	default:
		c.add(Check{Name: "error", Status: Holds, Detail: "error " + quote(errMessage(res))})
	}
}

func errMessage(res *protocol.Result) string {
	if res.Error == nil {
		return ""
	}
	return res.Error.Message
}

func (c *checker) checkBig() {
	if c.l.big == "" {
		c.add(Check{Name: "big_error"})
		return
	}
	_, res, out, err := c.submit(c.l.big, master.SubmitOptions{})
	if err != nil {
		c.add(Check{Name: "big_error", Status: Fails, Detail: err.Error()})
		return
	}
	var missing, ran []string
	for _, l := range c.l.bigBefore {
		if !strings.Contains(out, l+"\n") {
			missing = append(missing, l)
		}
	}
	for _, l := range c.l.bigAfter {
		if strings.Contains(out, l+"\n") {
			ran = append(ran, l)
		}
	}
	size := fmt.Sprintf("%d bytes", len(c.l.big))
	switch {
	case res.Status != protocol.StatusError || res.ExitReason == protocol.ReasonToolExit || res.ExitReason == protocol.ReasonToolDied:
		c.add(Check{Name: "big_error", Status: Fails, Detail: fmt.Sprintf("%s with an error at line %d ended %s", size, c.l.bigErrAt, c.ended(res, cut(out)))})
	case res.Error == nil || !strings.Contains(res.Error.Message, c.l.bigMsg):
		c.add(Check{Name: "big_error", Status: Fails, Detail: fmt.Sprintf("%s: error %s, want the payload's own (%q)", size, quote(errMessage(res)), c.l.bigMsg)})
	case len(ran) > 0:
		c.add(Check{Name: "big_error", Status: Fails, Detail: fmt.Sprintf("%s: %d lines after the error ran (%q...)", size, len(ran), ran[0])})
	case len(missing) > 0:
		c.add(Check{Name: "big_error", Status: Fails, Detail: fmt.Sprintf("%s: %d lines before the error are not in the output (%q...)", size, len(missing), missing[0])})
	default:
		c.add(Check{Name: "big_error", Status: Holds, Detail: fmt.Sprintf("%s: stopped at line %d, error %s", size, c.l.bigErrAt, quote(errMessage(res)))})
	}
}

// state says whether the state the battery set is still in the tool.
func (c *checker) state(payload, want string) (bool, error) {
	_, res, out, err := c.submit(payload, master.SubmitOptions{})
	if err != nil {
		return false, err
	}
	if c.l.byValue {
		return res.Value != nil && *res.Value == want, nil
	}
	return strings.TrimSpace(out) == want, nil
}

// waitPrinted submits payload and waits until it has printed text.
func (c *checker) waitPrinted(payload, text string, opts master.SubmitOptions) (*master.Command, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.o.StepTimeout)
	defer cancel()
	cmd, err := c.sess.Submit(ctx, payload, opts)
	if err != nil {
		return nil, err
	}
	for {
		if b, err := cmd.Output(0, -1); err == nil && bytes.Contains(b, []byte(text)) {
			return cmd, nil
		}
		if res, err := cmd.Result(); err == nil && res != nil {
			return cmd, fmt.Errorf("it ended %s before it printed %q", res.Status, text)
		}
		select {
		case <-ctx.Done():
			return cmd, fmt.Errorf("it did not print %q within %s", text, c.o.StepTimeout)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (c *checker) checkCancel() {
	if c.l.long == "" {
		c.add(Check{Name: "cancel"})
		return
	}
	fail := func(format string, args ...any) {
		c.add(Check{Name: "cancel", Status: Fails, Detail: fmt.Sprintf(format, args...)})
	}
	if _, res, out, err := c.submit(c.l.setState, master.SubmitOptions{}); err != nil || res.Status != protocol.StatusOK {
		if err != nil {
			fail("setting a variable first: %v", err)
		} else {
			fail("setting a variable first: %s", c.ended(res, out))
		}
		return
	}
	cmd, err := c.waitPrinted(c.l.long, c.l.longStarted, master.SubmitOptions{})
	if err != nil {
		fail("a long command: %v", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.o.StepTimeout+c.o.ResyncWait+c.o.KillGrace+30*time.Second)
	defer cancel()
	t0 := time.Now()
	if _, err := c.sess.Cancel(ctx, cmd.ID); err != nil {
		fail("cancel request: %v", err)
		return
	}
	res, out, err := c.wait(ctx, cmd)
	took := time.Since(t0)
	if err != nil {
		fail("%v", err)
		return
	}
	if res.Status != protocol.StatusCancelled {
		fail("a cancelled command ended %s", c.ended(res, out))
		return
	}
	kept, err := c.state(c.l.getState, c.l.stateWant)
	if err != nil {
		fail("after the cancel: %v", err)
		return
	}
	restarted := res.ToolRestarted
	ch := Check{Name: "cancel", Status: Holds, TookMS: took.Milliseconds(), KeptState: &kept, ToolRestarted: &restarted}
	after := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(out), c.l.longStarted))
	said := ""
	if after != "" {
		said = " (it printed " + quote(after) + ")"
	}
	switch {
	case !restarted && kept:
		c.cancelHow = "kept"
		ch.Detail = "Ctrl-C: the tool returned to its prompt and kept its state" + said
	case !restarted:
		ch.Status = Fails
		ch.Detail = "Ctrl-C: the tool was not restarted, yet a variable set before the cancel is gone" + said
	case res.Signal == "SIGINT":
		c.cancelHow = "died"
		ch.Detail = "Ctrl-C: the tool died of it and was restarted; its state is gone" + c.initsAgain() + said
	default:
		c.cancelHow = "terminated"
		how := "it was terminated"
		switch {
		case res.Signal != "":
			how += " (" + res.Signal + ")"
		case res.ExitCode != nil:
			how += fmt.Sprintf(" (it exited with code %d)", *res.ExitCode)
		}
		ch.Detail = fmt.Sprintf("Ctrl-C did not bring the tool back to its prompt within --resync-wait (%s)%s: %s and restarted; its state is gone%s",
			c.o.ResyncWait, said, how, c.initsAgain())
	}
	if kept && restarted {
		ch.Status = Fails
		ch.Detail = "the tool was restarted, yet a variable set before the cancel is still there"
	}
	c.add(ch)
}

func (c *checker) checkSend() {
	if _, na := c.l.notApplicable["send"]; na || c.l.read == "" {
		c.add(Check{Name: "send"})
		return
	}
	fail := func(format string, args ...any) {
		c.add(Check{Name: "send", Status: Fails, Detail: fmt.Sprintf(format, args...)})
	}
	cmd, err := c.waitPrinted(c.l.read, "name? ", master.SubmitOptions{})
	if err != nil {
		fail("a command that asks: %v", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.o.StepTimeout+c.o.ResyncWait+c.o.KillGrace+30*time.Second)
	defer cancel()
	if _, err := c.sess.Send(ctx, cmd.ID, []byte(readText+"\n"), master.SendOptions{Expect: `name\? $`, ExpectTimeout: c.o.StepTimeout}); err != nil {
		_, _ = c.sess.Cancel(ctx, cmd.ID)
		_, out, _ := c.wait(ctx, cmd)
		fail("%v; the command printed %s", err, quote(out))
		return
	}
	res, out, err := c.wait(ctx, cmd)
	switch {
	case err != nil:
		fail("%v", err)
	case res.Status != protocol.StatusOK:
		fail("the command that read ended %s", c.ended(res, out))
	case !strings.Contains(out, c.l.readWant):
		fail("it printed %s, want %s", quote(out), quote(c.l.readWant))
	default:
		c.add(Check{Name: "send", Status: Holds, Detail: "read " + quote(readText) + " as typed"})
	}
}

// checkRestart kills the tool (SIGKILL) while a command runs: the command
// ends tool_died, the runner starts the tool again and runs every --init
// again before the next command.
func (c *checker) checkRestart() {
	fail := func(format string, args ...any) {
		c.add(Check{Name: "restart", Status: Fails, Detail: fmt.Sprintf(format, args...)})
	}
	// A driver the check does not know has no long command: its tool is
	// killed at its prompt.
	long, started := c.l.long, c.l.longStarted
	if c.ownInit != "" {
		ran, err := c.state(c.l.initSeen, c.l.initWant)
		switch {
		case err != nil:
			fail("asking whether the check's --init ran: %v", err)
			return
		case !ran:
			fail("the check's --init did not take effect at the first start: --init scripts do not run on this tool")
			return
		}
	}
	st, err := c.sess.ReadState()
	if err != nil {
		fail("%v", err)
		return
	}
	var cmd *master.Command
	if long != "" {
		if cmd, err = c.waitPrinted(long, started, master.SubmitOptions{}); err != nil {
			fail("a long command: %v", err)
			return
		}
		if st, err = c.sess.ReadState(); err != nil {
			fail("%v", err)
			return
		}
	}
	if st.ToolPID <= 1 {
		fail("state.json names no tool pid")
		return
	}
	t0 := time.Now()
	if err := syscall.Kill(st.ToolPID, syscall.SIGKILL); err != nil {
		fail("kill %d: %v", st.ToolPID, err)
		return
	}
	detail := "killed (SIGKILL) at its prompt"
	if cmd != nil {
		ctx, cancel := context.WithTimeout(context.Background(), c.o.StepTimeout)
		res, out, err := c.wait(ctx, cmd)
		cancel()
		switch {
		case err != nil:
			fail("the command the kill ended: %v", err)
			return
		case res.ExitReason != protocol.ReasonToolDied || !res.ToolRestarted:
			fail("the command the kill ended: %s", c.ended(res, out))
			return
		}
		detail = "killed (SIGKILL) while a command ran: it ended tool_died"
	}
	// The next command waits for the restarted tool.
	if c.ownInit != "" {
		ran, err := c.state(c.l.initSeen, c.l.initWant)
		switch {
		case err != nil:
			fail("%s; after it: %v", detail, err)
			return
		case !ran:
			fail("%s; the restarted tool did not run the check's --init again", detail)
			return
		}
	} else if _, res, out, err := c.submit(c.l.output, master.SubmitOptions{}); err != nil || res.Status != protocol.StatusOK {
		if err != nil {
			fail("%s; after it: %v", detail, err)
		} else {
			fail("%s; after it a command ended %s", detail, c.ended(res, out))
		}
		return
	}
	took := time.Since(t0)
	now, err := c.sess.ReadState()
	if err != nil || now.ToolStarts != st.ToolStarts+1 {
		fail("%s; tool_starts %d, want %d", detail, now.ToolStarts, st.ToolStarts+1)
		return
	}
	if c.initTrouble != "" {
		fail("%s; restarted, but the check's own --init failed at start: %s", detail, c.initTrouble)
		return
	}
	inits := "the check's --init ran again"
	switch n := len(c.o.Init); {
	case c.ownInit == "":
		inits = "it serves again (the check has no --init of its own in this tool's language)"
	case n > 0:
		inits = fmt.Sprintf("your %d --init script%s and the check's ran again", n, plural(n))
	}
	c.add(Check{Name: "restart", Status: Holds, TookMS: took.Milliseconds(), Detail: detail + "; restarted, " + inits})
}

func (c *checker) checkStop() {
	if c.stop == nil {
		c.add(Check{Name: "stop", Status: Fails, Detail: "the runner had already stopped"})
		return
	}
	st, _ := c.sess.ReadState()
	ctx, cancel := context.WithTimeout(context.Background(), c.o.KillGrace+30*time.Second)
	defer cancel()
	t0 := time.Now()
	p, err := c.sess.Stop(ctx, protocol.StopGraceful)
	if err == nil {
		_, err = p.Wait(ctx)
	}
	var runErr error
	select {
	case runErr = <-c.done:
		c.stop = nil
	case <-ctx.Done():
		c.add(Check{Name: "stop", Status: Fails, Detail: fmt.Sprintf("the runner did not stop within %s (%v)", c.o.KillGrace+30*time.Second, err)})
		return
	}
	took := time.Since(t0)
	switch {
	case runErr != nil:
		c.add(Check{Name: "stop", Status: Fails, Detail: runErr.Error()})
	case st.ToolPID > 1 && syscall.Kill(st.ToolPID, 0) == nil:
		c.add(Check{Name: "stop", Status: Fails, Detail: fmt.Sprintf("the tool (pid %d) outlived the runner", st.ToolPID)})
	default:
		c.add(Check{Name: "stop", Status: Holds, TookMS: took.Milliseconds(), Detail: "the runner stopped, and the tool with it"})
	}
}

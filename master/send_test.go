package master

import (
	"errors"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
)

// Session.Send answers a prompt through expect, refuses input for a command
// that is not running with typed errors, and Signal and Resize reach the
// tool.
func TestSendSignalResize(t *testing.T) {
	s := readyIn(t, startRunner(t))
	c, err := s.Submit(ctx(t), `puts -nonewline "Overwrite? (y/n) "; flush stdout; gets stdin a; puts "answer=$a"; set a`, SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := s.Send(ctx(t), c.ID, []byte("y\n"), SendOptions{Expect: `Overwrite\? \(y/n\) $`})
	if err != nil || rep.Outcome != protocol.OutcomeDelivered || *rep.Bytes != 2 || *rep.MatchEnd != 17 || rep.SHA256 == "" {
		t.Fatalf("%+v %v", rep, err)
	}
	res, err := c.Wait(ctx(t), WaitOptions{})
	if err != nil || *res.Value != "y" {
		t.Fatalf("%+v %v", res, err)
	}
	if out, _ := c.Output(0, 0); string(out) != "Overwrite? (y/n) answer=y\n" {
		t.Fatalf("output %q", out)
	}
	_, err = s.Send(ctx(t), c.ID, []byte("late\n"), SendOptions{})
	var re *RequestError
	if !errors.Is(err, ErrNotRunning) || !errors.As(err, &re) || re.Reply.CmdState != "finished" {
		t.Fatalf("send to a finished command: %v", err)
	}
	if code, exit := Classify(err); code != CodeNotRunning || exit != ExitNothingToDo {
		t.Fatalf("classify: %s %d", code, exit)
	}
	if _, err := s.Signal(ctx(t), "nosuch", "sigusr1"); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("signal to an unknown command: %v", err)
	}
	long, _ := s.Submit(ctx(t), `puts -nonewline "size? "; flush stdout; gets stdin; puts [exec stty size <@stdin]`, SubmitOptions{})
	_, err = s.Send(ctx(t), long.ID, []byte("x\n"), SendOptions{Expect: "never", ExpectTimeout: 200 * time.Millisecond})
	if !errors.Is(err, ErrExpectTimeout) {
		t.Fatalf("expect timeout: %v", err)
	}
	if code, exit := Classify(err); code != CodeExpectTimeout || exit != ExitTimeout {
		t.Fatalf("classify: %s %d", code, exit)
	}
	if rep, err := s.Resize(ctx(t), 120, 40); err != nil || rep.Outcome != protocol.OutcomeDelivered {
		t.Fatalf("resize %+v %v", rep, err)
	}
	if _, err := s.Send(ctx(t), long.ID, []byte("go\n"), SendOptions{Expect: `size\? `}); err != nil {
		t.Fatal(err)
	}
	if _, err := long.Wait(ctx(t), WaitOptions{}); err != nil {
		t.Fatal(err)
	}
	if out, _ := long.Output(0, 0); string(out) != "size? 40 120\n" {
		t.Fatalf("output %q", out)
	}
	if _, err := s.Resize(ctx(t), 0, 40); !errors.Is(err, ErrUsage) {
		t.Fatalf("resize 0x40: %v", err)
	}
}

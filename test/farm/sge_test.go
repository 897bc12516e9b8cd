package farm

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/launch"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
)

// The user's flow on Grid Engine: launch (qsub), run, status, a refused
// second launch, stop.
func TestSGELaunchRunStop(t *testing.T) {
	needSGE(t)
	dir := filepath.Join(workDir(t), "s")
	out, errOut, code := cli(t, "launch", "--session", dir, "--via", "sge", "--runner", runnerPath(), "--runner-arg=--heartbeat=250ms")
	if code != 0 || !strings.HasPrefix(out, "sge ") {
		t.Fatalf("launch exit %d: %s %s", code, out, errOut)
	}
	job := strings.Fields(out)[1]
	cancelAtEnd(t, "sge", job)
	if out, _, code := cli(t, "submit", "--session", dir, "--wait", "puts sge-ok"); code != 0 || out != "sge-ok\n" {
		t.Fatalf("submit: %d %q", code, out)
	}
	out, _, code = cli(t, "status", "--session", dir)
	if code != 0 || !strings.Contains(out, "job       "+job+" (sge) r") {
		t.Fatalf("status %d:\n%s", code, out)
	}
	if _, errOut, code := cli(t, "launch", "--session", dir, "--via", "sge", "--runner", runnerPath()); code != 7 || !strings.Contains(errOut, "(sge) is r") {
		t.Fatalf("second launch: %d %s", code, errOut)
	}
	out, errOut, code = cli(t, "stop", "--session", dir)
	if code != 0 || !strings.Contains(out, "stopped (stop_request)") {
		t.Fatalf("stop %d: %s %s", code, out, errOut)
	}
	checkStopped(t, dir)
}

// A runner that does not stop within the grace is ended by qdel; its
// command gets its result from the next runner on the session.
func TestSGEStopEscalatesToQdel(t *testing.T) {
	needSGE(t)
	dir := filepath.Join(workDir(t), "s")
	res := launchSession(t, dir, func(o *launch.Options) { o.Via = "sge" })
	s, _ := master.Open(dir)
	c, err := s.Submit(ctx(t), "puts started; flush stdout; after 600000", master.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.WaitFor(ctx(t), regexpStarted, 0); err != nil {
		t.Fatal(err)
	}
	rep, err := launch.StopLaunched(ctx(t), dir, launch.StopOptions{Grace: time.Second})
	if err != nil || rep.Step != launch.StepCancel || !strings.Contains(rep.Message, "qdel "+res.Info.JobID) {
		t.Fatalf("%+v %v", rep, err)
	}
	launchSession(t, dir, func(o *launch.Options) { o.Via = "sge" })
	r, _ := c.Wait(ctx(t), master.WaitOptions{})
	if r == nil || r.Status == protocol.StatusOK {
		t.Fatalf("the interrupted command: %+v", r)
	}
	if n := resultsByID(dir)[c.ID]; n != 1 {
		t.Errorf("%d results", n)
	}
	t.Logf("interrupted command: %s", r.ExitReason)
}

// A pool of 3 on Grid Engine with respawn serves 300 commands; halfway one
// session's job is deleted with qdel: every command gets exactly one result.
func TestSGEPoolWithADeletedJob(t *testing.T) {
	needSGE(t)
	poolCancelHalfway(t, "sge", 3, 300, true, func(job string) error { return exec.Command("qdel", job).Run() })
}

func TestSGELaunchFails(t *testing.T) {
	needSGE(t)
	dir := filepath.Join(workDir(t), "s")
	_, errOut, code := cli(t, "launch", "--session", dir, "--via", "sge", "--runner", runnerPath(), "--runner-arg=--bogus")
	if code != 5 || !strings.Contains(errOut, "-bogus") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}

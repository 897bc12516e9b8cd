package realtools

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/internal/sessioncheck"
	"github.com/skillpilot/skillpilot/internal/testenv"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
)

// TestCrashesOpenSTA: the crash tests once on OpenSTA. The runner is
// killed (SIGKILL) while a command runs, with more queued behind it, and
// started again; then the tool is killed while a command runs. Each
// command ends with exactly one result, the interrupted ones say why
// (runner_restarted, tool_died), and none ran twice (each appends its id
// to a file once).
func TestCrashesOpenSTA(t *testing.T) {
	testenv.Slow(t, "real EDA shells")
	testenv.NeedTool(t, "sta", "opensta")
	work := t.TempDir()
	side := filepath.Join(work, "side")
	dir := filepath.Join(t.TempDir(), "sess")
	argv := []string{"--", "sta", "-no_splash"}
	rp := testenv.StartRunner(t, testenv.RunnerOptions{Dir: dir, WorkDir: work, Args: argv, NoCheck: "killed on purpose; checked at the end"})
	s, err := master.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testenv.LongWait)
	defer cancel()
	tick := func(id string) string {
		return fmt.Sprintf("set f [open %q a]; puts $f %s; close $f", side, id)
	}
	var cmds []*master.Command
	for i := 1; i <= 8; i++ {
		p := tick(fmt.Sprintf("k%d", i))
		if i == 4 {
			p += "; after 60000"
		}
		c, err := s.Submit(ctx, p, master.SubmitOptions{CmdID: fmt.Sprintf("k%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, c)
	}
	// k1-k3 have their results (a result still being written when the
	// runner dies is recovered as runner_restarted: PROTOCOL.md 13).
	for _, c := range cmds[:3] {
		if _, err := c.Wait(ctx, master.WaitOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitSide(t, side, "k4")
	rp.Kill()
	rp = testenv.StartRunner(t, testenv.RunnerOptions{Dir: dir, WorkDir: work, Args: argv, Check: sessioncheck.Options{}})
	for i, c := range cmds {
		r, err := c.Wait(ctx, master.WaitOptions{})
		switch {
		case i == 3:
			if r == nil || r.ExitReason != protocol.ReasonRunnerRestarted {
				t.Fatalf("k4: %+v %v, want runner_restarted", r, err)
			}
		case err != nil:
			t.Fatalf("k%d: %v", i+1, err)
		}
	}

	// The tool killed mid-command.
	k9, err := s.Submit(ctx, tick("k9")+"; after 60000", master.SubmitOptions{CmdID: "k9"})
	if err != nil {
		t.Fatal(err)
	}
	waitSide(t, side, "k9")
	st, err := s.ReadState()
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(st.ToolPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r, _ := k9.Wait(ctx, master.WaitOptions{})
	if r == nil || r.ExitReason != protocol.ReasonToolDied || r.Signal != "SIGKILL" {
		t.Fatalf("k9: %+v, want tool_died by SIGKILL", r)
	}
	res, out := run(t, s, tick("k10")+"; puts after", master.SubmitOptions{CmdID: "k10"})
	must(t, "after the tool's death", res, out, protocol.StatusOK, "after\n")

	b, err := os.ReadFile(side)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, l := range strings.Fields(string(b)) {
		count[l]++
	}
	for _, id := range []string{"k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9", "k10"} {
		if count[id] != 1 {
			t.Errorf("%s ran %d times (%q)", id, count[id], b)
		}
	}
	_ = rp
}

// waitSide waits until the side-effect file names id.
func waitSide(t *testing.T, side, id string) {
	t.Helper()
	deadline := time.Now().Add(testenv.LongWait)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(side)
		for _, l := range strings.Fields(string(b)) {
			if l == id {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s never ran", id)
}

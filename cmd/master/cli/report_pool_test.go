package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skillpilot/skillpilot/internal/testenv"
	"github.com/skillpilot/skillpilot/internal/testenv/browser"
	"github.com/skillpilot/skillpilot/internal/testrunner"
	"github.com/skillpilot/skillpilot/internal/tracecheck"
	"github.com/skillpilot/skillpilot/master"
)

// master report --pool P --format trace over a real pool whose sessions
// each had a backlog queued at once: one process per session, named for
// it, and no two slices of one thread overlapping (30 of 35
// queue waits overlapped on one track).
func TestReportPoolTraceNoOverlap(t *testing.T) {
	pool := t.TempDir()
	ctx := context.Background()
	var cmds []*master.Command
	for _, name := range []string{"s00", "s01"} {
		dir := filepath.Join(pool, name)
		testrunner.Start(t, dir)
		if _, err := master.WaitReady(ctx, dir, master.WaitOptions{}); err != nil {
			t.Fatal(err)
		}
		s, err := master.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		for i := 0; i < 8; i++ {
			c, err := s.Submit(ctx, "after 20; expr 1", master.SubmitOptions{TraceID: "flow31"})
			if err != nil {
				t.Fatal(err)
			}
			cmds = append(cmds, c)
		}
	}
	for _, c := range cmds {
		if _, err := c.Wait(ctx, master.WaitOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "trace.json")
	c := &cli{stdin: strings.NewReader(""), stdout: &trackWriter{w: &bytes.Buffer{}}, stderr: &bytes.Buffer{}}
	if err := c.run(ctx, "report", []string{"--pool", pool, "--format", "trace", "-o", out}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	res, err := tracecheck.Check(data)
	if err != nil {
		t.Error(err)
	}
	if len(res.Names) != 2 || len(res.Slices) != 2 {
		t.Errorf("processes %v, slices by pid %v", res.Names, res.Slices)
	}
	for pid, n := range res.Slices {
		if n < 8 {
			t.Errorf("pid %d (%s): %d slices, want the 8 commands at least", pid, res.Names[pid], n)
		}
	}
	if !bytes.Contains(data, []byte(`"flow31 `)) {
		t.Error("no slice named for its trace id")
	}
	checkInChromium(t, data, res)
}

// checkInChromium opens the trace in chromium's own trace engine (DevTools'
// Performance panel) and checks that it draws every slice: each thread's
// slices all placed, none dropped for overlapping, on as many threads as
// tracecheck counted complete events in.
func checkInChromium(t *testing.T, data []byte, res tracecheck.Result) {
	t.Helper()
	if testing.Short() {
		return // Chromium takes seconds: make test checks it.
	}
	chromium := testenv.NeedTool(t, "chromium", "chromium")
	b, err := browser.Start(chromium, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	threads, err := b.ParseTrace(data)
	if err != nil {
		t.Fatal(err)
	}
	slices := map[int]int{}
	for _, th := range threads {
		t.Logf("chromium: pid %d (%s) tid %d: %d slices, %d drawn", th.PID, th.Process, th.TID, th.Entries, th.Placed)
		if th.Placed != th.Entries {
			t.Errorf("chromium draws %d of the %d slices of pid %d tid %d", th.Placed, th.Entries, th.PID, th.TID)
		}
		slices[th.PID] += th.Entries
	}
	for pid, n := range res.Slices {
		if slices[pid] < n {
			t.Errorf("pid %d (%s): chromium kept %d slices, the trace has %d", pid, res.Names[pid], slices[pid], n)
		}
	}
}

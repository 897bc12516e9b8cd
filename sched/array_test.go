package sched

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestArrayCommandLines(t *testing.T) {
	s := Submission{Script: "/p/jobs/a.sh", Output: "/dev/null", Name: "sp-p", WorkDir: "/p"}
	for _, tc := range []struct{ got, want string }{
		{strings.Join(Slurm{}.ArraySubmitCommand(s, 1, 128), " "), "sbatch --parsable --array=1-128 --job-name=sp-p --output=/dev/null --chdir=/p /p/jobs/a.sh"},
		{strings.Join(SGE{}.ArraySubmitCommand(s, 5, 8), " "), "qsub -terse -V -t 5-8 -N sp-p -o /dev/null -j y -S /bin/sh -wd /p /p/jobs/a.sh"},
		{strings.Join(LSF{}.ArraySubmitCommand(s, 1, 4), " "), "bsub -J sp-p[1-4] -o /dev/null -cwd /p /p/jobs/a.sh"},
		{Slurm{}.ElementID("12", 3) + " " + SGE{}.ElementID("12", 3) + " " + LSF{}.ElementID("12", 3), "12_3 12.3 12[3]"},
		{strings.Join(Slurm{}.QueryCommands("12_3")[0], " "), "squeue --noheader --array --states=all --jobs=12 --format=%i|%T|%r|%M"},
		{strings.Join(Slurm{}.QueryCommands("12_3")[1], " "), "sacct --noheader --parsable2 --allocations --jobs=12 --format=JobID,State,ExitCode,Elapsed"},
		{strings.Join(SGE{}.QueryCommands("12.3")[0], " "), "qstat -u * -g d"},
		{strings.Join(SGE{}.QueryCommands("12.3")[1], " "), "qacct -j 12"},
		{strings.Join(Slurm{}.CancelCommand("12_3", false), " "), "scancel 12_3"},
	} {
		if tc.got != tc.want {
			t.Errorf("got  %s\nwant %s", tc.got, tc.want)
		}
	}
	if id, err := ParseQsub("7.1-128:1\n"); err != nil || id != "7" {
		t.Errorf("ParseQsub: %q %v", id, err)
	}
}

func TestSplitElement(t *testing.T) {
	for id, want := range map[string]string{"12_3": "12 3", "12.3": "12 3", "12[3]": "12 3", "12": "", "4711@host:99": "", "a_3": ""} {
		job, i, ok := SplitElement(id)
		got := ""
		if ok {
			got = job + " " + string(rune('0'+i))
		}
		if got != want {
			t.Errorf("SplitElement(%q) = %q, want %q", id, got, want)
		}
	}
}

func TestParseArrayElements(t *testing.T) {
	squeue := "12_1|RUNNING|None|0:05\n12_2|PENDING|Resources|0:00\n"
	if j, ok := ParseSqueue(squeue, "12_2"); !ok || j.State != Pending {
		t.Errorf("squeue 12_2: %+v %v", j, ok)
	}
	qstat := `job-ID  prior   name       user         state submit/start at     queue                          slots ja-task-ID
-----------------------------------------------------------------------------------------------------------------
      7 0.50000 sp-pool    root         r     11/26/2026 16:51:12 all.q@vm                           1 1
      7 0.50000 sp-pool    root         qw    11/26/2026 16:51:12                                    1 2
`
	if j, ok := ParseQstat(qstat, "7.1"); !ok || j.State != Running {
		t.Errorf("qstat 7.1: %+v %v", j, ok)
	}
	if j, ok := ParseQstat(qstat, "7.2"); !ok || j.State != Pending {
		t.Errorf("qstat 7.2: %+v %v", j, ok)
	}
	if _, ok := ParseQstat(qstat, "7.3"); ok {
		t.Error("qstat 7.3 found")
	}
	qacct := "==============================================================\njobnumber    7\ntaskid       1\nfailed       0\nexit_status  0\n==============================================================\njobnumber    7\ntaskid       2\nfailed       100 : assumedly after job\nexit_status  137\n"
	if j, ok := ParseQacct(qacct, "7.2"); !ok || j.State != Cancelled {
		t.Errorf("qacct 7.2: %+v %v", j, ok)
	}
	if j, ok := ParseQacct(qacct, "7.1"); !ok || j.State != Done {
		t.Errorf("qacct 7.1: %+v %v", j, ok)
	}
	if j, ok := ParseBjobs("77|RUN|-|-\n", "77[2]"); !ok || j.State != Running || j.ID != "77[2]" {
		t.Errorf("bjobs 77[2]: %+v %v", j, ok)
	}
}

// SharedExec runs one command for concurrent callers, keeps no error, and
// a run outlives the cancellation of the caller that started it.
func TestSharedExec(t *testing.T) {
	var runs atomic.Int32
	release := make(chan struct{})
	x := SharedExec(func(ctx context.Context, argv []string) (string, error) {
		runs.Add(1)
		<-release
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		if argv[0] == "fail" {
			return "", errors.New("boom")
		}
		return "out", nil
	}, time.Hour)
	first, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	outs := make([]string, 5)
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := context.Background()
			if i == 0 {
				c = first
			}
			outs[i], _ = x(c, []string{"q"})
		}()
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	time.Sleep(10 * time.Millisecond)
	close(release)
	wg.Wait()
	if runs.Load() != 1 || !slices.Equal(outs[1:], []string{"out", "out", "out", "out"}) {
		t.Errorf("runs %d outs %q", runs.Load(), outs)
	}
	if out, _ := x(context.Background(), []string{"q"}); out != "out" || runs.Load() != 1 {
		t.Errorf("within ttl: %q, %d runs", out, runs.Load())
	}
	x(context.Background(), []string{"fail"})
	x(context.Background(), []string{"fail"})
	if runs.Load() != 3 {
		t.Errorf("errors kept: %d runs", runs.Load())
	}
}

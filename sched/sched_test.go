package sched

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

var sub = Submission{Script: "/p/s1/state/launch.sh", Output: "/p/s1/state/launch.out", Name: "sp-s1", WorkDir: "/p/s1",
	Args: []string{"--time=10", "--partition=debug"}}

func TestSubmitCommandLines(t *testing.T) {
	for _, tc := range []struct {
		got  []string
		want string
	}{
		{Slurm{}.SubmitCommand(sub), "sbatch --parsable --job-name=sp-s1 --output=/p/s1/state/launch.out --chdir=/p/s1 --time=10 --partition=debug /p/s1/state/launch.sh"},
		{SGE{}.SubmitCommand(sub), "qsub -terse -V -N sp-s1 -o /p/s1/state/launch.out -j y -S /bin/sh -wd /p/s1 --time=10 --partition=debug /p/s1/state/launch.sh"},
		{LSF{}.SubmitCommand(sub), "bsub -J sp-s1 -o /p/s1/state/launch.out -cwd /p/s1 --time=10 --partition=debug /p/s1/state/launch.sh"},
		{Slurm{}.CancelCommand("12", false), "scancel 12"},
		{Slurm{}.CancelCommand("12", true), "scancel --signal=KILL --full 12"},
		{SGE{}.CancelCommand("12", false), "qdel 12"},
		{SGE{}.CancelCommand("12", true), "qdel -f 12"},
		{LSF{}.CancelCommand("12", false), "bkill 12"},
		{LSF{}.CancelCommand("12", true), "bkill -s KILL 12"},
		{Local{}.CancelCommand("77@h:5", false), "kill -TERM 77 (twice)"},
		{Slurm{}.QueryCommands("12")[0], "squeue --noheader --states=all --jobs=12 --format=%i|%T|%r|%M"},
		{SGE{}.QueryCommands("12")[1], "qacct -j 12"},
		{LSF{}.QueryCommands("12")[0], "bjobs -noheader -o jobid stat exit_code pend_reason delimiter='|' 12"},
	} {
		if g := strings.Join(tc.got, " "); g != tc.want {
			t.Errorf("got  %s\nwant %s", g, tc.want)
		}
	}
}

func TestParseSubmit(t *testing.T) {
	for _, tc := range []struct {
		parse func(string) (string, error)
		out   string
		want  string
	}{
		{ParseSbatch, "123\n", "123"},
		{ParseSbatch, "123;cluster2\n", "123"},
		{ParseQsub, "4567\n", "4567"},
		{ParseQsub, "4567.1-4:1\n", "4567"},
		{ParseBsub, "Job <890> is submitted to default queue <normal>.\n", "890"},
		{ParseBsub, "Job <890> is submitted to queue <short>.\n", "890"},
	} {
		if got, err := tc.parse(tc.out); err != nil || got != tc.want {
			t.Errorf("%q: got %q, %v; want %q", tc.out, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "sbatch: error: Batch job submission failed", "Submitted batch job 12"} {
		if _, err := ParseSbatch(bad); err == nil {
			t.Errorf("ParseSbatch(%q) accepted", bad)
		}
	}
	if _, err := ParseBsub("Request aborted by esub"); err == nil {
		t.Error("ParseBsub accepted a refusal")
	}
	if _, err := ParseQsub("Unable to run job: denied"); err == nil {
		t.Error("ParseQsub accepted a refusal")
	}
}

// replay is an Exec that answers from canned outputs keyed by argv[0].
type replay map[string]struct {
	out string
	err error
}

func (r replay) exec(calls *[]string) Exec {
	return func(_ context.Context, argv []string) (string, error) {
		*calls = append(*calls, strings.Join(argv, " "))
		a, ok := r[argv[0]]
		if !ok {
			return "", ErrNoScheduler
		}
		return a.out, a.err
	}
}

func exitErr(stderr string) error { return &ExitError{Argv: []string{"x"}, Code: 1, Stderr: stderr} }

func TestSlurmQuery(t *testing.T) {
	cases := []struct {
		name string
		r    replay
		want Job
	}{
		{"pending", replay{"squeue": {out: "12|PENDING|Resources|0:00\n"}},
			Job{ID: "12", State: Pending, Raw: "PENDING", Reason: "Resources", Elapsed: "0:00"}},
		{"running", replay{"squeue": {out: "12|RUNNING|None|1:02\n"}},
			Job{ID: "12", State: Running, Raw: "RUNNING", Reason: "None", Elapsed: "1:02"}},
		{"failed with exit code from scontrol", replay{
			"squeue":   {out: "12|FAILED|NonZeroExitCode|0:00\n"},
			"scontrol": {out: "JobId=12 JobName=sp s1 UserId=root(0) JobState=FAILED Reason=NonZeroExitCode ExitCode=3:0 Command=/p/a b/launch.sh WorkDir=/p\n"}},
			Job{ID: "12", State: Failed, Raw: "FAILED", Reason: "NonZeroExitCode", Elapsed: "0:00", ExitCode: "3:0"}},
		{"cancelled, forgotten by squeue, in sacct", replay{
			"squeue": {err: exitErr("slurm_load_jobs error: Invalid job id specified")},
			"sacct":  {out: "12|CANCELLED by 0|0:15|00:00:04\n"}},
			Job{ID: "12", State: Cancelled, Raw: "CANCELLED", Reason: "by 0", ExitCode: "0:15", Elapsed: "00:00:04"}},
		{"timeout", replay{"squeue": {out: "12|TIMEOUT|TimeLimit|10:00\n"}, "scontrol": {out: "JobId=12 ExitCode=0:15\n"}},
			Job{ID: "12", State: Killed, Raw: "TIMEOUT", Reason: "TimeLimit", Elapsed: "10:00", ExitCode: "0:15"}},
		{"gone, no accounting", replay{
			"squeue": {err: exitErr("slurm_load_jobs error: Invalid job id specified")},
			"sacct":  {err: exitErr("Slurm accounting storage is disabled")}},
			Job{ID: "12", State: Gone, Reason: "squeue no longer lists the job and sacct has no record of it"}},
	}
	for _, tc := range cases {
		var calls []string
		got, err := Slurm{}.Query(context.Background(), tc.r.exec(&calls), "12")
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %+v, %v\nwant %+v\ncalls %q", tc.name, got, err, tc.want, calls)
		}
	}
	// squeue failing for another reason (controller down) is an error, not "gone".
	var calls []string
	_, err := Slurm{}.Query(context.Background(), replay{"squeue": {err: exitErr("slurm_load_jobs error: Unable to contact slurm controller")}}.exec(&calls), "12")
	if err == nil {
		t.Error("an unreachable controller was taken for a finished job")
	}
	// No Slurm installed at all.
	_, err = Slurm{}.Query(context.Background(), replay{}.exec(&calls), "12")
	if !errors.Is(err, ErrNoScheduler) {
		t.Errorf("missing squeue: %v", err)
	}
}

func TestJobString(t *testing.T) {
	for _, tc := range []struct {
		j    Job
		want string
	}{
		{Job{State: Pending, Raw: "PENDING", Reason: "Resources"}, "PENDING (Resources)"},
		{Job{State: Running, Raw: "RUNNING", Reason: "None", ExitCode: "0:0"}, "RUNNING"},
		{Job{State: Failed, Raw: "FAILED", Reason: "NonZeroExitCode", ExitCode: "3:0"}, "FAILED (NonZeroExitCode, exit 3:0)"},
		{Job{State: Gone}, "gone"},
	} {
		if got := tc.j.String(); got != tc.want {
			t.Errorf("got %q want %q", got, tc.want)
		}
	}
}

func TestSGEQuery(t *testing.T) {
	const qstat = `job-ID  prior   name       user         state submit/start at     queue                          slots ja-task-ID
-----------------------------------------------------------------------------------------------------------------
      7 0.55500 sp-s00     root         r     11/26/2026 06:00:00 all.q@vm                           1
      8 0.00000 sp-s01     root         qw    11/26/2026 06:00:01                                    1
      9 0.00000 sp-s02     root         Eqw   11/26/2026 06:00:01                                    1
     10 0.00000 sp-s03     root         hqw   11/26/2026 06:00:01                                    1
     11 0.55500 sp-s04     root         dr    11/26/2026 06:00:00 all.q@vm                           1
`
	for id, want := range map[string]State{"7": Running, "8": Pending, "9": Failed, "10": Pending, "11": Ending} {
		j, ok := ParseQstat(qstat, id)
		if !ok || j.State != want {
			t.Errorf("job %s: %+v, want %s", id, j, want)
		}
	}
	const qacct = `==============================================================
qname        all.q
hostname     vm
jobname      sp-s00
jobnumber    12
failed       0
exit_status  3
`
	var calls []string
	j, err := SGE{}.Query(context.Background(), replay{"qstat": {out: qstat}, "qacct": {out: qacct}}.exec(&calls), "12")
	if err != nil || j.State != Failed || j.ExitCode != "3" {
		t.Errorf("qacct: %+v %v", j, err)
	}
	j, err = SGE{}.Query(context.Background(), replay{"qstat": {out: qstat}, "qacct": {err: exitErr("error: job id 13 not found")}}.exec(&calls), "13")
	if err != nil || j.State != Gone {
		t.Errorf("unknown job: %+v %v", j, err)
	}
	if j, ok := ParseQacct(strings.Replace(qacct, "failed       0", "failed       100 : assumedly after job", 1), "12"); !ok || j.State != Cancelled {
		t.Errorf("qdel'd job: %+v", j)
	}
}

func TestLSFQuery(t *testing.T) {
	var calls []string
	for _, tc := range []struct {
		out  string
		err  error
		want Job
	}{
		{out: "5|PEND|-|New job is waiting for scheduling;\n", want: Job{ID: "5", State: Pending, Raw: "PEND", Reason: "New job is waiting for scheduling"}},
		{out: "5|RUN|-|-\n", want: Job{ID: "5", State: Running, Raw: "RUN"}},
		{out: "5|EXIT|3|-\n", want: Job{ID: "5", State: Failed, Raw: "EXIT", ExitCode: "3"}},
		{out: "5|DONE|-|-\n", want: Job{ID: "5", State: Done, Raw: "DONE"}},
		{err: exitErr("Job <5> is not found"), want: Job{ID: "5", State: Gone, Reason: "bjobs no longer knows the job"}},
	} {
		got, err := LSF{}.Query(context.Background(), replay{"bjobs": {out: tc.out, err: tc.err}}.exec(&calls), "5")
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: got %+v %v want %+v", tc.out, got, err, tc.want)
		}
	}
}

func TestParseScontrolValuesWithSpaces(t *testing.T) {
	m := ParseScontrol("JobId=3 JobName=my job Command=/a b/c.sh WorkDir=/x ExitCode=0:15\n")
	if m["JobName"] != "my job" || m["Command"] != "/a b/c.sh" || m["ExitCode"] != "0:15" {
		t.Errorf("%q", m)
	}
}

// TestLocal starts a real detached process, queries and cancels it.
func TestLocal(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "job.sh")
	if err := os.WriteFile(script, []byte("echo started\nexec sleep 60\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	s := Submission{Script: script, Output: filepath.Join(dir, "out"), Name: "x", WorkDir: dir}
	ctx := context.Background()
	id, err := Local{}.Submit(ctx, nil, s)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := ParseLocalID(id); err != nil {
		t.Fatal(err)
	}
	j, err := Local{}.Query(ctx, nil, id)
	if err != nil || j.State != Running {
		t.Fatalf("%+v %v", j, err)
	}
	if err := (Local{}).Cancel(ctx, nil, id, false); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		if j, _ = (Local{}).Query(ctx, nil, id); !j.State.Active() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %+v after SIGTERM", j)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if j.State != Killed || !strings.Contains(j.Reason, "terminated") {
		t.Errorf("after SIGTERM: %+v", j)
	}
	// A pid that now belongs to another process (other start time) is not the job.
	pid, host, start, _ := ParseLocalID(id)
	_ = pid
	other := "1@" + host + ":" + "99999999999"
	if j, err := (Local{}).Query(ctx, nil, other); err != nil || j.State != Gone {
		t.Errorf("reused pid: %+v %v (start %d)", j, err, start)
	}
	if _, err := (Local{}).Query(ctx, nil, "1@elsewhere:5"); err == nil {
		t.Error("a job of another host was queried")
	}
}

// QueryActive tells an ended job from an active one with the queue
// listing alone: no scontrol (Slurm) or qacct (Grid Engine) per job, which
// a pool stop used to run once per element.
func TestQueryActive(t *testing.T) {
	// states asks d about each job of want through a replay of r and
	// checks that it ran only the command only.
	states := func(d Driver, r replay, only string, want map[string]State) {
		t.Helper()
		var calls []string
		for id, st := range want {
			if j, err := QueryState(context.Background(), d, r.exec(&calls), id); err != nil || j.State != st {
				t.Errorf("%s %s: %+v %v, want %s", d.Name(), id, j, err, st)
			}
		}
		for _, c := range calls {
			if !strings.HasPrefix(c, only+" ") {
				t.Errorf("%s: ran %q, want %s only", d.Name(), c, only)
			}
		}
	}
	states(Slurm{}, replay{"squeue": {out: "12_3|COMPLETED|None|0:05\n12_4|RUNNING|None|0:05\n"}, "scontrol": {out: "JobId=12 ExitCode=0:0\n"}},
		"squeue", map[string]State{"12_3": Done, "12_4": Running})
	const qstat = "job-ID prior name user state submit/start at queue slots ja-task-ID\n" +
		"     7 0.55500 sp-p root r 11/26/2026 06:00:00 all.q@vm 1 2\n"
	states(SGE{}, replay{"qstat": {out: qstat}, "qacct": {out: "jobnumber 7\ntaskid 1\nfailed 0\nexit_status 0\n"}},
		"qstat", map[string]State{"7.1": Gone, "7.2": Running})
	var calls []string
	x := replay{"squeue": {out: ""}, "sacct": {out: "12_5|CANCELLED by 0|0:15|0:01\n"}}.exec(&calls)
	if j, err := QueryState(context.Background(), Slurm{}, x, "12_5"); err != nil || j.State != Cancelled {
		t.Errorf("slurm, forgotten by squeue: %+v %v (calls %q)", j, err, calls)
	}
	calls = nil
	if j, err := QueryState(context.Background(), LSF{}, replay{"bjobs": {out: "5|DONE|0|\n"}}.exec(&calls), "5"); err != nil || j.State != Done {
		t.Errorf("lsf (Query): %+v %v", j, err)
	}
}

// Only Slurm's hold after a failed start asks for a release; a hold
// someone placed does not.
func TestSlurmHeldAfterFailedStart(t *testing.T) {
	var r Releaser = Slurm{}
	for _, c := range []struct {
		line string
		want bool
	}{
		{"12_3|PENDING|launch failed requeued held|0:00", true},
		{"12_3|PENDING|launch_failed_requeued_held|0:00", true},
		{"12_3|PENDING|JobHeldUser|0:00", false},
		{"12_3|PENDING|JobHeldAdmin|0:00", false},
		{"12_3|PENDING|Resources|0:00", false},
		{"12_3|RUNNING|launch failed requeued held|0:01", false},
	} {
		j, ok := ParseSqueue(c.line, "12_3")
		if !ok || r.HeldAfterFailedStart(j) != c.want {
			t.Errorf("%s: parsed %v, held after a failed start %v, want %v", c.line, ok, r.HeldAfterFailedStart(j), c.want)
		}
	}
	if got := r.ReleaseCommand("12_3"); !reflect.DeepEqual(got, []string{"scontrol", "release", "12_3"}) {
		t.Errorf("release command %q", got)
	}
	var calls []string
	if err := r.Release(context.Background(), replay{"scontrol": {out: ""}}.exec(&calls), "12_3"); err != nil || len(calls) != 1 {
		t.Errorf("release: %v, calls %q", err, calls)
	}
}

// A job the scheduler keeps but will never run: Slurm's hold after a failed
// start, Grid Engine's error state while qstat lists it.
func TestStuck(t *testing.T) {
	for _, c := range []struct {
		d    Driver
		j    Job
		want bool
	}{
		{Slurm{}, Job{State: Pending, Raw: "PENDING", Reason: "launch failed requeued held"}, true},
		{Slurm{}, Job{State: Pending, Raw: "PENDING", Reason: "JobHeldUser"}, false},
		{Slurm{}, Job{State: Failed, Raw: "FAILED"}, false},
		{SGE{}, Job{State: Failed, Raw: "Eqw"}, true},
		{SGE{}, Job{State: Pending, Raw: "hqw"}, false},
		{SGE{}, Job{State: Failed, Raw: "finished"}, false},
		{LSF{}, Job{State: Failed, Raw: "EXIT"}, false},
		{Local{}, Job{State: Failed}, false},
	} {
		if got := Stuck(c.d, c.j); got != c.want {
			t.Errorf("%s %+v: stuck %v, want %v", c.d.Name(), c.j, got, c.want)
		}
	}
	// From qstat's own line.
	j, ok := ParseQstat("    101 0.55500 sp-s00     root         Eqw   11/28/2026 12:00:00                                    1\n", "101")
	if !ok || !Stuck(SGE{}, j) {
		t.Errorf("qstat Eqw: %+v %v", j, ok)
	}
}

package sched

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// SGE drives Grid Engine (Son of Grid Engine, Open Grid Scheduler, Debian's
// gridengine): qsub, qstat, qacct and qdel.
type SGE struct{}

// Name returns "sge".
func (SGE) Name() string { return "sge" }

// SubmitCommand is the qsub command line for s: -terse prints the job id
// alone, -V passes the submitter's environment (as sbatch and bsub do by
// default: the tool's PATH and licence variables), -j y joins stderr into
// the output file, -S runs the script with sh.
func (SGE) SubmitCommand(s Submission) []string {
	argv := []string{"qsub", "-terse", "-V", "-N", s.Name, "-o", s.Output, "-j", "y", "-S", "/bin/sh", "-wd", s.WorkDir}
	argv = append(argv, s.Args...)
	return append(argv, s.Script)
}

// Submit runs qsub -terse and returns the job id it prints.
func (d SGE) Submit(ctx context.Context, x Exec, s Submission) (string, error) {
	out, err := x(ctx, d.SubmitCommand(s))
	if err != nil {
		return "", err
	}
	return ParseQsub(out)
}

// ParseQsub parses qsub -terse output: "123" (or "123.1-4:1" for an array).
func ParseQsub(out string) (string, error) {
	id, _, _ := strings.Cut(firstLine(out), ".")
	if !allDigits(id) {
		return "", fmt.Errorf("sched: cannot find a job id in qsub's output %q", out)
	}
	return id, nil
}

// QueryCommands are the command lines Query runs, in order. For an array
// element ("123.4") qstat lists every task on a line of its own (-g d) and
// qacct is asked about the whole array.
func (SGE) QueryCommands(id string) [][]string {
	if job, _, ok := SplitElement(id); ok {
		return [][]string{{"qstat", "-u", "*", "-g", "d"}, {"qacct", "-j", job}}
	}
	return [][]string{{"qstat", "-u", "*"}, {"qacct", "-j", id}}
}

// Query looks for the job in qstat's list, then in qacct's accounting.
func (d SGE) Query(ctx context.Context, x Exec, id string) (Job, error) {
	cmds := d.QueryCommands(id)
	out, err := x(ctx, cmds[0])
	if err != nil {
		return Job{ID: id}, err
	}
	if j, ok := ParseQstat(out, id); ok {
		return j, nil
	}
	if out, err := x(ctx, cmds[1]); err == nil {
		if j, ok := ParseQacct(out, id); ok {
			return j, nil
		}
	}
	return Job{ID: id, State: Gone, Reason: "qstat no longer lists the job and qacct has no record of it"}, nil
}

// ParseQstat finds job id in `qstat -u '*'` output (columns job-ID, prior,
// name, user, state, ...).
// An array element ("123.4") is the line of job 123 whose last column
// (ja-task-ID, with qstat -g d) is 4.
func ParseQstat(out, id string) (Job, bool) {
	job, task, isTask := SplitElement(id)
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) < 5 || f[0] != id && !(isTask && f[0] == job && f[len(f)-1] == strconv.Itoa(task)) {
			continue
		}
		st, why := sgeState(f[4])
		return Job{ID: id, State: st, Raw: f[4], Reason: why}, true
	}
	return Job{}, false
}

// sgeState maps qstat's state letters.
func sgeState(s string) (State, string) {
	switch {
	case strings.Contains(s, "E"):
		return Failed, "error state: qstat -j shows why; qdel removes the job"
	case strings.Contains(s, "d"):
		return Ending, "being deleted"
	case strings.ContainsAny(s, "sST"):
		return Suspended, ""
	case strings.ContainsAny(s, "rtR"):
		return Running, ""
	case strings.Contains(s, "h"):
		return Pending, "on hold"
	case strings.Contains(s, "q"), strings.Contains(s, "w"):
		return Pending, ""
	}
	return Gone, ""
}

// ParseQacct parses `qacct -j id`: failed and exit_status of the job. For
// an array element ("123.4") it reads the record (records are separated by
// lines of "=") of job 123 whose taskid is 4. The last matching record
// wins (a rerun job has several).
func ParseQacct(out, id string) (Job, bool) {
	job, task, isTask := SplitElement(id)
	var found map[string]string
	for _, rec := range strings.Split(out, "\n=") {
		kv := map[string]string{}
		for _, l := range strings.Split(rec, "\n") {
			f := strings.Fields(l)
			if len(f) >= 2 {
				kv[f[0]] = strings.Join(f[1:], " ")
			}
		}
		switch {
		case !isTask && kv["jobnumber"] == id, isTask && kv["jobnumber"] == job && kv["taskid"] == strconv.Itoa(task):
			found = kv
		}
	}
	if found == nil {
		return Job{}, false
	}
	return qacctJob(id, found), true
}

func qacctJob(id string, kv map[string]string) Job {
	j := Job{ID: id, Raw: "finished", ExitCode: kv["exit_status"], State: Done}
	switch {
	case kv["failed"] != "" && kv["failed"] != "0":
		j.State, j.Reason = Failed, "failed "+kv["failed"]
		if strings.Contains(kv["failed"], "qdel") || strings.HasPrefix(kv["failed"], "100") {
			j.State = Cancelled
		}
	case kv["exit_status"] != "" && kv["exit_status"] != "0":
		j.State = Failed
	}
	return j
}

// CancelCommand is qdel (or qdel -f, which removes the job even if the
// execution host does not answer).
func (SGE) CancelCommand(id string, force bool) []string {
	if force {
		return []string{"qdel", "-f", id}
	}
	return []string{"qdel", id}
}

// Cancel runs CancelCommand.
func (d SGE) Cancel(ctx context.Context, x Exec, id string, force bool) error {
	_, err := x(ctx, d.CancelCommand(id, force))
	return err
}

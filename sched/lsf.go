package sched

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
)

// LSF drives IBM Spectrum LSF: bsub, bjobs and bkill. There is no open
// LSF to test against: only the command lines and the parsing of sample
// outputs are tested.
type LSF struct{}

// Name returns "lsf".
func (LSF) Name() string { return "lsf" }

// SubmitCommand is the bsub command line for s (stdout and stderr both go
// to -o when -e is not given).
func (LSF) SubmitCommand(s Submission) []string {
	argv := []string{"bsub", "-J", s.Name, "-o", s.Output, "-cwd", s.WorkDir}
	argv = append(argv, s.Args...)
	return append(argv, s.Script)
}

// Submit runs bsub and returns the job id it prints.
func (d LSF) Submit(ctx context.Context, x Exec, s Submission) (string, error) {
	out, err := x(ctx, d.SubmitCommand(s))
	if err != nil {
		return "", err
	}
	return ParseBsub(out)
}

// It is compiled on first use: every master start would pay for it
// otherwise (issue 44).
var bsubJob = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`Job <(\d+)> is submitted`) })

// ParseBsub parses "Job <123> is submitted to default queue <normal>.".
func ParseBsub(out string) (string, error) {
	m := bsubJob().FindStringSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("sched: cannot find a job id in bsub's output %q", out)
	}
	return m[1], nil
}

// QueryCommands are the command lines Query runs.
func (LSF) QueryCommands(id string) [][]string {
	return [][]string{{"bjobs", "-noheader", "-o", "jobid stat exit_code pend_reason delimiter='|'", id}}
}

// Query asks bjobs. A job LSF has forgotten ("Job <id> is not found") is Gone.
func (d LSF) Query(ctx context.Context, x Exec, id string) (Job, error) {
	out, err := x(ctx, d.QueryCommands(id)[0])
	if strings.Contains(strings.ToLower(out), "is not found") || strings.Contains(stderrOf(err), "is not found") {
		return Job{ID: id, State: Gone, Reason: "bjobs no longer knows the job"}, nil
	}
	if err != nil {
		return Job{ID: id}, err
	}
	if j, ok := ParseBjobs(out, id); ok {
		return j, nil
	}
	return Job{ID: id, State: Gone, Reason: "bjobs does not list the job"}, nil
}

// ParseBjobs parses bjobs -o "jobid stat exit_code pend_reason delimiter='|'".
// For an array element ("123[4]") bjobs is asked about that element alone
// and prints the array's job id (123) in the jobid column.
func ParseBjobs(out, id string) (Job, bool) {
	job, _, isElement := SplitElement(id)
	for _, l := range strings.Split(out, "\n") {
		f := strings.SplitN(strings.TrimSpace(l), "|", 4)
		if len(f) < 4 || f[0] != id && !(isElement && f[0] == job) {
			continue
		}
		j := Job{ID: id, Raw: f[1], State: lsfState(f[1])}
		if f[2] != "-" && f[2] != "" {
			j.ExitCode = f[2]
		}
		if r := strings.TrimSuffix(strings.TrimSpace(f[3]), ";"); r != "-" {
			j.Reason = r
		}
		return j, true
	}
	return Job{}, false
}

func lsfState(s string) State {
	switch s {
	case "PEND", "PSUSP", "WAIT":
		return Pending
	case "RUN", "PROV", "UNKWN":
		return Running
	case "USUSP", "SSUSP":
		return Suspended
	case "ZOMBI":
		return Ending
	case "DONE":
		return Done
	case "EXIT":
		return Failed
	}
	return Gone
}

// CancelCommand is bkill (SIGINT, SIGTERM, then SIGKILL), or bkill -s KILL.
func (LSF) CancelCommand(id string, force bool) []string {
	if force {
		return []string{"bkill", "-s", "KILL", id}
	}
	return []string{"bkill", id}
}

// Cancel runs CancelCommand.
func (d LSF) Cancel(ctx context.Context, x Exec, id string, force bool) error {
	_, err := x(ctx, d.CancelCommand(id, force))
	return err
}

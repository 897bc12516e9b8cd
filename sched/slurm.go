package sched

import (
	"context"
	"fmt"
	"strings"
)

// Slurm drives sbatch, squeue, sacct, scontrol and scancel.
//
// A job's state comes from squeue (which keeps finished jobs for the
// cluster's MinJobAge, 300 s by default), then sacct once squeue has
// forgotten it (when accounting is enabled); scontrol adds the exit code of
// a finished job.
type Slurm struct{}

// Name returns "slurm".
func (Slurm) Name() string { return "slurm" }

// SubmitCommand is the sbatch command line for s.
func (Slurm) SubmitCommand(s Submission) []string {
	argv := []string{"sbatch", "--parsable", "--job-name=" + s.Name, "--output=" + s.Output, "--chdir=" + s.WorkDir}
	argv = append(argv, s.Args...)
	return append(argv, s.Script)
}

// Submit runs sbatch --parsable and returns the job id it prints.
func (d Slurm) Submit(ctx context.Context, x Exec, s Submission) (string, error) {
	out, err := x(ctx, d.SubmitCommand(s))
	if err != nil {
		return "", err
	}
	return ParseSbatch(out)
}

// ParseSbatch parses sbatch --parsable output: "123" or "123;cluster".
func ParseSbatch(out string) (string, error) {
	id, _, _ := strings.Cut(firstLine(out), ";")
	if !allDigits(id) {
		return "", fmt.Errorf("sched: cannot find a job id in sbatch's output %q", out)
	}
	return id, nil
}

// squeueFormat is the squeue -o format ParseSqueue reads.
const squeueFormat = "%i|%T|%r|%M"

// QueryCommands are the command lines Query runs, in order. For an array
// element ("123_4") squeue and sacct are asked about the whole array (one
// line per element: --array), so the elements of one array share one
// answer (see [SharedExec]).
func (Slurm) QueryCommands(id string) [][]string {
	squeue := []string{"squeue", "--noheader", "--states=all", "--jobs=" + id, "--format=" + squeueFormat}
	sacct := id
	if job, _, ok := SplitElement(id); ok {
		squeue = []string{"squeue", "--noheader", "--array", "--states=all", "--jobs=" + job, "--format=" + squeueFormat}
		sacct = job
	}
	return [][]string{
		squeue,
		{"sacct", "--noheader", "--parsable2", "--allocations", "--jobs=" + sacct, "--format=JobID,State,ExitCode,Elapsed"},
		{"scontrol", "--oneliner", "show", "job", id},
	}
}

// Query asks squeue, then sacct; scontrol adds the exit code of an ended job.
func (d Slurm) Query(ctx context.Context, x Exec, id string) (Job, error) {
	cmds := d.QueryCommands(id)
	out, err := x(ctx, cmds[0])
	if err != nil && !strings.Contains(stderrOf(err), "invalid job id") {
		return Job{ID: id}, err
	}
	if j, ok := ParseSqueue(out, id); ok {
		if !j.State.Active() {
			if out, err := x(ctx, cmds[2]); err == nil {
				j.ExitCode = ParseScontrol(out)["ExitCode"]
			}
		}
		return j, nil
	}
	// squeue has forgotten the job: ask the accounting database, if any.
	if out, err := x(ctx, cmds[1]); err == nil {
		if j, ok := ParseSacct(out, id); ok {
			return j, nil
		}
	}
	return Job{ID: id, State: Gone, Reason: "squeue no longer lists the job and sacct has no record of it"}, nil
}

// ParseSqueue parses squeueFormat lines and returns the line of job id.
func ParseSqueue(out, id string) (Job, bool) {
	for _, l := range strings.Split(out, "\n") {
		f := strings.Split(strings.TrimSpace(l), "|")
		if len(f) < 4 || f[0] != id {
			continue
		}
		return Job{ID: id, State: slurmState(f[1]), Raw: f[1], Reason: f[2], Elapsed: f[3]}, true
	}
	return Job{}, false
}

// ParseSacct parses sacct --parsable2 JobID,State,ExitCode,Elapsed lines.
func ParseSacct(out, id string) (Job, bool) {
	for _, l := range strings.Split(out, "\n") {
		f := strings.Split(strings.TrimSpace(l), "|")
		if len(f) < 4 || f[0] != id {
			continue
		}
		raw, by, _ := strings.Cut(f[1], " ") // "CANCELLED by 0"
		j := Job{ID: id, State: slurmState(raw), Raw: raw, ExitCode: f[2], Elapsed: f[3]}
		if by != "" {
			j.Reason = by
		}
		return j, true
	}
	return Job{}, false
}

// ParseScontrol parses `scontrol --oneliner show job` into its Key=Value
// fields. A value runs until the next " Key=" (values such as Command= may
// hold spaces).
func ParseScontrol(out string) map[string]string {
	m := map[string]string{}
	line := firstLine(out)
	var key string
	var val []string
	flush := func() {
		if key != "" {
			m[key] = strings.Join(val, " ")
		}
	}
	for _, tok := range strings.Split(line, " ") {
		k, v, ok := strings.Cut(tok, "=")
		if ok && k != "" && isKey(k) {
			flush()
			key, val = k, []string{v}
			continue
		}
		val = append(val, tok)
	}
	flush()
	return m
}

func isKey(k string) bool {
	for _, r := range k {
		if !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == ':' || r == '_' || r == '/') {
			return false
		}
	}
	return k[0] >= 'A' && k[0] <= 'Z'
}

// slurmState maps Slurm's job state words (squeue %T, sacct State).
func slurmState(s string) State {
	switch strings.TrimSuffix(s, "+") {
	case "PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD":
		return Pending
	case "RUNNING", "CONFIGURING", "RESIZING", "SIGNALING", "STAGE_OUT":
		return Running
	case "COMPLETING":
		return Ending
	case "SUSPENDED", "STOPPED":
		return Suspended
	case "COMPLETED":
		return Done
	case "FAILED", "BOOT_FAIL", "OUT_OF_MEMORY", "SPECIAL_EXIT":
		return Failed
	case "CANCELLED", "REVOKED":
		return Cancelled
	case "TIMEOUT", "DEADLINE", "PREEMPTED", "NODE_FAIL":
		return Killed
	}
	return Gone
}

// HeldAfterFailedStart reports whether Slurm holds j because a node could
// not start it: PENDING with reason "launch failed requeued held" (squeue
// %r; scontrol writes launch_failed_requeued_held). It implements
// [Releaser].
func (Slurm) HeldAfterFailedStart(j Job) bool {
	return j.State == Pending && strings.ReplaceAll(j.Reason, "_", " ") == "launch failed requeued held"
}

// ReleaseCommand is scontrol release: the job is queued again.
func (Slurm) ReleaseCommand(id string) []string { return []string{"scontrol", "release", id} }

// Release runs ReleaseCommand.
func (d Slurm) Release(ctx context.Context, x Exec, id string) error {
	_, err := x(ctx, d.ReleaseCommand(id))
	return err
}

// CancelCommand is scancel (SIGTERM to every process of the job, SIGKILL
// after the cluster's KillWait), or with force SIGKILL at once.
func (Slurm) CancelCommand(id string, force bool) []string {
	if force {
		return []string{"scancel", "--signal=KILL", "--full", id}
	}
	return []string{"scancel", id}
}

// Cancel runs CancelCommand.
func (d Slurm) Cancel(ctx context.Context, x Exec, id string, force bool) error {
	_, err := x(ctx, d.CancelCommand(id, force))
	return err
}

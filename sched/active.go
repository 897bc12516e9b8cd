package sched

import "context"

// ActiveQuerier is a [Driver] that can say whether a job is still active
// with fewer scheduler commands than Query: no exit code, no accounting
// lookup, only the queue listing that the elements of one array share
// (see [SharedExec]). It is what a wait for a job to end asks, many times
// and for many jobs at once (master pool stop waits for 128 elements).
type ActiveQuerier interface {
	// QueryActive returns the job's state as Query would while the job
	// is listed by the scheduler's queue command, without the details
	// Query adds for an ended job (Slurm's exit code from scontrol). A
	// job the queue command no longer lists is not active; how it ended
	// may be left unsaid (State Gone) where Query would ask the
	// accounting (Grid Engine's qacct).
	QueryActive(ctx context.Context, x Exec, id string) (Job, error)
}

// QueryState asks d about job id with QueryActive where d has it, else
// with Query.
func QueryState(ctx context.Context, d Driver, x Exec, id string) (Job, error) {
	if a, ok := d.(ActiveQuerier); ok {
		return a.QueryActive(ctx, x, id)
	}
	return d.Query(ctx, x, id)
}

// QueryActive asks squeue only (one squeue for all the elements of an
// array); a job squeue has forgotten is looked up as Query does.
func (d Slurm) QueryActive(ctx context.Context, x Exec, id string) (Job, error) {
	out, err := x(ctx, d.QueryCommands(id)[0])
	if err == nil {
		if j, ok := ParseSqueue(out, id); ok {
			return j, nil
		}
	}
	return d.Query(ctx, x, id)
}

// QueryActive asks qstat only (one qstat for every job and element): a
// job qstat no longer lists has ended (Gone: qacct, which reads the
// whole accounting file, is not asked how).
func (d SGE) QueryActive(ctx context.Context, x Exec, id string) (Job, error) {
	out, err := x(ctx, d.QueryCommands(id)[0])
	if err != nil {
		return Job{ID: id}, err
	}
	if j, ok := ParseQstat(out, id); ok {
		return j, nil
	}
	return Job{ID: id, State: Gone, Reason: "qstat no longer lists the job"}, nil
}

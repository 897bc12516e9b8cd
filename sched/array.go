package sched

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ArrayDriver is a [Driver] that submits job arrays: one job, one
// scheduler transaction, whose elements first..last each run the same
// script with their index in the environment (IndexVars). An element is
// then queried and cancelled by its element id (ElementID) with the
// Driver's Query and Cancel, and the whole array by the array's job id.
//
// Element ids are the schedulers' own: Slurm "123_4", Grid Engine "123.4",
// LSF "123[4]".
type ArrayDriver interface {
	Driver
	// SubmitArray submits s as an array of elements first..last (first >= 1)
	// and returns the array's job id.
	SubmitArray(ctx context.Context, x Exec, s Submission, first, last int) (string, error)
	// ArraySubmitCommand is the command line SubmitArray runs.
	ArraySubmitCommand(s Submission, first, last int) []string
	// ElementID is the id of element index of array job.
	ElementID(job string, index int) string
}

// IndexVars are the environment variables in which Slurm, Grid Engine and
// LSF give an array element its index, in the order a job script should
// try them.
var IndexVars = []string{"SLURM_ARRAY_TASK_ID", "SGE_TASK_ID", "LSB_JOBINDEX"}

// Array returns the driver named by a --via word if it submits job arrays.
func Array(via string) (ArrayDriver, bool) {
	d, err := For(via)
	if err != nil {
		return nil, false
	}
	a, ok := d.(ArrayDriver)
	return a, ok
}

// SplitElement splits an element id ("123_4", "123.4", "123[4]") into the
// array's job id and the index. ok is false for a plain job id.
func SplitElement(id string) (job string, index int, ok bool) {
	if b, rest, found := strings.Cut(id, "["); found && strings.HasSuffix(rest, "]") {
		n, err := strconv.Atoi(strings.TrimSuffix(rest, "]"))
		return b, n, err == nil && allDigits(b)
	}
	for _, sep := range []string{"_", "."} {
		if b, rest, found := strings.Cut(id, sep); found && allDigits(b) && allDigits(rest) {
			n, err := strconv.Atoi(rest)
			return b, n, err == nil
		}
	}
	return "", 0, false
}

// ArraySubmitCommand is sbatch --array=first-last.
func (d Slurm) ArraySubmitCommand(s Submission, first, last int) []string {
	argv := d.SubmitCommand(s)
	return append(argv[:2:2], append([]string{fmt.Sprintf("--array=%d-%d", first, last)}, argv[2:]...)...)
}

// SubmitArray runs sbatch --parsable --array and returns the array's job id.
func (d Slurm) SubmitArray(ctx context.Context, x Exec, s Submission, first, last int) (string, error) {
	out, err := x(ctx, d.ArraySubmitCommand(s, first, last))
	if err != nil {
		return "", err
	}
	return ParseSbatch(out)
}

// ElementID is "job_index".
func (Slurm) ElementID(job string, index int) string { return fmt.Sprintf("%s_%d", job, index) }

// ArraySubmitCommand is qsub -t first-last.
func (d SGE) ArraySubmitCommand(s Submission, first, last int) []string {
	argv := d.SubmitCommand(s)
	return append(argv[:3:3], append([]string{"-t", fmt.Sprintf("%d-%d", first, last)}, argv[3:]...)...)
}

// SubmitArray runs qsub -terse -t and returns the array's job id (qsub
// prints "123.1-4:1").
func (d SGE) SubmitArray(ctx context.Context, x Exec, s Submission, first, last int) (string, error) {
	out, err := x(ctx, d.ArraySubmitCommand(s, first, last))
	if err != nil {
		return "", err
	}
	return ParseQsub(out)
}

// ElementID is "job.index" (qdel and qstat -j take it as job.task).
func (SGE) ElementID(job string, index int) string { return fmt.Sprintf("%s.%d", job, index) }

// ArraySubmitCommand is bsub -J 'name[first-last]'.
func (d LSF) ArraySubmitCommand(s Submission, first, last int) []string {
	s.Name = fmt.Sprintf("%s[%d-%d]", s.Name, first, last)
	return d.SubmitCommand(s)
}

// SubmitArray runs bsub -J 'name[first-last]' and returns the array's job id.
func (d LSF) SubmitArray(ctx context.Context, x Exec, s Submission, first, last int) (string, error) {
	out, err := x(ctx, d.ArraySubmitCommand(s, first, last))
	if err != nil {
		return "", err
	}
	return ParseBsub(out)
}

// ElementID is "job[index]".
func (LSF) ElementID(job string, index int) string { return fmt.Sprintf("%s[%d]", job, index) }

// SharedExec wraps x so that concurrent and recent calls with the same
// command line share one run: a call within ttl of the last run of the same
// argv gets its output. A launcher waiting for the 128 elements of an array
// asks the scheduler once a second, not 128 times. Errors are not kept.
// A shared run is not ended by the cancellation of the caller that started
// it (others may be waiting for it): it runs under x's own time limit
// (RunCommand: CommandTimeout), and a caller whose ctx ends stops waiting.
func SharedExec(x Exec, ttl time.Duration) Exec {
	type entry struct {
		done chan struct{}
		at   time.Time
		out  string
		err  error
	}
	var mu sync.Mutex
	cache := map[string]*entry{}
	return func(ctx context.Context, argv []string) (string, error) {
		key := strings.Join(argv, "\x00")
		mu.Lock()
		e := cache[key]
		if e != nil {
			select {
			case <-e.done:
				if e.err != nil || time.Since(e.at) > ttl {
					e = nil
				}
			default: // Running: wait for it.
			}
		}
		if e == nil {
			e = &entry{done: make(chan struct{})}
			cache[key] = e
			mu.Unlock()
			e.out, e.err = x(context.WithoutCancel(ctx), argv)
			e.at = time.Now()
			close(e.done)
			return e.out, e.err
		}
		mu.Unlock()
		select {
		case <-e.done:
			return e.out, e.err
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

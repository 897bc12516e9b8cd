package launch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/internal/sessionio"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/sched"
)

// Member is one session of an array launch: its directory and its element
// index in the array (>= 1).
type Member struct {
	Dir   string
	Index int
}

// MemberLaunch is the outcome of launching one member.
type MemberLaunch struct {
	Member
	Result *Result // nil if the member was refused or the submission failed
	Err    error
}

// LaunchArray starts the runners of several sessions as one job array
// (sbatch --array, qsub -t, bsub -J 'name[a-b]'): one scheduler
// transaction for all of them. The members' indices must be consecutive.
// script is the path of the array's job script, which LaunchArray writes:
// it reads the element's index from the scheduler's variable (SLURM_ARRAY_TASK_ID,
// SGE_TASK_ID, LSB_JOBINDEX) and runs that member's state/launch.sh, which
// sends its output to the member's state/launch.out.
//
// Each member is checked and recorded as Launch does, under its own launch
// lock (all held across the one submission): a member that is served or
// whose earlier job is active is refused (ErrAlreadyLaunched) and left out
// of the array. Its launch.json records the element's id as job_id, and
// array_job_id and array_index. Unless opts.NoWait, it then waits until
// every member serves. An index between first and last whose member was
// refused runs an element that only says so and exits (its element queried as Launch does, the scheduler
// asked once a second for all of them).
func LaunchArray(ctx context.Context, script string, members []Member, opts Options) ([]MemberLaunch, error) {
	d, ok := sched.Array(opts.Via)
	if !ok {
		return nil, sessionio.UsageError("--via %s has no job arrays", opts.Via)
	}
	for i, m := range members {
		if m.Index < 1 || i > 0 && m.Index != members[i-1].Index+1 {
			return nil, fmt.Errorf("master: array members must have consecutive indices, the first at least 1")
		}
	}
	x := opts.Exec
	if x == nil {
		x = sched.RunCommand
	}
	x = sched.SharedExec(x, queryEvery/2)
	runnerPath, err := FindRunner(opts.Runner)
	if err != nil {
		return nil, err
	}
	out := make([]MemberLaunch, len(members))
	infos := make([]*Info, len(members))
	befores := make([]string, len(members))
	sessions := make([]*master.Session, len(members))
	var included []int
	var unlocks []func()
	defer func() { // Released once launch.json is written, before the wait.
		for _, u := range unlocks {
			u()
		}
	}()
	for i, m := range members {
		out[i].Member = m
		s, unlock, err := openLocked(ctx, m.Dir)
		if err != nil {
			out[i].Err = err
			continue
		}
		unlocks = append(unlocks, unlock)
		sessions[i] = s
		redirect := fmt.Sprintf("exec >>%s 2>&1\n", shellJoin([]string{jobPath(s, FileLaunchOutput)}))
		infos[i], befores[i], out[i].Err = prepare(ctx, s, d, x, runnerPath, opts, redirect)
		if out[i].Err == nil {
			included = append(included, i)
		}
	}
	if len(included) == 0 {
		return out, nil
	}
	first, last := members[included[0]].Index, members[included[len(included)-1]].Index
	if err := writeArrayScript(script, members, included, sessions); err != nil {
		return out, err
	}
	name := opts.JobName
	if name == "" {
		name = "sp-" + filepath.Base(filepath.Dir(script))
	}
	sub := sched.Submission{Script: script, Output: os.DevNull, Name: name, WorkDir: filepath.Dir(script), Args: opts.SubmitArgs}
	argv := d.ArraySubmitCommand(sub, first, last)
	job, err := d.SubmitArray(ctx, x, sub, first, last)
	if err != nil {
		err = fmt.Errorf("%w: %w", ErrSubmitFailed, err)
		for _, i := range included {
			out[i].Err = err
		}
		return out, err
	}
	var errs []error
	for _, i := range included {
		info := infos[i]
		info.JobID, info.ArrayJobID, info.ArrayIndex = d.ElementID(job, members[i].Index), job, members[i].Index
		info.SubmitCommand = argv
		if err := writeLaunch(sessions[i], info, fsq.Durable); err != nil {
			out[i].Err = fmt.Errorf("master: element %s submitted but not recorded (cancel it by hand): %w", info.JobID, err)
			errs = append(errs, out[i].Err)
			continue
		}
		out[i].Result = &Result{Info: *info}
	}
	for _, u := range unlocks {
		u()
	}
	unlocks = nil
	progress(opts.Progress, "array job %s submitted (%s, elements %d-%d)", job, d.Name(), first, last)
	if opts.NoWait {
		return out, errors.Join(errs...)
	}
	var wg sync.WaitGroup
	for _, i := range included {
		if out[i].Result == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := opts
			if opts.Progress != nil {
				base := filepath.Base(members[i].Dir)
				o.Progress = func(m string) { opts.Progress(base + ": " + m) }
			}
			out[i].Err = waitServing(ctx, sessions[i], d, x, befores[i], o, out[i].Result)
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// openLocked creates the session's directories, opens it and takes its
// launch lock.
func openLocked(ctx context.Context, dir string) (*master.Session, func(), error) {
	s, err := createSession(dir)
	if err != nil {
		return nil, nil, err
	}
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	unlock, err := lockLaunch(lctx, s)
	return s, unlock, err
}

// writeArrayScript writes the array's job script: a table from element
// index to the member's launch script.
func writeArrayScript(path string, members []Member, included []int, sessions []*master.Session) error {
	var b strings.Builder
	b.WriteString("#!/bin/sh\n# Written by master pool (job array): element i runs the launch script of its session.\n")
	fmt.Fprintf(&b, "i=${%s:-${%s:-${%s:-}}}\ncase \"$i\" in\n", sched.IndexVars[0], sched.IndexVars[1], sched.IndexVars[2])
	for _, i := range included {
		fmt.Fprintf(&b, "%d) exec /bin/sh %s ;;\n", members[i].Index, shellJoin([]string{jobPath(sessions[i], FileLaunchScript)}))
	}
	b.WriteString("esac\necho \"master pool: no session for array index '$i' (refused at submission)\" >&2\nexit 0\n")
	if err := writeJobScript(path, []byte(b.String())); err != nil {
		return fmt.Errorf("master: write array job script: %w", err)
	}
	return nil
}

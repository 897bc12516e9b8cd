package pool

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/skillpilot/skillpilot/launch"
	"github.com/skillpilot/skillpilot/sched"
)

// DirJobs holds the job scripts of the pool's job arrays
// (jobs/array-<id>.sh), written by pool start and grow.
const DirJobs = "jobs"

// launch launches the named sessions and waits until they serve: via a
// scheduler with job arrays, one array per run of consecutive session
// numbers (element index = session number + 1, so s00 is element 1);
// via local, one process per session.
func (p *Pool) launch(ctx context.Context, names []string, ready time.Duration, prog func(string)) []SessionLaunch {
	out := make([]SessionLaunch, len(names))
	if _, ok := sched.Array(p.cfg.Via); !ok {
		var wg sync.WaitGroup
		for i, name := range names {
			wg.Add(1)
			go func() {
				defer wg.Done()
				lo := p.launchOptions(name)
				lo.ReadyTimeout = ready
				if prog != nil {
					lo.Progress = func(m string) { prog(name + ": " + m) }
				}
				res, err := launch.Launch(ctx, p.dirOf(name), lo)
				out[i] = SessionLaunch{Session: name, Result: res, Err: err}
			}()
		}
		wg.Wait()
		return out
	}
	for start := 0; start < len(names); {
		end := start + 1
		for end < len(names) && sessionNumber(names[end]) == sessionNumber(names[end-1])+1 {
			end++
		}
		p.launchArray(ctx, names[start:end], out[start:end], ready, prog)
		start = end
	}
	return out
}

// launchArray launches names (consecutive session numbers) as one array.
func (p *Pool) launchArray(ctx context.Context, names []string, out []SessionLaunch, ready time.Duration, prog func(string)) {
	members := make([]launch.Member, len(names))
	for i, name := range names {
		members[i] = launch.Member{Dir: p.dirOf(name), Index: sessionNumber(name) + 1}
	}
	lo := p.launchOptions("")
	lo.JobName = "sp-" + filepath.Base(p.dir)
	lo.ReadyTimeout, lo.Progress = ready, prog
	var res []launch.MemberLaunch
	script, err := p.arrayScript()
	if err == nil {
		res, err = launch.LaunchArray(ctx, script, members, lo)
	}
	for i, name := range names {
		out[i] = SessionLaunch{Session: name}
		if i < len(res) {
			out[i].Result, out[i].Err = res[i].Result, res[i].Err
		}
		if out[i].Err == nil && out[i].Result == nil {
			out[i].Err = errors.Join(err, errors.New("master: not launched"))
		}
	}
}

// sessionNumber is the number in a session's name ("s07": 7; -1 if none).
func sessionNumber(name string) int {
	n, err := strconv.Atoi(strings.TrimPrefix(name, poolNamePrefix))
	if err != nil {
		return -1
	}
	return n
}

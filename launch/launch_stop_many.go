package launch

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/skillpilot/skillpilot/internal/sessionio"
)

// StopMany stops the launched sessions in dirs in parallel, each as
// StopLaunched does (the launch.json marks and stop requests first, at
// most stopGate sessions writing at once, then the waits: stopBatch): a
// stop request with Grace, then the scheduler's
// cancel, then the forced cancel. With opts.WholeArrays the sessions that
// are elements of one job array (launch.json array_job_id) share the
// escalation: one cancel of the array's job id (scancel 123, qdel 123,
// bkill 123) once their stop requests had their Grace, then one forced
// cancel. With opts.NoJobWait the sessions whose runner stopped on its
// request are not waited for: one cancel per array whose every member's
// runner stopped (one per job of its own otherwise) is sent, and
// StopMany returns once those commands have run. Reports and errors are
// in the order of dirs. opts.Progress, if
// set, gets each session's lines prefixed with the directory's base name.
func StopMany(ctx context.Context, dirs []string, opts StopOptions) ([]StopReport, []error) {
	reps := make([]StopReport, len(dirs))
	errs := make([]error, len(dirs))
	sts := make([]*stopping, len(dirs))
	var wg sync.WaitGroup
	batch := newStopBatch(len(dirs))
	for i, dir := range dirs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := opts
			if opts.Progress != nil {
				base := filepath.Base(dir)
				o.Progress = func(m string) { opts.Progress(base + ": " + m) }
			}
			sts[i], errs[i] = beginStop(ctx, dir, o, batch)
		}()
	}
	wg.Wait()
	groups := map[string][]int{}  // array job id (with its scheduler) -> sessions still to cancel
	stopped := map[string][]int{} // array job id -> sessions whose runner stopped (NoJobWait)
	arrayKey := func(st *stopping) string {
		if opts.WholeArrays && st.li.ArrayJobID != "" {
			return st.li.Via + " " + st.li.ArrayJobID
		}
		return ""
	}
	for i, st := range sts {
		if errs[i] != nil || !st.done || !st.cancelAfter {
			continue
		}
		if key := arrayKey(st); key != "" {
			stopped[key] = append(stopped[key], i)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			st.sendCancel(ctx, st.li.JobID)
		}()
	}
	for i, st := range sts {
		if errs[i] != nil || st.done {
			continue
		}
		key := arrayKey(st)
		if key == "" {
			wg.Add(1)
			go func() { // A job of its own: as StopLaunched.
				defer wg.Done()
				for _, force := range []bool{false, true} {
					if ok, err := st.cancel(ctx, st.li.JobID, force, true); ok || err != nil {
						errs[i] = err
						return
					}
				}
				errs[i] = st.stillActive()
			}()
			continue
		}
		groups[key] = append(groups[key], i)
	}
	for key, members := range stopped {
		if _, escalating := groups[key]; escalating {
			continue // cancelArray cancels the array, and waits.
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			lead := sts[members[0]]
			lead.note("the runners of the job array's %d session(s) stopped", len(members))
			lead.sendCancel(ctx, lead.li.ArrayJobID)
		}()
	}
	for _, members := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cancelArray(ctx, sts, errs, members)
		}()
	}
	wg.Wait()
	for i, st := range sts {
		reps[i] = st.rep
	}
	return reps, errs
}

// stopBatch orders the sessions of one StopMany. The work before a stop
// request is written (launch.json's mark, the seq reservation, the
// request) is file creation, which costs CPU (about half a millisecond of
// kernel time each on a busy machine, where the master shares 2 cores
// with the runners it is stopping): at most stopGate sessions do it at
// once, so the first requests go out first instead of every session
// advancing one step at a time; and no session polls for its reply until
// every request is written (or its session held its place for
// stopGateHold), so the polls do not slow the writes. By then most
// runners have stopped and one look finds it.
type stopBatch struct {
	sem     chan struct{}
	written sync.WaitGroup // one per session until its request is written
}

// stopGate is how many sessions of a StopMany write at once.
const stopGate = 8

// stopGateHold is the longest a session holds its place: one that waits
// (for a late heartbeat to move) lets the others by, and no longer holds
// up their waits.
const stopGateHold = 50 * time.Millisecond

func newStopBatch(n int) *stopBatch {
	b := &stopBatch{sem: make(chan struct{}, stopGate)}
	b.written.Add(n)
	return b
}

// enter takes a place for one session; done, to be called once its
// request is written (or will not be), gives it back. It is idempotent,
// and called by itself after stopGateHold.
func (b *stopBatch) enter(ctx context.Context) (done func(), err error) {
	select {
	case b.sem <- struct{}{}:
	case <-ctx.Done():
		b.written.Done()
		return nil, sessionio.ContextEnd(ctx)
	}
	var once sync.Once
	leave := func() {
		once.Do(func() {
			<-b.sem
			b.written.Done()
		})
	}
	t := time.AfterFunc(stopGateHold, leave)
	return func() { t.Stop(); leave() }, nil
}

// cancelArray escalates for the members (indices into sts) that are
// elements of one array: the array's cancel once, each member waiting for
// its element to end; then the forced cancel for those still active.
func cancelArray(ctx context.Context, sts []*stopping, errs []error, members []int) {
	lead := sts[members[0]]
	array := lead.li.ArrayJobID
	for _, force := range []bool{false, true} {
		argv := strings.Join(lead.d.CancelCommand(array, force), " ")
		lead.note("running %s (the job array of %d session(s))", argv, len(members))
		if err := lead.d.Cancel(ctx, lead.x, array, force); err != nil {
			lead.note("%s: %v", argv, err) // Elements that ended meanwhile make some schedulers complain.
		}
		var wg sync.WaitGroup
		var left []int
		var mu sync.Mutex
		for _, i := range members {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ok, err := sts[i].cancel(ctx, array, force, false)
				errs[i] = err
				if !ok && err == nil {
					mu.Lock()
					left = append(left, i)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if members = left; len(members) == 0 {
			return
		}
	}
	for _, i := range members {
		errs[i] = sts[i].stillActive()
	}
}

func (st *stopping) note(format string, args ...any) { progress(st.opts.Progress, format, args...) }

package pool

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/internal/testenv"
	"github.com/skillpilot/skillpilot/launch"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
	"github.com/skillpilot/skillpilot/sched"
)

// fakeLSF plays bsub, bjobs and bkill by their command-line contract
// (sched.LSF's command lines and the outputs ParseBsub and ParseBjobs
// read), running each job (each element of an array) as a local process
// with LSB_JOBINDEX set. There is no open LSF to test against.
type fakeLSF struct {
	dir   string
	mu    sync.Mutex
	next  int
	jobs  map[string]string // "77" or "77[3]" -> local job id
	calls []string
}

var bsubName = regexp.MustCompile(`^(.*)\[(\d+)-(\d+)\]$`)

func (f *fakeLSF) exec(ctx context.Context, argv []string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, strings.Join(argv, " "))
	switch argv[0] {
	case "bsub":
		f.next++
		id := strconv.Itoa(76 + f.next)
		script := argv[len(argv)-1]
		name := argv[2]
		elems := []int{0}
		if m := bsubName.FindStringSubmatch(name); m != nil {
			a, _ := strconv.Atoi(m[2])
			b, _ := strconv.Atoi(m[3])
			elems = nil
			for i := a; i <= b; i++ {
				elems = append(elems, i)
			}
		}
		for _, i := range elems {
			key, wrap := id, script
			if i > 0 {
				key = fmt.Sprintf("%s[%d]", id, i)
				wrap = filepath.Join(f.dir, fmt.Sprintf("job%s.%d.sh", id, i))
				if err := os.WriteFile(wrap, fmt.Appendf(nil, "LSB_JOBINDEX=%d; export LSB_JOBINDEX\nexec /bin/sh %s\n", i, script), 0o700); err != nil {
					return "", err
				}
			}
			lid, err := sched.Local{}.Submit(ctx, nil, sched.Submission{Script: wrap, Output: filepath.Join(f.dir, "out"), WorkDir: f.dir})
			if err != nil {
				return "", err
			}
			f.jobs[key] = lid
		}
		return fmt.Sprintf("Job <%s> is submitted to default queue <normal>.\n", id), nil
	case "bjobs":
		id := argv[len(argv)-1]
		lid, ok := f.jobs[id]
		if !ok {
			return "", &sched.ExitError{Argv: argv, Code: 255, Stderr: fmt.Sprintf("Job <%s> is not found\n", id)}
		}
		j, _ := sched.Local{}.Query(ctx, nil, lid)
		stat := map[bool]string{true: "RUN", false: "EXIT"}[j.State.Active()]
		job, _, _ := sched.SplitElement(id)
		if job == "" {
			job = id
		}
		return fmt.Sprintf("%s|%s|-|-\n", job, stat), nil
	case "bkill":
		id := argv[len(argv)-1]
		force := len(argv) > 2
		for key, lid := range f.jobs {
			if key == id || strings.HasPrefix(key, id+"[") {
				_ = sched.Local{}.Cancel(ctx, nil, lid, force)
			}
		}
		return "", nil
	}
	return "", fmt.Errorf("fake LSF: no %s", argv[0])
}

func (f *fakeLSF) count(prefix string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}

// pool start --via lsf submits one array (bsub -J 'name[1-3]'); heal
// respawns an element that died as a job of its own; pool stop kills the
// array with one bkill once the stop request of a busy session had its
// grace.
func TestPoolLSFArray(t *testing.T) {
	testenv.Slow(t, "real runners racing for seconds")
	needTool(t, "tclsh")
	f := &fakeLSF{dir: t.TempDir(), jobs: map[string]string{}}
	dir := filepath.Join(t.TempDir(), "pool")
	p, res, err := Start(ctx(t), dir, Options{Size: 3, Via: "lsf", Respawn: true, Exec: f.exec,
		RunnerArgs: []string{"--heartbeat", "200ms", "--kill-grace", "1s"}})
	t.Cleanup(func() {
		for _, lid := range f.jobs {
			_ = sched.Local{}.Cancel(context.Background(), nil, lid, true)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := f.count("bsub"); n != 1 || !strings.Contains(f.calls[0], "[1-3]") {
		t.Fatalf("bsub calls: %q", f.calls)
	}
	for i, r := range res {
		li := r.Result.Info
		if li.ArrayJobID != "77" || li.ArrayIndex != i+1 || li.JobID != fmt.Sprintf("77[%d]", i+1) {
			t.Errorf("%s: %+v", r.Session, li)
		}
	}
	// The element of s01 dies: heal respawns s01 as a job of its own.
	s1, _ := p.session("s01")
	for st, _ := s1.Status(ctx(t)); !st.Alive; st, _ = s1.Status(ctx(t)) {
		time.Sleep(50 * time.Millisecond)
	}
	before, err := s1.ReadState()
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	_ = sched.Local{}.Cancel(ctx(t), nil, f.jobs["77[2]"], true)
	f.mu.Unlock()
	p.Exec = f.exec
	deadline := time.Now().Add(longWait)
	for {
		if _, err := p.Heal(ctx(t)); err != nil {
			t.Log(err)
		}
		if li, err := launch.ReadLaunch(filepath.Join(dir, "s01")); err == nil && li.Launches == 2 {
			if li.ArrayJobID != "" || li.JobID != "78" {
				t.Errorf("respawned: %+v", li)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("s01 not respawned")
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The respawned runner serves: its own state.json (a stop request is
	// addressed to the session id it names; one read while the killed
	// runner's state.json was still there went to the dead runner, and
	// the new one rightly refused it as stale).
	for {
		st, err := s1.ReadState()
		if err == nil && st.SessionID != before.SessionID && st.Phase == protocol.PhaseIdle {
			if s, _ := s1.Status(ctx(t)); s.Alive {
				break
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	s0, _ := p.session("s00")
	gate := filepath.Join(t.TempDir(), "gate")
	c, err := s0.Submit(ctx(t), fmt.Sprintf("while {![file exists {%s}]} {after 10}", gate), master.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for claimedCount(s0) == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	stops, err := p.Stop(ctx(t), launch.StopOptions{Grace: 8 * time.Second, Exec: f.exec}) // Idle runners stop well within it, even under -race on a loaded machine.
	if err != nil {
		t.Fatal(err)
	}
	_ = c
	if stops[0].Report.Step != launch.StepCancel || !strings.Contains(stops[0].Report.Message, "bkill 77:") {
		t.Errorf("s00: %+v", stops[0])
	}
	for _, s := range stops[1:] {
		if s.Report.Step != launch.StepStopRequest {
			t.Errorf("%s: %+v", s.Session, s.Report)
		}
	}
	if n := f.count("bkill 77"); n != 1 {
		t.Errorf("bkill calls: %d in %q", n, f.calls)
	}
}

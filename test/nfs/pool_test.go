package nfs

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/internal/conformance"
	"github.com/skillpilot/skillpilot/internal/sessionio"
	"github.com/skillpilot/skillpilot/internal/testenv"
	"github.com/skillpilot/skillpilot/launch"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/pool"
	"github.com/skillpilot/skillpilot/protocol"
	"github.com/skillpilot/skillpilot/sched"
)

// masterCLI is the master CLI for tests that run it as a process: the one
// run-nfs-tests.sh built (SP_MASTER_BIN), else this test binary in the
// master's role (conformance.MakeBin).
func masterCLI(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("SP_MASTER_BIN"); bin != "" {
		return bin
	}
	return filepath.Join(conformance.MakeBin(t), "master")
}

// One pool used over NFS by submitters and healers on
// both clients at once. Three sessions are started on client A (pool start
// via local, respawn on), three more by `master pool grow` on client B
// (host "hostb"), so runners serve on both hosts; `master pool heal
// --every 1s` runs on A and on B; commands are submitted on A (Go library,
// two submitters) and on B (Go library, and `master pool submit`
// processes). Once a third have results, the runner with the longest
// queue on each host is killed with SIGKILL: both healers move the dead
// sessions' queued commands (exactly once between them), and each host's
// healer relaunches the sessions its host launched (a local job can be
// seen only by the host that started it). Every command ends with exactly
// one result, none ran twice: each appends its cmd_id to a file of its
// own tool process, on the share through the mount of the host it ran on.
func TestNFSPoolTwoHosts(t *testing.T) {
	a, b := session(t)
	bin := masterCLI(t)
	c, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	pa, pb := filepath.Join(a, "pool"), filepath.Join(b, "pool")
	// Side effects, one directory per host, each written and read
	// through that host's own mount only.
	sideA, sideB := filepath.Join(a, "side-a"), filepath.Join(b, "side-b")
	if err := os.Mkdir(a, 0o777); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{sideA, sideB} {
		if err := os.Mkdir(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	const perHost = 3
	t0 := time.Now()
	p, _, err := pool.Start(c, pa, pool.Options{Size: perHost, Via: "local", Runner: runnerBin, Respawn: true, MaxRespawns: 3,
		RunnerArgs: []string{"--heartbeat", "500ms"}})
	t.Cleanup(func() { killPool(pa, pb) })
	if err != nil {
		t.Fatal(err)
	}
	startA := time.Since(t0)
	t0 = time.Now()
	if out, err := onHostB(t, bin, "pool", "grow", "--pool", pb, "--by", fmt.Sprint(perHost)).CombinedOutput(); err != nil {
		t.Fatalf("pool grow on B: %v\n%s", err, out)
	}
	growB := time.Since(t0)
	// Sessions s00-s02 run on A, s03-s05 on B; each is read through the
	// mount of the host its runner writes from.
	dirOf := func(name string) string {
		if sessionNumber(name) < perHost {
			return filepath.Join(pa, name)
		}
		return filepath.Join(pb, name)
	}
	names := p.SessionNames()
	if len(names) != 2*perHost {
		t.Fatalf("pool seen from A has sessions %v after the grow on B", names)
	}
	for _, name := range names {
		if st, err := master.Open(dirOf(name)); err != nil {
			t.Fatal(err)
		} else if s, err := st.ReadState(); err != nil || (sessionNumber(name) >= perHost) != (s.Hostname == "hostb") {
			t.Fatalf("%s: runner on %q (%v)", name, s.Hostname, err)
		}
	}
	t.Logf("pool start of %d on A: %v; pool grow --by %d on B: %v", perHost, startA.Round(time.Millisecond), perHost, growB.Round(time.Millisecond))

	healA := startOut(t, exec.Command(bin, "pool", "heal", "--pool", pa, "--every", "1s"))
	healB := startOut(t, onHostB(t, bin, "pool", "heal", "--pool", pb, "--every", "1s"))

	payload := func(id string) string {
		return fmt.Sprintf(`set d [expr {[info hostname] eq "hostb" ? {%s} : {%s}}]; set f [open $d/[pid] a]; puts $f %s; close $f; after 50`,
			sideB, sideA, id)
	}
	const perLib, cliN = 80, 8 // 3 library submitters, one CLI loop
	total := 3*perLib + cliN
	var mu sync.Mutex
	var ids []string
	type sub struct {
		dir, tag string
	}
	var wg sync.WaitGroup
	waitErrs := make(chan error, total)
	for _, sb := range []sub{{pa, "a1"}, {pa, "a2"}, {pb, "b1"}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q, err := pool.Open(sb.dir)
			if err != nil {
				t.Error(err)
				return
			}
			var cmds []*pool.Command
			for i := 0; i < perLib; i++ {
				id := fmt.Sprintf("%s-%03d", sb.tag, i)
				pc, err := q.Submit(c, payload(id), pool.SubmitOptions{SubmitOptions: master.SubmitOptions{CmdID: id}})
				if err != nil {
					t.Errorf("submit %s: %v", id, err)
					return
				}
				cmds = append(cmds, pc)
				mu.Lock()
				ids = append(ids, id)
				mu.Unlock()
			}
			t.Logf("submitter %s: %d submitted after %v", sb.tag, perLib, time.Since(t0).Round(time.Millisecond))
			for _, pc := range cmds { // Each side waits for its own, following moves.
				if r, err := pc.Wait(c); r == nil {
					waitErrs <- fmt.Errorf("%s: %w", pc.ID, err)
				}
			}
		}()
	}
	wg.Add(1)
	go func() { // master pool submit on B, one process per command.
		defer wg.Done()
		var took []time.Duration
		defer func() { t.Logf("master pool submit on B, whole process: %v", took) }()
		for i := 0; i < cliN; i++ {
			id := fmt.Sprintf("bcli-%03d", i)
			t1 := time.Now()
			out, err := onHostB(t, bin, "pool", "submit", "--pool", pb, "--id", id, payload(id)).CombinedOutput()
			took = append(took, time.Since(t1).Round(time.Millisecond))
			if err != nil {
				t.Errorf("master pool submit on B: %v\n%s", err, out)
				return
			}
			mu.Lock()
			ids = append(ids, id)
			mu.Unlock()
		}
		t.Logf("%d master pool submit processes on B: %v", cliN, time.Since(t0).Round(time.Millisecond))
	}()

	// Once a third have results: on each host, kill the runner with the
	// longest queue.
	killed := map[string]int{} // session → its queue depth when killed
	for time.Now().Before(t0.Add(4 * time.Minute)) {
		if n := countResults(names, dirOf); n >= total/3 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, host := range []struct{ lo, hi int }{{0, perHost}, {perHost, 2 * perHost}} {
		victim, depth := "", -1
		for _, name := range names[host.lo:host.hi] {
			s, err := master.Open(dirOf(name))
			if err != nil {
				t.Fatal(err)
			}
			q, err := s.QueueDepth()
			if err != nil {
				t.Fatal(err)
			}
			if q > depth {
				victim, depth = name, q
			}
		}
		li, err := launch.ReadLaunch(dirOf(victim))
		if err != nil {
			t.Fatal(err)
		}
		pid, _, _, err := sched.ParseLocalID(li.JobID)
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatalf("kill %s's runner %d: %v", victim, pid, err)
		}
		killed[victim] = depth
	}
	t.Logf("killed (session: queued commands) %v after %d results", killed, countResults(names, dirOf))

	wg.Wait()
	t.Logf("all submitted and waited for after %v", time.Since(t0).Round(time.Millisecond))
	close(waitErrs)
	for err := range waitErrs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	// The CLI's commands: waited for from A.
	for _, id := range ids {
		if !strings.HasPrefix(id, "bcli-") {
			continue
		}
		cmd, err := p.FindCommand(id)
		if err != nil {
			t.Fatal(err)
		}
		if r, err := p.WaitCommand(c, cmd); r == nil {
			t.Fatalf("%s: %v", id, err)
		}
	}
	healA.stop(t)
	healB.stop(t)

	results, ran, notOK := map[string]int{}, sideCounts(t, sideA, sideB), 0
	status := map[string]protocol.Status{}
	reason := map[string]protocol.ExitReason{}
	forwards := 0
	for _, name := range names {
		s, err := master.Open(dirOf(name))
		if err != nil {
			t.Fatal(err)
		}
		entries, _ := os.ReadDir(filepath.Join(dirOf(name), protocol.DirResult))
		for _, e := range entries {
			if _, id, err := protocol.ParseCommandName(e.Name()); err == nil && !strings.HasPrefix(e.Name(), ".") {
				results[id]++
				if c, err := s.Command(id); err == nil {
					if r, err := c.Result(); err == nil {
						status[id], reason[id] = r.Status, r.ExitReason
					}
				}
			}
		}
		fw, _ := os.ReadDir(filepath.Join(dirOf(name), sessionio.DirForward))
		forwards += len(fw)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if results[id] != 1 {
			t.Errorf("%s: %d results", id, results[id])
		}
		if status[id] != protocol.StatusOK {
			notOK++
			t.Logf("%s: status %q (%s), ran %d times", id, status[id], reason[id], ran[id])
			if reason[id] != protocol.ReasonRunnerRestarted { // Only a killed runner's commands may fail.
				t.Errorf("%s: status %q, exit reason %q", id, status[id], reason[id])
			}
		}
		if ran[id] > 1 || status[id] == protocol.StatusOK && ran[id] != 1 {
			t.Errorf("%s: ran %d times, status %q", id, ran[id], status[id])
		}
	}
	if len(ids) != total || len(results) != total {
		t.Errorf("%d commands submitted, %d have results, want %d", len(ids), len(results), total)
	}
	queued := 0
	for _, d := range killed {
		queued += d
	}
	if queued > 0 && forwards == 0 {
		t.Errorf("the killed sessions had %d queued commands and none was moved", queued)
	}
	relaunched := 0
	for name := range killed {
		if li, err := launch.ReadLaunch(dirOf(name)); err == nil && li.Launches > 1 {
			relaunched++
			if st, err := readState(dirOf(name)); err != nil || (sessionNumber(name) >= perHost) != (st.Hostname == "hostb") {
				t.Errorf("%s relaunched on %q (%v), not on the host that launched it", name, st.Hostname, err)
			}
		}
	}
	if relaunched != len(killed) {
		t.Errorf("%d of the %d killed sessions relaunched", relaunched, len(killed))
	}
	t.Logf("%d commands, %d results (%d not ok: running when their runner was killed), %d moved, %d killed sessions relaunched on their host; heal on A said %q, on B %q",
		total, len(results), notOK, forwards, relaunched, summary(healA.out.String()), summary(healB.out.String()))
	t1 := time.Now()
	stops, err := p.Stop(c, launch.StopOptions{Grace: 30 * time.Second})
	if err != nil {
		t.Logf("pool stop from A: %v", err)
	}
	var steps []string
	for _, st := range stops {
		steps = append(steps, st.Session+": "+st.Report.Step)
	}
	t.Logf("pool stop from A: %v (%s)", time.Since(t1).Round(time.Millisecond), strings.Join(steps, ", "))
	for _, name := range names {
		if st, err := readState(dirOf(name)); err != nil || st.Phase != protocol.PhaseStopped {
			t.Errorf("%s after pool stop from A: phase %q (%v)", name, st.Phase, err)
		}
	}
}

func readState(dir string) (protocol.State, error) {
	s, err := master.Open(dir)
	if err != nil {
		return protocol.State{}, err
	}
	return s.ReadState()
}

// sessionNumber is the number of a pool session's name (s03: 3).
func sessionNumber(name string) int {
	var n int
	fmt.Sscanf(strings.TrimPrefix(name, "s"), "%d", &n)
	return n
}

// countResults counts the result files of the named sessions.
func countResults(names []string, dirOf func(string) string) int {
	n := 0
	for _, name := range names {
		entries, _ := os.ReadDir(filepath.Join(dirOf(name), protocol.DirResult))
		for _, e := range entries {
			if !strings.HasPrefix(e.Name(), ".") {
				n++
			}
		}
	}
	return n
}

// sideCounts counts the cmd_ids appended to the files of the given
// directories.
func sideCounts(t *testing.T, dirs ...string) map[string]int {
	n := map[string]int{}
	for _, d := range dirs {
		files, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			data, err := os.ReadFile(filepath.Join(d, f.Name()))
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range strings.Fields(string(data)) {
				n[l]++
			}
		}
	}
	return n
}

// killPool kills every runner of the pool still running (cleanup).
func killPool(pa, pb string) {
	for _, root := range []string{pa, pb} {
		dirs, _ := filepath.Glob(filepath.Join(root, "s*"))
		for _, d := range dirs {
			if li, err := launch.ReadLaunch(d); err == nil {
				if pid, _, _, err := sched.ParseLocalID(li.JobID); err == nil {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
	}
}

// outProc is a process whose stdout is kept.
type outProc struct {
	*proc
	out *testenv.LockedBuffer
}

func startOut(t *testing.T, cmd *exec.Cmd) *outProc {
	t.Helper()
	out := &testenv.LockedBuffer{}
	cmd.Stdout = out
	return &outProc{start(t, cmd), out}
}

// stop ends a long-running master (heal --every) with SIGTERM.
func (p *outProc) stop(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Errorf("%v did not stop on SIGTERM", p.cmd.Args)
	}
}

// summary counts a heal's "moved" and "respawned" lines.
func summary(out string) string {
	moved, respawned := 0, 0
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(l, "moved "):
			moved++
		case strings.HasPrefix(l, "respawned "):
			respawned++
		}
	}
	return fmt.Sprintf("%d moved, %d respawned", moved, respawned)
}

package runner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/skillpilot/skillpilot/protocol"
	"golang.org/x/sys/unix"
)

// procStat is what the runner reads from /proc/PID/stat (a process) or
// /proc/PID/task/TID/stat (one of its threads).
type procStat struct {
	state     byte
	pgrp      int
	session   int
	startTime uint64 // clock ticks since boot
	ownCPU    uint64 // utime + stime, clock ticks: the whole process's, or the one thread's
	childCPU  uint64 // cutime + cstime: its reaped children's
}

// readProcStat parses /proc/PID/stat.
func readProcStat(pid int) (procStat, error) {
	return readStat("/proc/" + strconv.Itoa(pid) + "/stat")
}

// readStat parses a stat file of /proc. The command name (field 2) may
// hold spaces and parentheses, so the fields are counted from the last ')'.
func readStat(path string) (procStat, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return procStat{}, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 > len(s) {
		return procStat{}, fmt.Errorf("%s: unexpected format", path)
	}
	f := strings.Fields(s[i+2:])
	// f[0] is field 3 (state); field n is f[n-3].
	if len(f) < 20 || f[0] == "" {
		return procStat{}, fmt.Errorf("%s: unexpected format", path)
	}
	n := make([]uint64, 6)
	for k, field := range []int{11, 12, 13, 14, 19} { // utime, stime, cutime, cstime, starttime
		if n[k], err = strconv.ParseUint(f[field], 10, 64); err != nil {
			return procStat{}, fmt.Errorf("%s: field %d: %w", path, field+3, err)
		}
	}
	st := procStat{state: f[0][0], ownCPU: n[0] + n[1], childCPU: n[2] + n[3], startTime: n[4]}
	if st.pgrp, err = strconv.Atoi(f[2]); err == nil {
		st.session, err = strconv.Atoi(f[3])
	}
	if err != nil {
		return procStat{}, fmt.Errorf("%s: %w", path, err)
	}
	return st, nil
}

// readActivity looks at what the process group pgrp is doing (see
// fgActivity): every process of the group, the state of each of its
// threads, and the CPU time the processes used. The group is found from
// its leader down (the leader's pid is the group's id; its descendants
// through /proc/PID/task/TID/children), which costs what the tool's own
// tree holds, not the host's; when the leader is gone or the kernel lists
// no children, by a walk of all of /proc. It fails when no process of the
// group is found.
func readActivity(pgrp int) (fgActivity, error) {
	if pids, ok := treeOf(pgrp); ok {
		if a := groupActivity(pgrp, pids); a.procs > 0 {
			return a, nil
		}
		// The leader is a zombie: its group lives on elsewhere.
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return fgActivity{}, err
	}
	var pids []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	if a := groupActivity(pgrp, pids); a.procs > 0 {
		return a, nil
	}
	return fgActivity{}, fmt.Errorf("group %d: %w", pgrp, errNoProcess)
}

// errNoProcess: readActivity found no live process in the group (it has
// just ended, or the terminal's foreground group changed meanwhile).
var errNoProcess = errors.New("no live process in the group")

// groupActivity is readActivity over the processes pids, those of group
// pgrp counted. A process is judged by its main thread (its state, its own
// CPU time) and the CPU time of the children it reaped: a tool's input is
// read by its main thread, and a helper thread that keeps busy (a REPL's
// worker, a licence client) must not make a tool that waits at its prompt
// look as if it worked. A process whose main thread has exited (and shows
// as a zombie) while other threads run is judged by those threads.
func groupActivity(pgrp int, pids []int) fgActivity {
	var a fgActivity
	for _, pid := range pids {
		st, err := readProcStat(pid)
		if err != nil || st.pgrp != pgrp {
			continue
		}
		if !dead(st.state) {
			main, err := readStat("/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(pid) + "/stat")
			if err != nil {
				main = st // The process's own line: its main thread's state, all threads' CPU time.
			}
			a.procs++
			a.working = a.working || working(main.state)
			a.cpu += main.ownCPU + st.childCPU
			continue
		}
		live, busy := otherThreads(pid)
		if live {
			a.procs++
			a.working = a.working || busy
			a.cpu += st.ownCPU + st.childCPU
		}
	}
	return a
}

// working: a state of a thread that runs, is ready to run, or waits on the
// disk.
func working(state byte) bool { return state == 'R' || state == 'D' }

// dead: a zombie's or a dead task's state.
func dead(state byte) bool { return state == 'Z' || state == 'X' }

// maxTree bounds treeOf's walk.
const maxTree = 10000

// treeOf lists pid and its descendants, from the children files of each
// thread; ok is false when pid is gone or its children cannot be listed
// (a kernel without CONFIG_PROC_CHILDREN), or the tree is larger than
// maxTree.
func treeOf(pid int) (pids []int, ok bool) {
	if _, err := os.Stat("/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(pid) + "/children"); err != nil {
		return nil, false
	}
	pids = []int{pid}
	for i := 0; i < len(pids); i++ {
		dir := "/proc/" + strconv.Itoa(pids[i]) + "/task"
		tasks, err := os.ReadDir(dir)
		if err != nil {
			continue // It ended meanwhile.
		}
		for _, t := range tasks {
			b, err := os.ReadFile(dir + "/" + t.Name() + "/children")
			if err != nil {
				continue
			}
			for _, f := range strings.Fields(string(b)) {
				if c, err := strconv.Atoi(f); err == nil {
					pids = append(pids, c)
				}
			}
		}
		if len(pids) > maxTree {
			return nil, false
		}
	}
	return pids, true
}

// otherThreads looks at the threads of process pid whose main thread has
// exited: whether one of them lives, and whether one of them works.
func otherThreads(pid int) (live, busy bool) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false, false
	}
	for _, e := range ents {
		b, err := os.ReadFile(dir + "/" + e.Name() + "/stat")
		if err != nil {
			continue // The thread ended meanwhile.
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) || dead(b[i+2]) {
			continue
		}
		live = true
		busy = busy || working(b[i+2])
	}
	return live, busy
}

// killPreviousTool makes sure the tool process group a previous runner of
// this session left behind is gone, before this runner settles its
// commands and starts its own tool. The group is identified safely: the
// pid a previous runner recorded (tool_pgid, the tool's pid, which is also
// its process group and session id) together with the process's start
// time (tool_start_time). Every process whose session is that id and that
// started no earlier than the recorded tool is killed with SIGKILL; if the
// group leader is still alive with another start time, the pid was reused
// by an unrelated process and nothing is killed. It returns the pids it
// killed.
func killPreviousTool(pgid int, startTime uint64) []int {
	if pgid <= 1 || startTime == 0 || pgid == os.Getpid() {
		return nil
	}
	if st, err := readProcStat(pgid); err == nil && st.startTime != startTime {
		return nil // Reused pid: not ours.
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var killed []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		st, err := readProcStat(pid)
		if err != nil || st.session != pgid || st.startTime < startTime {
			continue
		}
		if dead(st.state) {
			if live, _ := otherThreads(pid); !live {
				continue // A zombie; one whose main thread alone exited still runs.
			}
		}
		if unix.Kill(pid, unix.SIGKILL) == nil {
			killed = append(killed, pid)
		}
	}
	return killed
}

// killPreviousTool (the Runner's) reads the tool a previous runner of this
// session recorded in state/state.json and, if it was on this host, kills
// what is left of its process group (see killPreviousTool above), logging a
// stale_tool_killed event.
func (r *Runner) killPreviousTool() {
	b, _, err := r.root.ReadFile(protocol.FileState, maxStateFile)
	if err != nil {
		return
	}
	var st protocol.State
	if json.Unmarshal(b, &st) != nil || st.Hostname != r.id.hostname || st.ToolPGID == 0 {
		return
	}
	if killed := killPreviousTool(st.ToolPGID, st.ToolStartTime); len(killed) > 0 {
		r.log.Warn("killed the previous runner's tool, which outlived it", "tool_pgid", st.ToolPGID, "pids", killed)
		r.event(protocol.Event{Event: protocol.EvStaleToolKilled, Detail: map[string]any{
			"tool_pgid": st.ToolPGID, "tool_start_time": st.ToolStartTime, "pids": killed}})
	}
}

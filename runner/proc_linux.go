package runner

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/skillpilot/skillpilot/protocol"
	"golang.org/x/sys/unix"
)

// procStat is what the runner reads from /proc/PID/stat.
type procStat struct {
	state     byte
	pgrp      int
	session   int
	startTime uint64 // clock ticks since boot
	cpu       uint64 // clock ticks of CPU time: its own and its reaped children's (utime, stime, cutime, cstime)
}

// readProcStat parses /proc/PID/stat. The command name (field 2) may hold
// spaces and parentheses, so the fields are counted from the last ')'.
func readProcStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 > len(s) {
		return procStat{}, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(s[i+2:])
	// f[0] is field 3 (state); field n is f[n-3].
	if len(f) < 20 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	var st procStat
	st.state = f[0][0]
	st.pgrp, _ = strconv.Atoi(f[2])
	st.session, _ = strconv.Atoi(f[3])
	for _, i := range []int{11, 12, 13, 14} { // utime, stime, cutime, cstime
		n, _ := strconv.ParseUint(f[i], 10, 64)
		st.cpu += n
	}
	st.startTime, err = strconv.ParseUint(f[19], 10, 64)
	return st, err
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
	return fgActivity{}, fmt.Errorf("no process in group %d", pgrp)
}

// groupActivity is readActivity over the processes pids, those of group
// pgrp counted.
func groupActivity(pgrp int, pids []int) fgActivity {
	var a fgActivity
	for _, pid := range pids {
		st, err := readProcStat(pid)
		if err != nil || st.pgrp != pgrp || st.state == 'Z' || st.state == 'X' {
			continue
		}
		a.procs++
		a.cpu += st.cpu
		if !a.working {
			a.working = threadsWorking(pid, st.state)
		}
	}
	return a
}

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

// threadsWorking reports whether a thread of process pid runs, is ready
// to run, or waits on the disk (R or D); state is the process's own (its
// main thread's), used when its threads cannot be listed.
func threadsWorking(pid int, state byte) bool {
	working := func(s byte) bool { return s == 'R' || s == 'D' }
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return working(state)
	}
	for _, e := range ents {
		b, err := os.ReadFile(dir + "/" + e.Name() + "/stat")
		if err != nil {
			continue // The thread ended meanwhile.
		}
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && working(b[i+2]) {
			return true
		}
	}
	return false
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
		if err != nil || st.session != pgid || st.startTime < startTime || st.state == 'Z' || st.state == 'X' {
			continue
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

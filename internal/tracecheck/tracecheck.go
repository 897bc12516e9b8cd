// Package tracecheck checks a Trace Event JSON document (master report
// --format trace) the way a viewer needs it: no two complete events of
// one thread overlapping, every process named, no two processes with one
// name. Tests of the report and the CLI share it.
package tracecheck

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
)

// Result is what Check counted: complete events (ph X) by pid, and the
// process names by pid.
type Result struct {
	Slices map[int]int
	Names  map[int]string
}

// Check parses data and returns an error naming every problem: two
// complete events (ph X) of one thread (pid, tid) that overlap (one
// starts before the other ends; viewers mis-draw or drop those), a pid
// without process_name, two processes with one name.
func Check(data []byte) (Result, error) {
	var doc struct {
		TraceEvents []struct {
			Name string         `json:"name"`
			Ph   string         `json:"ph"`
			TS   float64        `json:"ts"`
			Dur  float64        `json:"dur"`
			PID  int            `json:"pid"`
			TID  int            `json:"tid"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	res := Result{Slices: map[int]int{}, Names: map[int]string{}}
	if err := json.Unmarshal(data, &doc); err != nil {
		return res, fmt.Errorf("trace is not JSON: %w", err)
	}
	type span struct{ start, end float64 }
	byThread := map[[2]int][]span{}
	for _, e := range doc.TraceEvents {
		switch e.Ph {
		case "X":
			byThread[[2]int{e.PID, e.TID}] = append(byThread[[2]int{e.PID, e.TID}], span{e.TS, e.TS + e.Dur})
			res.Slices[e.PID]++
		case "M":
			if e.Name == "process_name" {
				res.Names[e.PID] = fmt.Sprint(e.Args["name"])
			}
		}
	}
	var errs []error
	seen := map[string]int{}
	pids := make([]int, 0, len(res.Names))
	for pid := range res.Names {
		pids = append(pids, pid)
	}
	sort.Ints(pids)
	for _, pid := range pids {
		n := res.Names[pid]
		if other, dup := seen[n]; dup {
			errs = append(errs, fmt.Errorf("processes %d and %d are both %q", other, pid, n))
		}
		seen[n] = pid
	}
	threads := make([][2]int, 0, len(byThread))
	for th := range byThread {
		threads = append(threads, th)
	}
	sort.Slice(threads, func(i, j int) bool {
		return threads[i][0] < threads[j][0] || threads[i][0] == threads[j][0] && threads[i][1] < threads[j][1]
	})
	for _, th := range threads {
		spans := byThread[th]
		if _, ok := res.Names[th[0]]; !ok {
			errs = append(errs, fmt.Errorf("pid %d has no process_name", th[0]))
		}
		sort.Slice(spans, func(i, j int) bool { return spans[i].start < spans[j].start })
		for i := 1; i < len(spans); i++ {
			if spans[i].start < spans[i-1].end {
				errs = append(errs, fmt.Errorf("pid %d tid %d: slice [%v, %v) overlaps [%v, %v)", th[0], th[1], spans[i].start, spans[i].end, spans[i-1].start, spans[i-1].end))
			}
		}
	}
	return res, errors.Join(errs...)
}

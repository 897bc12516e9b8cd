package master

import (
	"fmt"

	"github.com/skillpilot/skillpilot/sched"
)

// LaunchStatus is the scheduler's side of a launched session, shown by
// master status beside the runner's.
type LaunchStatus struct {
	Via      string    `json:"via"`
	JobID    string    `json:"job_id"`
	Launches int       `json:"launches"`
	Job      sched.Job `json:"job"`
	Error    string    `json:"error,omitempty"` // why the scheduler could not be asked
}

// String is the status line: "12 (slurm) RUNNING for 1:02".
func (ls *LaunchStatus) String() string {
	if ls.Error != "" {
		return fmt.Sprintf("%s (%s), state unknown: %s", ls.JobID, ls.Via, ls.Error)
	}
	s := fmt.Sprintf("%s (%s) %s", ls.JobID, ls.Via, ls.Job)
	if ls.Job.Elapsed != "" && ls.Job.State.Active() {
		s += " for " + ls.Job.Elapsed
	}
	if ls.Launches > 1 {
		s += fmt.Sprintf(", launch #%d", ls.Launches)
	}
	return s
}

package launch

import (
	"fmt"

	"github.com/skillpilot/skillpilot/sched"
)

// JobStatus is the scheduler's side of a launched session (Status), shown
// by master status beside the runner's (the "launch" object of its JSON)
// and by master pool status.
type JobStatus struct {
	Via      string    `json:"via"`
	JobID    string    `json:"job_id"`
	Launches int       `json:"launches"`
	Job      sched.Job `json:"job"`
	Error    string    `json:"error,omitempty"` // why the scheduler could not be asked
}

// String is the status line: "12 (slurm) RUNNING for 1:02".
func (ls *JobStatus) String() string {
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

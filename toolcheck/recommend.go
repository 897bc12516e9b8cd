package toolcheck

import (
	"fmt"
	"strings"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
)

// shortDuration is d as a flag takes it, without zero seconds: 4m, 1h30m.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	return strings.TrimSuffix(s, "h0m")
}

// initsAgain is ", --init ran again" when a restart runs any.
func (c *checker) initsAgain() string {
	if c.ownInit == "" && len(c.o.Init) == 0 {
		return ""
	}
	return ", --init ran again"
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// recommend says how to run the runner on the tool, from what the battery
// found.
func (c *checker) recommend() Recommendation {
	r := Recommendation{Command: []string{"runner", "--session", "DIR"}}
	switch {
	case c.o.DriverFile != "":
		r.Command = append(r.Command, "--driver", c.o.DriverFile)
	case c.o.Kind != protocol.KindTcl:
		r.Command = append(r.Command, "--kind", string(c.o.Kind))
	}
	for _, i := range c.o.Init {
		r.Command = append(r.Command, "--init", i)
	}
	const defStart = time.Minute
	r.StartTimeout, r.StartWhy = "1m", "the default"
	switch start := c.rep.Checks[0]; {
	case start.Status != Holds && strings.Contains(start.Detail, "--start-timeout"):
		r.StartTimeout, r.StartWhy = shortDuration(2*c.o.StartTimeout), "the tool was not ready within the check's bound: give it more, or see why in the check's session"
		r.Command = append(r.Command, "--start-timeout", r.StartTimeout)
	case start.Status != Holds:
		r.StartWhy = "the tool did not start: see the start-up row"
	case c.started > defStart/2:
		d := (2 * c.started).Round(time.Minute)
		if d < 2*c.started {
			d += time.Minute
		}
		r.StartTimeout = shortDuration(d)
		r.StartWhy = fmt.Sprintf("the start-up took %s here; a licence queue or a loaded host takes longer", FormatDuration(c.started))
		r.Command = append(r.Command, "--start-timeout", r.StartTimeout)
	default:
		r.StartWhy = fmt.Sprintf("the default is enough: the start-up took %s", FormatDuration(c.started))
	}
	r.Command = append(append(r.Command, "--"), c.rep.Tool...)
	switch c.cancelHow {
	case "kept":
		r.CancelPolicy, r.CancelWhy = "ctrl_c", "the default: Ctrl-C brings the tool back to its prompt with its state"
	case "died":
		r.CancelPolicy, r.CancelWhy = "ctrl_c", "the default: the tool dies of Ctrl-C, so a cancel restarts it (its state is lost, --init runs again)"
	case "terminated":
		r.CancelPolicy = "terminate_tool"
		r.CancelWhy = fmt.Sprintf("Ctrl-C leaves the tool busy until --resync-wait (%s) ends it; terminate_tool ends it at once, with the same loss of state", c.o.ResyncWait)
	default:
		r.CancelPolicy, r.CancelWhy = "ctrl_c", "the default (the check could not tell what Ctrl-C does to this tool)"
	}
	if c.initTrouble != "" {
		r.Notes = append(r.Notes, "--init scripts fail on this tool today: "+c.initTrouble)
	}
	return r
}

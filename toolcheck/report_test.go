package toolcheck

import (
	"strings"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
	"github.com/skillpilot/skillpilot/runner"
)

// TestRecommend: the flags the check recommends follow from what it
// found: the cancel policy from what Ctrl-C did, --start-timeout from how
// long the start-up took, the kind or driver and --init as given.
func TestRecommend(t *testing.T) {
	start := func(st Status, detail string) []Check { return []Check{{Name: "start", Status: st, Detail: detail}} }
	for _, tc := range []struct {
		name       string
		o          Options
		checks     []Check
		started    time.Duration
		cancelHow  string
		command    string
		policy     string
		startTO    string
		whyStartTO string
	}{
		{"tclsh", Options{Kind: protocol.KindTcl}, start(Holds, ""), 80 * time.Millisecond, "died",
			"runner --session DIR -- T", "ctrl_c", "1m", "the default is enough: the start-up took 80ms"},
		{"a shell that keeps its state", Options{Kind: "yosys"}, start(Holds, ""), time.Second, "kept",
			"runner --session DIR --kind yosys -- T", "ctrl_c", "1m", "the default is enough"},
		{"Ctrl-C does not bring it back", Options{Kind: protocol.KindTcl}, start(Holds, ""), time.Second, "terminated",
			"runner --session DIR -- T", "terminate_tool", "1m", "the default"},
		{"a licence wait of 95 s", Options{Kind: protocol.KindTcl, Init: []string{"a.tcl"}}, start(Holds, ""), 95 * time.Second, "died",
			"runner --session DIR --init a.tcl --start-timeout 4m -- T", "ctrl_c", "4m", "the start-up took 1m35s here"},
		{"a start-up of 40 s", Options{Kind: protocol.KindTcl}, start(Holds, ""), 40 * time.Second, "died",
			"runner --session DIR --start-timeout 2m -- T", "ctrl_c", "2m", "the start-up took 40.00s"},
		{"a driver file", Options{Kind: "py", DriverFile: "py.json"}, start(Holds, ""), time.Second, "",
			"runner --session DIR --driver py.json -- T", "ctrl_c", "1m", "the default"},
		{"not ready in time", Options{Kind: protocol.KindTcl, StartTimeout: 10 * time.Minute}, start(Fails, "not ready within --start-timeout 10m0s"), 0, "",
			"runner --session DIR --start-timeout 20m -- T", "ctrl_c", "20m", "not ready within the check's bound"},
		{"did not start", Options{Kind: protocol.KindTcl}, start(Fails, "the runner gave up: the tool exited with code 1"), 0, "",
			"runner --session DIR -- T", "ctrl_c", "1m", "the tool did not start"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &checker{o: tc.o, rep: &Report{Tool: []string{"T"}, Checks: tc.checks}, started: tc.started, cancelHow: tc.cancelHow}
			r := c.recommend()
			if got := strings.Join(r.Command, " "); got != tc.command {
				t.Errorf("command %q, want %q", got, tc.command)
			}
			if r.CancelPolicy != tc.policy || r.StartTimeout != tc.startTO || !strings.Contains(r.StartWhy, tc.whyStartTO) {
				t.Errorf("cancel_policy %s, --start-timeout %s (%s); want %s, %s (%s)", r.CancelPolicy, r.StartTimeout, r.StartWhy, tc.policy, tc.startTO, tc.whyStartTO)
			}
		})
	}
}

// TestWriteTable: a row per check with its mark and time, the
// recommendation, the kept session and the verdict naming what failed.
func TestWriteTable(t *testing.T) {
	r := &Report{Tool: []string{"innovus", "-no_gui"}, Kind: "tcl", Session: "/tmp/runner-check-1/sess",
		Checks: []Check{
			{Name: "start", Title: "start-up", Status: Holds, TookMS: 92500, Detail: "ready"},
			{Name: "value", Title: "value", Status: NotApplicable, Detail: "no value"},
			{Name: "cancel", Title: "cancel", Status: Fails, TookMS: 310, Detail: "why"},
			{Name: "stop", Title: "stop", Status: NotRun},
		},
		Recommend: Recommendation{Command: []string{"runner", "--session", "DIR", "--", "innovus", "-no_gui"}, CancelPolicy: "ctrl_c", CancelWhy: "the default",
			StartTimeout: "4m", StartWhy: "slow"}}
	var b strings.Builder
	r.WriteTable(&b)
	want := `runner check: innovus -no_gui (kind tcl)

  check     holds    took  what happened
  start-up  yes     1m33s  ready
  value     n/a            no value
  cancel    NO      310ms  why
  stop      -

Recommended:
  runner --session DIR -- innovus -no_gui
  cancel_policy ctrl_c: the default
  --start-timeout 4m: slow

The check's session is kept for its logs: /tmp/runner-check-1/sess

Not every guarantee holds on this tool (exit 1): cancel.
`
	if b.String() != want {
		t.Fatalf("table:\n%s\nwant:\n%s", b.String(), want)
	}
}

// TestDriverLang: on a driver the check does not know it types only what
// the driver's print command makes, and says which checks it cannot make.
func TestDriverLang(t *testing.T) {
	l, err := langFor("py", &runner.DriverSpec{Kind: "py", Print: "print('{}')", Error: "^Traceback "}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if l.output != "print('sp check alpha')\nprint('sp check beta')" || l.outputWant != "sp check alpha\nsp check beta\n" {
		t.Fatalf("output %q want %q", l.output, l.outputWant)
	}
	for _, n := range []string{"value", "utf8", "no_newline", "cancel", "send", "big_error"} {
		if l.notApplicable[n] == "" {
			t.Errorf("%s is not marked not applicable", n)
		}
	}
	if l.errPayload == "" || l.notApplicable["error"] != "" {
		t.Errorf("a driver with an error pattern is checked for an error")
	}
	l, _ = langFor("py", &runner.DriverSpec{Kind: "py", Print: "print('{}')"}, t.TempDir())
	if l.notApplicable["error"] == "" {
		t.Errorf("a driver without an error pattern has no error to check")
	}
}

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{12 * time.Millisecond: "12ms", 1500 * time.Millisecond: "1.50s", 95 * time.Second: "1m35s"} {
		if got := FormatDuration(d); got != want {
			t.Errorf("%v: %q, want %q", d, got, want)
		}
	}
}

// TestShellLine: the recommended command line pastes into a shell as it is.
func TestShellLine(t *testing.T) {
	got := shellLine([]string{"runner", "--session", "DIR", "--", "sh", "-c", `printf "Checking out license..."; sleep 20; exec tclsh`, "it's"})
	want := `runner --session DIR -- sh -c 'printf "Checking out license..."; sleep 20; exec tclsh' 'it'\''s'`
	if got != want {
		t.Fatalf("%s\nwant %s", got, want)
	}
}

package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/master"
)

// masterSide is one master measured on its own runner: run returns the
// durations of per round trips of `puts hi` (result and output read
// back) after warm unmeasured ones.
type masterSide struct {
	name string
	run  func(b testing.TB, dir string, warm, per int) sample
}

var bareMaster = masterSide{"bare client (one rename, one watcher)", func(b testing.TB, dir string, warm, per int) sample {
	c := newClient(b, dir)
	var s sample
	for i := 0; i < warm+per; i++ {
		d := c.roundTripRead(b, "puts hi", true)
		if i >= warm {
			s = append(s, d)
		}
	}
	return s
}}

var goMaster = masterSide{"Go library Session.Run", func(b testing.TB, dir string, warm, per int) sample {
	s, err := master.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	var out sample
	for i := 0; i < warm+per; i++ {
		t0 := time.Now()
		r, err := s.Run(ctx, "puts hi", master.SubmitOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := os.ReadFile(filepath.Join(dir, r.OutputPath)); err != nil {
			b.Fatal(err)
		}
		if i >= warm {
			out = append(out, time.Since(t0))
		}
	}
	return out
}}

var cliMaster = masterSide{"CLI master submit --wait", func(b testing.TB, dir string, warm, per int) sample {
	var out sample
	for i := 0; i < warm+per; i++ {
		t0 := time.Now()
		got, err := exec.Command(masterBin, "submit", "--session", dir, "--wait", "puts hi").Output()
		if err != nil || string(got) != "hi\n" {
			b.Fatalf("master submit --wait: %q %v", got, err)
		}
		if i >= warm {
			out = append(out, time.Since(t0))
		}
	}
	return out
}}

// scriptMaster runs a program that prints one round trip's duration in
// nanoseconds per line, for the masters in other languages.
func scriptMaster(name string, argv func(dir string, warm, per int) []string) masterSide {
	return masterSide{name, func(b testing.TB, dir string, warm, per int) sample {
		a := argv(dir, warm, per)
		cmd := exec.Command(a[0], a[1:]...)
		cmd.Dir = filepath.Join("..", "..")
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		var out sample
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			ns, err := strconv.ParseInt(strings.TrimSpace(sc.Text()), 10, 64)
			if err != nil {
				b.Fatalf("%s printed %q", name, sc.Text())
			}
			out = append(out, time.Duration(ns))
		}
		if err := cmd.Wait(); err != nil || len(out) != per {
			b.Fatalf("%s: %v, %d samples", name, err, len(out))
		}
		return out
	}}
}

var pythonMaster = scriptMaster("Python Session.run", func(dir string, warm, per int) []string {
	return []string{"python3", "-c", `import sys, time
sys.path.insert(0, "clients/python")
from skillpilot import Session
s = Session(sys.argv[1]); warm, per = int(sys.argv[2]), int(sys.argv[3])
for i in range(warm + per):
    t0 = time.perf_counter_ns()
    r = s.run("puts hi")
    s.output(r)
    if i >= warm:
        print(time.perf_counter_ns() - t0, flush=True)
`, dir, strconv.Itoa(warm), strconv.Itoa(per)}
})

const tclRun = `lappend auto_path [file join [pwd] clients tcl]
package require skillpilot
lassign $argv dir warm per
for {set i 0} {$i < $warm + $per} {incr i} {
    set t0 [clock microseconds]
    set r [skillpilot::run $dir {puts hi}]
    skillpilot::output $dir $r
    if {$i >= $warm} { puts [expr {([clock microseconds] - $t0) * 1000}]; flush stdout }
}
`

var tclMaster = scriptMaster("Tcl skillpilot::run", func(dir string, warm, per int) []string {
	script := dir + ".tcl"
	if err := os.WriteFile(script, []byte(tclRun), 0o600); err != nil {
		panic(err)
	}
	return []string{"tclsh", script, dir, strconv.Itoa(warm), strconv.Itoa(per)}
})

// BenchmarkMastersRoundTrip: `puts hi` through each master, each on its own
// runner and alone (alternating rounds), against a bare client that writes
// the command file with one rename and waits with one long-lived watcher.
func BenchmarkMastersRoundTrip(b *testing.B) {
	rounds, warm, per := pick(1, 5), pick(3, 30), pick(10, 100)
	sides := []masterSide{bareMaster, goMaster, cliMaster, pythonMaster, tclMaster}
	got := make([][]sample, len(sides))
	for n := 0; n < b.N; n++ {
		for r := 0; r < rounds; r++ {
			for k := range sides {
				i := (k + r) % len(sides)
				dir := benchDir(b)
				stop := runnerSide.start(b, dir)
				got[i] = append(got[i], sides[i].run(b, dir, warm, per))
				stop()
			}
		}
	}
	ref := merge(got[0])
	report("master round trip, `puts hi`, each on its own runner, alone (%d rounds × %d), µs:   p50      p90      p99   p50 ratio to bare", rounds, per)
	for i, s := range sides {
		all := merge(got[i])
		report("%-40s %8.0f %8.0f %8.0f   %.2f", s.name, us(all.pct(.5)), us(all.pct(.9)), us(all.pct(.99)), us(all.pct(.5))/us(ref.pct(.5)))
		b.ReportMetric(us(all.pct(.5)), fmt.Sprintf("m%d-p50-µs", i))
	}
}

func merge(ss []sample) sample {
	var out sample
	for _, s := range ss {
		out = append(out, s...)
	}
	return out
}

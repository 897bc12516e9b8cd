package bench

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/internal/testenv"
	"github.com/skillpilot/skillpilot/protocol"
)

// BenchmarkCancel: ctl/cancel.json created → cancelled result visible, on
// the fake EDA tool, which returns to its prompt on Ctrl-C.
func BenchmarkCancel(b *testing.B) {
	testenv.NeedTool(b, "expect", "expect")
	fake, _ := filepath.Abs("../../testdata/fake_eda.exp")
	rd := benchDir(b)
	startRunner(b, rd, "--", fake)
	c := newClient(b, rd)
	var lat sample
	for n := 0; n < b.N; n++ {
		for i := 0; i < pick(3, 30); i++ {
			name := c.submit(b, "report_timing 100000 10")
			out := filepath.Join(rd, "output", protocol.OutputName(name))
			for {
				data, _ := os.ReadFile(out)
				if strings.Contains(string(data), "Path 2:") {
					break
				}
				time.Sleep(time.Millisecond)
			}
			t0 := time.Now()
			f, _ := os.Create(filepath.Join(rd, protocol.FileCancel))
			f.Close()
			c.wait(b, name)
			lat = append(lat, time.Since(t0))
		}
	}
	b.ReportMetric(us(lat.pct(0.5))/1000, "cancel-p50-ms")
	b.ReportMetric(us(lat.pct(0.9))/1000, "cancel-p90-ms")
	report("cancel → cancelled result: p50 %.1f ms, p90 %.1f ms (fake EDA tool checks for Ctrl-C every 10 ms)", us(lat.pct(.5))/1000, us(lat.pct(.9))/1000)
}

// BenchmarkIdle: CPU of an idle runner with the default heartbeat, and
// file descriptors and goroutines across many commands.
func BenchmarkIdle(b *testing.B) {
	idle := time.Duration(pick(3, 60)) * time.Second
	cmds := pick(300, 10000)
	rd := benchDir(b)
	p := startRunner(b, rd)
	pid := p.Pid()
	c := newClient(b, rd)
	for n := 0; n < b.N; n++ {
		c.roundTrip(b, "set x 0")
		time.Sleep(time.Second)
		cpu0, t0 := procCPU(pid), time.Now()
		time.Sleep(idle)
		cpu := procCPU(pid) - cpu0
		pct := 100 * cpu.Seconds() / time.Since(t0).Seconds()
		fd0, th0 := countFDs(pid), procStatus(pid, "Threads")
		for i := 0; i < cmds; i++ {
			c.roundTrip(b, "set x [expr {$x + 1}]; puts $x")
		}
		fd1, th1 := countFDs(pid), procStatus(pid, "Threads")
		b.ReportMetric(pct, "idle-%cpu")
		b.ReportMetric(float64(fd1-fd0), "fd-growth")
		report("idle runner over %v: %.3f%% of one core (tick resolution 10 ms); open fds %d → %d and threads %d → %d over %d commands",
			idle, pct, fd0, fd1, th0, th1, cmds)
	}
	_ = runtime.NumGoroutine
}

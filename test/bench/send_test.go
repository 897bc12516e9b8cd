package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
)

// BenchmarkSend: a master's send → the tool has the bytes (a Tcl `gets
// stdin` returned: the payload prints the time it read each line, on the
// same host's clock), and → the master has the reply. The master is the Go
// library (seq reservation, liveness check, request write, reply wait),
// the runner sees the request through inotify.
func BenchmarkSend(b *testing.B) {
	rd := benchDir(b)
	startRunner(b, rd)
	s, err := master.Open(rd)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	n := pick(20, 200)
	var toTool, toReply sample
	for r := 0; r < b.N; r++ {
		c, err := s.Submit(ctx, fmt.Sprintf(`puts -nonewline "ready> "; flush stdout
for {set i 0} {$i < %d} {incr i} {gets stdin l; puts "$l [clock microseconds]"; flush stdout}`, n), master.SubmitOptions{})
		if err != nil {
			b.Fatal(err)
		}
		sent := map[int]time.Time{}
		for i := 0; i < n; i++ {
			opts := master.SendOptions{}
			if i == 0 {
				opts.Expect = "ready> "
			}
			t0 := time.Now()
			if _, err := s.Send(ctx, c.ID, []byte(strconv.Itoa(i)+"\n"), opts); err != nil {
				b.Fatal(err)
			}
			if i > 0 {
				toReply = append(toReply, time.Since(t0))
				sent[i] = t0
			}
		}
		if _, err := c.Wait(ctx, master.WaitOptions{}); err != nil {
			b.Fatal(err)
		}
		out, _ := os.ReadFile(filepath.Join(rd, protocol.DirOutput, protocol.OutputName(c.Name)))
		for _, m := range regexp.MustCompile(`(?m)^(\d+) (\d+)$`).FindAllStringSubmatch(string(out), -1) {
			i, _ := strconv.Atoi(m[1])
			at, _ := strconv.ParseInt(m[2], 10, 64)
			if t0, ok := sent[i]; ok {
				toTool = append(toTool, time.UnixMicro(at).Sub(t0))
			}
		}
	}
	b.ReportMetric(us(toTool.pct(0.5))/1000, "send-to-tool-p50-ms")
	b.ReportMetric(us(toReply.pct(0.5))/1000, "send-reply-p50-ms")
	report("send → the tool has the bytes: p50 %.2f ms, p90 %.2f ms; send → reply at the master: p50 %.2f ms, p90 %.2f ms (%d sends, Go master, inotify)",
		us(toTool.pct(.5))/1000, us(toTool.pct(.9))/1000, us(toReply.pct(.5))/1000, us(toReply.pct(.9))/1000, len(toTool))
}

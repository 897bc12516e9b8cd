package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
)

// BenchmarkBacklog: throughput and latency while 10, 10,000 or 100,000
// commands wait in queue/. The measured commands have the lowest seqs; the
// backlog sits behind them. Timing starts at the first result, so the
// runner's one listing at start is not counted (it is reported apart).
func BenchmarkBacklog(b *testing.B) {
	backlogs := []int{10, 10000, 100000}
	if smoke {
		backlogs = []int{10, 2000}
	}
	measured := pick(50, 400)
	var base float64
	for _, x := range backlogs {
		dir := benchDir(b)
		os.MkdirAll(filepath.Join(dir, "queue"), 0o700)
		write := func(seq int64) string {
			id := fmt.Sprintf("q%d", seq)
			name := protocol.CommandName(seq, id)
			data, _ := json.Marshal(protocol.Command{CmdID: id, Seq: seq, Kind: protocol.KindTcl, Payload: "puts hi"})
			os.WriteFile(filepath.Join(dir, "queue", name), data, 0o600)
			return name
		}
		var names []string
		for i := 1; i <= measured; i++ {
			names = append(names, write(int64(i)))
		}
		for i := 0; i < x; i++ {
			write(int64(measured + 1000 + i))
		}
		c := newClient(b, dir)
		t0 := time.Now()
		startRunner(b, dir)
		c.wait(b, names...)
		// Throughput from the runner's own timestamps: the client may see
		// results in bursts.
		r0, r1 := readResult(b, dir, names[0]), readResult(b, dir, names[measured-1])
		first := r0.EndTS.Sub(t0)
		tput := float64(measured-1) / r1.EndTS.Sub(r0.EndTS.Time).Seconds()
		// Latency of a command that jumps the backlog (seq 0).
		var lat sample
		for i := 0; i < pick(5, 20); i++ {
			id := fmt.Sprintf("p%d", i)
			name := protocol.CommandName(0, id)
			data, _ := json.Marshal(protocol.Command{CmdID: id, Seq: 0, Kind: protocol.KindTcl, Payload: "puts hi"})
			ts := time.Now()
			os.WriteFile(filepath.Join(dir, "queue", "."+name), data, 0o600)
			os.Rename(filepath.Join(dir, "queue", "."+name), filepath.Join(dir, "queue", name))
			c.wait(b, name)
			lat = append(lat, time.Since(ts))
		}
		if x == backlogs[0] {
			base = tput
		}
		b.ReportMetric(tput, fmt.Sprintf("backlog%d-cmd/s", x))
		b.ReportMetric(us(lat.pct(0.5)), fmt.Sprintf("backlog%d-jump-p50-µs", x))
		report("backlog %6d: %.0f cmd/s (%.2f of backlog %d), front-of-queue latency p50 %.0f µs, start to first result %v",
			x, tput, tput/base, backlogs[0], us(lat.pct(0.5)), first.Round(time.Millisecond))
	}
}

func readResult(b testing.TB, dir, name string) protocol.Result {
	var r protocol.Result
	data, err := os.ReadFile(filepath.Join(dir, "result", name))
	if err == nil {
		err = json.Unmarshal(data, &r)
	}
	if err != nil {
		b.Fatal(err)
	}
	return r
}

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
// commands wait in queue/. Each session gets its backlog once (seqs from
// 1e9 up). Then, in alternating rounds, each session gets a batch of fresh
// commands with lower seqs (they run first), its runner is started, drains
// the batch and is stopped; its backlog stays. Throughput comes from the
// runner's own result timestamps (first to last of the batch), so the one
// listing of queue/ at start is not counted (it is reported apart).
func BenchmarkBacklog(b *testing.B) {
	backlogs := []int{10, 10000, 100000}
	if smoke {
		backlogs = []int{10, 2000}
	}
	rounds, batch := pick(2, 5), pick(50, 200)
	dirs := make([]string, len(backlogs))
	for i, x := range backlogs {
		dirs[i] = benchDir(b)
		os.MkdirAll(filepath.Join(dirs[i], "queue"), 0o700)
		for j := 0; j < x; j++ {
			writeQueued(b, dirs[i], int64(1e9+j), fmt.Sprintf("q%d", j))
		}
	}
	tput := make([][]float64, len(backlogs))
	lat := make([]sample, len(backlogs))
	first := make([]time.Duration, len(backlogs))
	var ratios [][]float64 = make([][]float64, len(backlogs))
	for n := 0; n < b.N; n++ {
		for r := 0; r < rounds; r++ {
			var base float64
			for i, dir := range dirs {
				var names []string
				for j := 0; j < batch; j++ {
					seq := int64(r*10000 + j + 1)
					names = append(names, writeQueued(b, dir, seq, fmt.Sprintf("r%d-%d", r, j)))
				}
				c := newClient(b, dir)
				t0 := time.Now()
				p := startRunner(b, dir)
				c.wait(b, names...)
				r0, r1 := readResult(b, dir, names[0]), readResult(b, dir, names[batch-1])
				first[i] = r0.EndTS.Sub(t0)
				x := float64(batch-1) / r1.EndTS.Sub(r0.EndTS.Time).Seconds()
				// A command written now with seq 0 jumps the backlog.
				name := protocol.CommandName(0, fmt.Sprintf("jump%d", r))
				data, _ := json.Marshal(protocol.Command{CmdID: fmt.Sprintf("jump%d", r), Seq: 0, Kind: protocol.KindTcl, Payload: "puts hi"})
				ts := time.Now()
				os.WriteFile(filepath.Join(dir, "queue", "."+name), data, 0o600)
				os.Rename(filepath.Join(dir, "queue", "."+name), filepath.Join(dir, "queue", name))
				c.wait(b, name)
				lat[i] = append(lat[i], time.Since(ts))
				p.End()
				if i == 0 {
					base = x
				}
				tput[i] = append(tput[i], x)
				ratios[i] = append(ratios[i], x/base)
			}
		}
	}
	for i, x := range backlogs {
		lo, hi := spread(ratios[i])
		b.ReportMetric(medianF(tput[i]), fmt.Sprintf("backlog%d-cmd/s", x))
		b.ReportMetric(medianF(ratios[i]), fmt.Sprintf("backlog%d-x-backlog%d", x, backlogs[0]))
		b.ReportMetric(us(lat[i].pct(0.5)), fmt.Sprintf("backlog%d-jump-µs", x))
		report("backlog %6d: %.0f cmd/s, %.2f of backlog %d (median of %d rounds, p10 %.2f, p90 %.2f); a command jumping the queue: %.1f ms; start to first result %v",
			x, medianF(tput[i]), medianF(ratios[i]), backlogs[0], len(ratios[i]), lo, hi, us(lat[i].pct(0.5))/1000, first[i].Round(time.Millisecond))
	}
}

func writeQueued(b testing.TB, dir string, seq int64, id string) string {
	name := protocol.CommandName(seq, id)
	data, _ := json.Marshal(protocol.Command{CmdID: id, Seq: seq, Kind: protocol.KindTcl, Payload: "puts hi"})
	if err := os.WriteFile(filepath.Join(dir, "queue", name), data, 0o600); err != nil {
		b.Fatal(err)
	}
	return name
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

package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkDrain: N commands queued at once (1,000, 10,000 and 100,000;
// 500 and 5,000 in the smoke), then the runner is started and drains them
// all (issue 44, goal 2: the drain time per command stays flat as the
// backlog grows). The time per command is taken from the runner's own
// result timestamps, the first result's end to the last's, so the one
// listing of queue/ at the start is not in it (it is printed apart, as the
// start to the first result). Each size runs alone, smallest first, twice
// in alternating order.
func BenchmarkDrain(b *testing.B) {
	sizes := []int{1000, 10_000, 100_000}
	if smoke {
		sizes = []int{500, 5000}
	}
	per := make([][]float64, len(sizes))
	first := make([]time.Duration, len(sizes))
	for n := 0; n < b.N; n++ {
		for r := 0; r < pick(1, 2); r++ {
			for k := range sizes {
				i := k
				if r%2 == 1 {
					i = len(sizes) - 1 - k
				}
				size := sizes[i]
				dir := benchDir(b)
				os.MkdirAll(filepath.Join(dir, "queue"), 0o700)
				var names []string
				for j := 0; j < size; j++ {
					names = append(names, writeQueued(b, dir, int64(j+1), fmt.Sprintf("d%d", j)))
				}
				t0 := time.Now()
				p := startRunner(b, dir)
				last := filepath.Join(dir, "result", names[len(names)-1])
				deadline := time.Now().Add(20 * time.Minute)
				for {
					if _, err := os.Stat(last); err == nil {
						break
					}
					if time.Now().After(deadline) {
						b.Fatalf("the drain of %d did not end", size)
					}
					time.Sleep(50 * time.Millisecond)
				}
				r0, r1 := readResult(b, dir, names[0]), readResult(b, dir, names[len(names)-1])
				first[i] = r0.EndTS.Sub(t0)
				per[i] = append(per[i], float64(r1.EndTS.Sub(r0.EndTS.Time))/float64(time.Millisecond)/float64(size-1))
				p.End()
			}
		}
	}
	for i, size := range sizes {
		b.ReportMetric(medianF(per[i]), fmt.Sprintf("queued%d-ms/cmd", size))
		report("drain of %7d queued: %.3f ms a command (median of %d); start to the first result %v, %.2f× the drain of %d",
			size, medianF(per[i]), len(per[i]), first[i].Round(time.Millisecond), medianF(per[i])/medianF(per[0]), sizes[0])
	}
	b.ReportMetric(medianF(per[len(sizes)-1])/medianF(per[0]), "x-largest-vs-smallest")
}

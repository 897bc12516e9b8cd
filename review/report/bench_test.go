package report_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
	"github.com/skillpilot/skillpilot/review"
	"github.com/skillpilot/skillpilot/review/report"
)

// writeSession writes a finished session of n commands as a runner would
// leave it: result/, archive/ and log/meta.log (outputs are not read by a
// report). Commands run 10 ms each, queued in batches of 1,000.
func writeSession(tb testing.TB, dir string, n int) {
	tb.Helper()
	for _, d := range []string{protocol.DirResult, protocol.DirArchive, protocol.DirLog, protocol.DirState} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			tb.Fatal(err)
		}
	}
	meta, err := os.Create(filepath.Join(dir, protocol.FileMeta))
	if err != nil {
		tb.Fatal(err)
	}
	mw := bufio.NewWriter(meta)
	enc := json.NewEncoder(mw)
	enc.Encode(protocol.Event{TS: protocol.Time{Time: t0}, Event: protocol.EvRunnerStart, Detail: map[string]any{"session_id": "s1"}})
	at := t0
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("%08d-0000-7000-8000-000000000000", i)
		name := protocol.CommandName(int64(i), id)
		submitted := t0.Add(time.Duration((i-1)/1000*1000) * 10 * time.Millisecond)
		start := at
		end := start.Add(10 * time.Millisecond)
		at = end
		cmd := protocol.Command{ProtocolVersion: 1, CmdID: id, Seq: int64(i), Kind: protocol.KindTcl,
			Payload: fmt.Sprintf("report_timing -max_paths %d -nworst 1 > reports/timing_%d.rpt", i%50, i), SubmittedAt: protocol.Time{Time: submitted}}
		val := fmt.Sprint(i)
		rc := 0
		res := protocol.Result{ProtocolVersion: 1, CmdID: id, Seq: int64(i), Status: protocol.StatusOK, StartTS: protocol.Time{Time: start},
			EndTS: protocol.Time{Time: end}, ExitReason: protocol.ReasonMarkerSeen, ToolRC: &rc, Value: &val,
			OutputPath: "output/" + protocol.OutputName(name), Stats: protocol.Stats{Bytes: 1200, Lines: 20, DurationMS: 10},
			CommandPath: "archive/" + name, OutputSHA256: "00", PayloadSHA256: "00"}
		for _, f := range []struct {
			dir string
			v   any
		}{{protocol.DirArchive, cmd}, {protocol.DirResult, res}} {
			b, _ := json.MarshalIndent(f.v, "", "  ")
			if err := os.WriteFile(filepath.Join(dir, f.dir, name), b, 0o600); err != nil {
				tb.Fatal(err)
			}
		}
		enc.Encode(protocol.Event{TS: protocol.Time{Time: start}, Event: protocol.EvCmdBegin, CmdID: id, Seq: int64(i)})
		enc.Encode(protocol.Event{TS: protocol.Time{Time: end}, Event: protocol.EvCmdEnd, CmdID: id, Seq: int64(i), Status: protocol.StatusOK})
	}
	mw.Flush()
	meta.Close()
}

// BenchmarkReport measures `master report` on sessions of 10,000 and
// 100,000 commands read from disk: load, model, and the HTML page.
func BenchmarkReport(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			dir := filepath.Join(b.TempDir(), "s")
			writeSession(b, dir, n)
			b.ResetTimer()
			var size int64
			for i := 0; i < b.N; i++ {
				s, err := review.Load(dir, review.Options{})
				if err != nil {
					b.Fatal(err)
				}
				m := report.Build([]*review.Session{s}, report.Options{})
				cw := &countWriter{}
				if err := report.WriteHTML(cw, m); err != nil {
					b.Fatal(err)
				}
				size = cw.n
			}
			b.ReportMetric(float64(size), "page-bytes")
		})
	}
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

var _ io.Writer = (*countWriter)(nil)

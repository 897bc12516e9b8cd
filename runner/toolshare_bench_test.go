package runner

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
)

// shareTool is a tool the share benchmark drives on the runner's own PTY.
type shareTool struct {
	name    string
	kind    protocol.Kind
	argv    []string
	payload string              // a trivial command
	mark    func(string) string // the tool's command that prints a line
}

// BenchmarkToolShare measures, on each real shell and on tclsh, what the
// runner adds inside the tool to a trivial command: the line(s) it types
// for the command (the wrapped run: begin line, the payload, the done
// marker, then the fence) against the payload followed by the tool's own
// print of a marker, on the same PTY as the runner sets it up,
// alternating one of each. "share" is the difference of the medians: what
// the runner sends beyond the payload and waits for beyond the tool's
// answer (docs/benchmarks-log.md, "Real tools").
//
//	go test -run '^$' -bench ToolShare -benchtime 200x ./runner/
func BenchmarkToolShare(b *testing.B) {
	tcl := func(s string) string { return "puts " + s }
	tools := []shareTool{
		{"tclsh", protocol.KindTcl, []string{"tclsh"}, "puts hi", tcl},
		{"opensta", protocol.KindTcl, []string{"sta", "-no_splash"}, "puts hi", tcl},
		{"magic", protocol.KindTcl, []string{"magic", "-dnull", "-noconsole"}, "puts hi", tcl},
		{"yosys", "yosys", []string{"yosys"}, "log hi", func(s string) string { return "log " + s }},
		{"ngspice", "ngspice", []string{"ngspice"}, "echo hi", func(s string) string { return "echo " + s }},
	}
	for _, tl := range tools {
		b.Run(tl.name, func(b *testing.B) {
			if _, err := exec.LookPath(tl.argv[0]); err != nil {
				b.Skipf("%s is not installed", tl.argv[0])
			}
			var spec *DriverSpec
			if tl.kind != protocol.KindTcl {
				spec, _ = Preset(string(tl.kind))
			}
			drv := newDriver(Config{Kind: tl.kind, Driver: spec})
			life := newToolLife(nil)
			defer life.close()
			env := append(os.Environ(), "TERM=dumb", "LANG=C.UTF-8")
			if _, _, err := life.launch(termSpec{Argv: tl.argv, Env: env, Cols: defaultCols, Rows: defaultRows}, realClock{}); err != nil {
				b.Fatal(err)
			}
			defer life.reap()
			out := &lineWaiter{ch: life.output()}
			if bs := drv.bootstrap(); bs != "" {
				life.write([]byte(bs + "\n"))
			}
			// Ready: a print of a marker comes back (typed again until it
			// does: Magic drops what comes before its prompt).
			for i := 0; ; i++ {
				life.write([]byte(tl.mark(fmt.Sprintf("READY%d", i)) + "\n"))
				if out.wait([]byte(fmt.Sprintf("READY%d", i)), time.Second) {
					break
				}
				if i > 30 {
					b.Fatal("the tool never answered")
				}
				if bs := drv.bootstrap(); bs != "" {
					life.write([]byte(bs + "\n"))
				}
			}
			file := filepath.Join(b.TempDir(), "payload")
			if err := os.WriteFile(file, []byte(tl.payload), 0o600); err != nil {
				b.Fatal(err)
			}
			var plain, wrapped []time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				mk := fmt.Sprintf("MK%d", i)
				t0 := time.Now()
				life.write([]byte(tl.payload + "\n" + tl.mark(mk) + "\n"))
				if !out.wait([]byte(mk), 30*time.Second) {
					b.Fatal("no plain marker")
				}
				plain = append(plain, time.Since(t0))

				tok := fmt.Sprintf("tok%d", i)
				inline := ""
				if len(tl.payload) <= drv.inlineMax() {
					inline = tl.payload
				}
				if inline == "" {
					if err := os.WriteFile(file, []byte(drv.payloadFile(tl.payload, tok)), 0o600); err != nil {
						b.Fatal(err)
					}
				}
				t0 = time.Now()
				life.write([]byte(drv.run(file, inline, protocol.DefaultMarkerPrefix, tok, "", true) + "\n"))
				if !out.wait([]byte(protocol.DefaultMarkerPrefix+" "+tok+" "), 30*time.Second) {
					b.Fatal("no done marker")
				}
				if f := drv.fence(tok); f != "" {
					life.write([]byte(f + "\n"))
				}
				wrapped = append(wrapped, time.Since(t0))
			}
			b.StopTimer()
			p, w := median(plain), median(wrapped)
			b.ReportMetric(float64(p.Microseconds()), "plain-p50-µs")
			b.ReportMetric(float64(w.Microseconds()), "wrapped-p50-µs")
			b.ReportMetric(float64((w - p).Microseconds()), "share-µs")
		})
	}
}

func median(d []time.Duration) time.Duration {
	c := append([]time.Duration(nil), d...)
	sort.Slice(c, func(i, j int) bool { return c[i] < c[j] })
	return c[len(c)/2]
}

// lineWaiter reads a tool's output until a line holds a mark.
type lineWaiter struct {
	ch  <-chan chunk
	buf []byte
}

func (w *lineWaiter) wait(mark []byte, d time.Duration) bool {
	timeout := time.After(d)
	for {
		if i := bytes.Index(w.buf, mark); i >= 0 {
			if j := bytes.IndexByte(w.buf[i:], '\n'); j >= 0 {
				w.buf = append(w.buf[:0], w.buf[i+j+1:]...)
				return true
			}
		}
		select {
		case c, ok := <-w.ch:
			if !ok {
				return false
			}
			w.buf = append(w.buf, (*c.buf)[:c.n]...)
			c.release()
		case <-timeout:
			return false
		}
	}
}

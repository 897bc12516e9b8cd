package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/fsq"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
)

func masterSession(b *testing.B) *master.Session {
	dir := benchDir(b)
	for _, d := range protocol.Dirs {
		os.MkdirAll(filepath.Join(dir, d), 0o700)
	}
	s, err := master.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkMasterSubmit: the cost of Submit alone (seq reservation plus an
// atomic command write), no runner.
func BenchmarkMasterSubmit(b *testing.B) {
	s := masterSession(b)
	ctx := context.Background()
	n := pick(100, 3000)
	var per time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		for j := 0; j < n; j++ {
			if _, err := s.Submit(ctx, "puts hi", master.SubmitOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		per = time.Since(t0) / time.Duration(n)
	}
	b.ReportMetric(us(per), "µs/submit")
	report("Submit alone: %.0f µs", us(per))
}

// BenchmarkMasterWait: Wait on a command whose result is already there,
// and on one whose result appears 1 ms later.
func BenchmarkMasterWait(b *testing.B) {
	s := masterSession(b)
	ctx := context.Background()
	c, _ := s.Submit(ctx, "puts hi", master.SubmitOptions{})
	os.WriteFile(filepath.Join(s.Dir(), protocol.DirResult, c.Name), []byte(`{"cmd_id":"x","status":"ok"}`), 0o600)
	n := pick(100, 3000)
	var present, later time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		for j := 0; j < n; j++ {
			if _, err := c.Wait(ctx, master.WaitOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		present = time.Since(t0) / time.Duration(n)
		var lat sample
		for j := 0; j < pick(10, 100); j++ {
			c2, _ := s.Submit(ctx, "puts hi", master.SubmitOptions{})
			go func() {
				time.Sleep(time.Millisecond)
				if r, err := fsq.OpenRoot(s.Dir()); err == nil {
					r.WriteAtomic(protocol.DirResult+"/"+c2.Name, []byte(`{"cmd_id":"x","status":"ok"}`), 0o600, fsq.Volatile)
					r.Close()
				}
			}()
			t0 := time.Now()
			if _, err := c2.Wait(ctx, master.WaitOptions{}); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0)-time.Millisecond)
		}
		later = lat.pct(0.5)
	}
	b.ReportMetric(us(present), "µs/wait-present")
	b.ReportMetric(us(later), "µs/wait-notice")
	report("Wait, result present: %.0f µs; result appearing later: noticed %.0f µs after it appeared (p50)", us(present), us(later))
}

// BenchmarkMasterConcurrentSubmit: 4 submitters at once on one session.
func BenchmarkMasterConcurrentSubmit(b *testing.B) {
	s := masterSession(b)
	const workers = 4
	per := pick(50, 500)
	ctx := context.Background()
	var rate float64
	for n := 0; n < b.N; n++ {
		var wg sync.WaitGroup
		t0 := time.Now()
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < per; i++ {
					if _, err := s.Submit(ctx, "puts hi", master.SubmitOptions{}); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		rate = float64(workers*per) / time.Since(t0).Seconds()
	}
	b.ReportMetric(rate, "submits/s")
	report("%d concurrent submitters: %.0f submits/s in all", workers, rate)
	_ = fmt.Sprint
}

package bench

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
	"github.com/skillpilot/skillpilot/review"
)

// BenchmarkRetention: one session driven through 200,000 commands (5,000
// in the smoke) with retention on (issue 44): --keep-last 1000,
// --prune-grace 1s, --keep-ids 50000, --max-meta-bytes 16MiB. Commands are
// submitted through the Go master (seq/ reservations included) in
// batches of 500, each batch waited for before the next. At every tenth
// of the run it prints the session's file count and its disk use (the
// blocks of every file, so a spool with holes counts what it holds).
//
// It fails when the promises break, not on any timing: every command's
// result appears exactly once (inotify on result/ counts each name's
// creation), the runner counted every command (commands_done) and
// rejected or skipped none, a cmd_id pruned long ago (still in the index)
// is refused as a duplicate, master status says how many were kept and
// pruned, the report shows the kept commands, and the session check
// (exactly one result or index line per command, kept commands
// replayable) holds at the end. Flatness is the figure it prints.
func BenchmarkRetention(b *testing.B) {
	total, batch := pick(5000, 200_000), 500
	const keepLast, keepIDs = 1000, 50_000
	for n := 0; n < b.N; n++ {
		s := masterSession(b)
		dir := s.Dir()
		w, err := fsnotify.NewBufferedWatcher(1 << 16)
		if err != nil {
			b.Fatal(err)
		}
		if err := w.Add(filepath.Join(dir, protocol.DirResult)); err != nil {
			b.Fatal(err)
		}
		p := startRunner(b, dir, "--keep-last", fmt.Sprint(keepLast), "--prune-grace", "1s", "--keep-ids", fmt.Sprint(keepIDs),
			"--max-meta-bytes", "16MiB")
		created := map[string]int{}
		var names []string
		ctx := context.Background()
		payload := "puts [string repeat x 200]"
		type point struct {
			cmds  int
			files int
			bytes int64
			at    time.Duration
		}
		var points []point
		t0 := time.Now()
		for len(names) < total {
			var last string
			for i := 0; i < batch && len(names) < total; i++ {
				c, err := s.Submit(ctx, payload, master.SubmitOptions{})
				if err != nil {
					b.Fatal(err)
				}
				names = append(names, c.Name)
				last = c.Name
			}
			for created[last] == 0 {
				select {
				case ev := <-w.Events:
					if ev.Op&(fsnotify.Create|fsnotify.Rename) != 0 {
						created[filepath.Base(ev.Name)]++
					}
				case err := <-w.Errors:
					b.Fatalf("watch result/: %v", err)
				case <-time.After(2 * time.Minute):
					b.Fatalf("no result for %s", last)
				}
			}
			if len(names)%(total/10) == 0 {
				f, by := sessionUsage(b, dir)
				points = append(points, point{len(names), f, by, time.Since(t0)})
			}
		}
		elapsed := time.Since(t0)
		// Late events of the last batch, then the last pruning rounds.
		settle := time.After(3 * time.Second)
	drain:
		for {
			select {
			case ev := <-w.Events:
				if ev.Op&(fsnotify.Create|fsnotify.Rename) != 0 {
					created[filepath.Base(ev.Name)]++
				}
			case <-settle:
				break drain
			}
		}
		bad := 0
		for _, n := range names {
			if c := created[n]; c != 1 && bad < 5 {
				b.Errorf("%s: its result was created %d times", n, c)
				bad++
			}
		}
		// A cmd_id pruned long ago, still in the index, is refused.
		pick := names[0]
		if total > keepIDs {
			pick = names[len(names)-keepIDs/2]
		}
		_, early, _ := protocol.ParseCommandName(pick)
		dup, err := s.Run(ctx, "puts dup", master.SubmitOptions{CmdID: early})
		var re *master.ResultError
		if !errors.As(err, &re) || dup == nil || dup.Error == nil || dup.Error.Code != protocol.CodeDuplicateCmdID || dup.Error.Context["pruned"] != true {
			b.Errorf("a duplicate of a pruned cmd_id: %+v, %v", dup, err)
		}
		time.Sleep(2500 * time.Millisecond) // Its own prune round; the grace is 1 s.
		st, err := s.Status(ctx)
		if err != nil {
			b.Fatal(err)
		}
		kept := len(listNames(b, filepath.Join(dir, protocol.DirResult)))
		switch {
		case st.CommandsDone != int64(total): // The duplicate never ran.
			b.Errorf("status: commands_done %d, want %d", st.CommandsDone, total)
		case st.Retention == nil || st.Retention.Kept != kept || st.Retention.Pruned != int64(total+1-kept):
			b.Errorf("status: retention %+v, with %d results in result/", st.Retention, kept)
		case st.SkippedCount != 0 || st.RejectedCount != 1:
			b.Errorf("status: skipped %d, rejected %d (want the one duplicate)", st.SkippedCount, st.RejectedCount)
		}
		if h, err := review.Load(dir, review.Options{}); err != nil || len(h.Commands) != kept {
			b.Errorf("report: %v; %d commands shown, %d kept", err, len(h.Commands), kept)
		}
		files, bytes := sessionUsage(b, dir)
		p.End() // The session check: exactly once, replayable.
		// Flat: over the second half of the run, the largest figure
		// against the smallest.
		maxFiles, maxBytes, minFiles, minBytes := 0, int64(0), int(^uint(0)>>1), int64(1<<62)
		for _, pt := range points[len(points)/2:] {
			maxFiles, maxBytes = max(maxFiles, pt.files), max(maxBytes, pt.bytes)
			minFiles, minBytes = min(minFiles, pt.files), min(minBytes, pt.bytes)
		}
		report("retention, %d commands (keep-last %d, grace 1s, keep-ids %d, max-meta-bytes 16MiB), %.0f commands/s:",
			total, keepLast, keepIDs, float64(total)/elapsed.Seconds())
		report("  commands    files   disk MiB   elapsed")
		for _, pt := range points {
			report("  %8d %8d %10.1f %8.1fs", pt.cmds, pt.files, float64(pt.bytes)/(1<<20), pt.at.Seconds())
		}
		report("  at the end: %d files, %.1f MiB, %d results kept; over the second half, largest / smallest: files %.2f, disk %.2f",
			files, float64(bytes)/(1<<20), kept, float64(maxFiles)/float64(minFiles), float64(maxBytes)/float64(minBytes))
		b.ReportMetric(float64(total)/elapsed.Seconds(), "cmd/s")
		b.ReportMetric(float64(maxFiles), "files-max-2nd-half")
		b.ReportMetric(float64(maxBytes)/(1<<20), "MiB-max-2nd-half")
		b.ReportMetric(float64(maxFiles)/float64(minFiles), "files-max/min-2nd-half")
		b.ReportMetric(float64(maxBytes)/float64(minBytes), "disk-max/min-2nd-half")
	}
}

// sessionUsage counts the session's regular files and the bytes their
// blocks take on disk (st_blocks: a spool with holes counts what it holds).
func sessionUsage(b testing.TB, dir string) (files int, bytes int64) {
	b.Helper()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // Removed while walked.
			}
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		files++
		bytes += fi.Sys().(*syscall.Stat_t).Blocks * 512
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return files, bytes
}

func listNames(b testing.TB, dir string) []string {
	es, err := os.ReadDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	var out []string
	for _, e := range es {
		if !strings.HasPrefix(e.Name(), ".") {
			out = append(out, e.Name())
		}
	}
	return out
}

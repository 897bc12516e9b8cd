package runner

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/skillpilot/skillpilot/protocol"
)

// A small output rides in its result (output_inline), whose one fsync
// makes it durable; the output file itself is fsynced after the result
// appears, and a marker (inflight/.lag-<name>, made before the result)
// is removed only then. A runner killed in between (failpoint
// result_output_lagging) leaves the marker; had the machine crashed, the output file
// could have lost its bytes (here: truncated, removed, garbled, or replaced
// by a FIFO). The next runner rebuilds the file from the result's copy,
// with a warning event and recovery_summary's outputs_rebuilt, and keeps
// the result as it was.
func TestOutputRebuiltFromResultAfterCrash(t *testing.T) {
	t.Parallel()
	const want = "hello\nworld\n"
	for _, damage := range []string{"truncated", "removed", "garbled", "fifo", "intact", "marker lost"} {
		t.Run(damage, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "s")
			p := startBinary(t, failpointRunner(t), []string{"SP_FAILPOINT=result_output_lagging"}, "--session", dir, "--heartbeat", "100ms")
			a := writeCmd(t, dir, 1, "a", `puts hello; puts world`)
			if code := p.ExitCode(); code != -1 {
				t.Fatalf("the runner exited %d instead of dying at result_output_lagging\n%s", code, p.Log())
			}
			r := waitResultFile(t, dir, a)
			if string(r.OutputInline) != want || r.OutputSHA256 != sha256Hex(want) {
				t.Fatalf("the result carries %q (sha256 %s), want %q", r.OutputInline, r.OutputSHA256, want)
			}
			first, _ := os.ReadFile(filepath.Join(dir, protocol.DirResult, a))
			marker := filepath.Join(dir, lagMarker(a))
			if _, err := os.Lstat(marker); err != nil {
				t.Fatalf("no marker for an output not fsynced yet: %v", err)
			}
			out := filepath.Join(dir, protocol.DirOutput, protocol.OutputName(a))
			var err error
			switch damage {
			case "truncated":
				err = os.Truncate(out, 3)
			case "removed":
				err = os.Remove(out)
			case "garbled":
				err = os.WriteFile(out, []byte("HELLO\nWORLD\n"), 0o600)
			case "fifo":
				if err = os.Remove(out); err == nil {
					err = exec.Command("mkfifo", out).Run()
				}
			case "marker lost":
				// A host crash may keep the result's directory entry and
				// lose the marker's (neither directory is fsynced yet):
				// an unclean start checks the newest results anyway.
				if err = os.Truncate(out, 3); err == nil {
					err = os.Remove(marker)
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			p2 := startRunnerProc(t, "--session", dir, "--heartbeat", "100ms")
			if r := waitResultFile(t, dir, writeCmd(t, dir, 2, "after", "puts next")); r.Status != protocol.StatusOK {
				t.Fatalf("%+v", r)
			}
			if fi, err := os.Lstat(out); err != nil || !fi.Mode().IsRegular() {
				t.Fatalf("output file after recovery: %v, %v; want a regular file", fi, err) // Never read a FIFO (nor let invariants).
			} else if got, err := os.ReadFile(out); err != nil || string(got) != want {
				t.Errorf("output file after recovery: %q, %v; want %q", got, err, want)
			}
			if again, _ := os.ReadFile(filepath.Join(dir, protocol.DirResult, a)); !bytes.Equal(again, first) {
				t.Errorf("a's result changed:\n%s\n%s", first, again)
			}
			if _, err := os.Lstat(marker); err == nil {
				t.Error("the marker is still in inflight/")
			}
			rebuilt, summary := 0, map[string]any(nil)
			for _, e := range readEvents(t, dir) {
				if e.Event == protocol.EvWarning && e.Detail["output_rebuilt"] == rel(protocol.DirOutput, protocol.OutputName(a)) {
					rebuilt++
				}
				if e.Event == protocol.EvRecoverySummary {
					summary = e.Detail
				}
			}
			wantRebuilt := 1
			if damage == "intact" {
				wantRebuilt = 0
			}
			if rebuilt != wantRebuilt {
				t.Errorf("%d output_rebuilt warnings, want %d", rebuilt, wantRebuilt)
			}
			if n, _ := summary["outputs_rebuilt"].(float64); int(n) != wantRebuilt {
				t.Errorf("recovery_summary %v, want outputs_rebuilt %d", summary, wantRebuilt)
			}
			stopChecked(t, dir, p2)
		})
	}
}

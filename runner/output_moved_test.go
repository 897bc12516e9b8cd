package runner

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
)

// printSlowly prints lines 0..n-1, one per 100 ms.
func printSlowly(n int) (payload, want string) {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "line %d of the output\n", i)
	}
	return fmt.Sprintf(`for {set i 0} {$i < %d} {incr i} {puts "line $i of the output"; flush stdout; after 100}`, n), b.String()
}

// waitOutputStarted waits until the command's output file holds bytes.
func waitOutputStarted(h *harness, name string) {
	p := filepath.Join(h.dir, protocol.DirOutput, protocol.OutputName(name))
	h.waitFor("output in "+p, func() bool {
		fi, err := os.Stat(p)
		return err == nil && fi.Size() > 0
	})
}

// output/ moved away or deleted while a command prints:
// no output is lost. The runner notices that the file it writes is no
// longer the session's and rebuilds it in output/ from what it wrote; the
// result describes the file in the session, byte for byte.
func TestOutputMovedRebuilt(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"mv", "rm -rf"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t).start()
			h.result(h.submit("expr 1"))
			h.noCheck = true // Command 1's output goes with output/.
			payload, want := printSlowly(10)
			a := h.submit(payload)
			waitOutputStarted(h, a)
			out := filepath.Join(h.dir, protocol.DirOutput)
			if how == "mv" {
				must(t, os.Rename(out, filepath.Join(t.TempDir(), "moved")))
			} else {
				must(t, os.RemoveAll(out))
			}
			r := h.result(a)
			if r.Status != protocol.StatusOK {
				t.Fatalf("%+v %+v", r, r.Error)
			}
			b, err := os.ReadFile(filepath.Join(h.dir, r.OutputPath))
			if err != nil || string(b) != want {
				t.Fatalf("output in the session: %q %v, want %q", b, err, want)
			}
			sum := sha256.Sum256(b)
			if r.Stats.Bytes != int64(len(want)) || r.OutputSHA256 != hex.EncodeToString(sum[:]) {
				t.Errorf("result stats %+v sha %s", r.Stats, r.OutputSHA256)
			}
			if r := h.result(h.submit("puts after")); r.Status != protocol.StatusOK || h.output(h.submitted[len(h.submitted)-1]) != "after\n" {
				t.Errorf("the next command: %+v", r)
			}
		})
	}
}

// output/ moved out of the session while a command prints: the runner
// stops writing to the moved file at the next heartbeat, rebuilds the file
// in output/ and writes there from then on (it appended to the
// moved file through its descriptor until the command ended). The command
// prints until the test says stop, so the heartbeat comes whatever the
// load; the moved file does not grow after the warning event.
func TestOutputMovedNotWrittenOutside(t *testing.T) {
	t.Parallel()
	h := newHarness(t).start()
	h.result(h.submit("expr 1"))
	h.noCheck = true // Command 1's output goes with output/.
	flag := filepath.Join(t.TempDir(), "stop")
	a := h.submit(fmt.Sprintf(`set n 0; while {![file exists {%s}]} {puts "line [incr n]"; flush stdout; after 20}; puts done`, flag))
	waitOutputStarted(h, a)
	moved := filepath.Join(t.TempDir(), "moved")
	must(t, os.Rename(filepath.Join(h.dir, protocol.DirOutput), moved))
	h.waitFor("the output_rebuilt warning of a running command", func() bool {
		for _, e := range h.events() {
			if e.Event == protocol.EvWarning && e.CmdID != "" && e.Detail["output_rebuilt"] != nil &&
				strings.Contains(fmt.Sprint(e.Detail["why"]), "from now on") {
				return true
			}
		}
		return false
	})
	fi, err := os.Stat(filepath.Join(moved, protocol.OutputName(a)))
	if err != nil {
		t.Fatal(err)
	}
	must(t, os.WriteFile(flag, nil, 0o600))
	r := h.result(a)
	if r.Status != protocol.StatusOK {
		t.Fatalf("%+v %+v", r, r.Error)
	}
	if after, err := os.Stat(filepath.Join(moved, protocol.OutputName(a))); err != nil || after.Size() != fi.Size() {
		t.Errorf("the moved file grew after the warning: %d bytes then, %v now (%v)", fi.Size(), after, err)
	}
	b, err := os.ReadFile(filepath.Join(h.dir, r.OutputPath))
	if err != nil || !strings.HasPrefix(string(b), "line 1\nline 2\n") || !strings.HasSuffix(string(b), "done\n") ||
		int64(len(b)) != r.Stats.Bytes || int64(len(b)) <= fi.Size() {
		t.Fatalf("output in the session: %d bytes (%v), result %d, moved %d", len(b), err, r.Stats.Bytes, fi.Size())
	}
}

// When the output cannot be put back (output/ moved away together with
// archive/: two directories lost at once are not made again), the result
// says plainly that it is gone: an io_error naming the file and the bytes
// printed, never "ok" with bytes the session does not have. On the fake
// tool and clock: the command waits for input while the two directories
// go, and with the clock still no heartbeat's look at the layout falls
// between the two (it would rightly make the first one again).
func TestOutputMovedGoneSaysSo(t *testing.T) {
	t.Parallel()
	h := newFakeHarness(t, nil).start()
	h.result(h.submit("value 1"))
	h.noCheck = true
	a := h.submit("print line 0 of the output\ngets\nprint line 2 of the output")
	want := "line 0 of the output\ngot go on\nline 2 of the output\n"
	waitEvent(t, h.waitTool(1), "gets")
	p := filepath.Join(h.dir, protocol.DirOutput, protocol.OutputName(a))
	h.advanceUntil("output in "+p, 10*time.Millisecond, func() bool { // Written within flushDelay, on the runner's clock.
		fi, err := os.Stat(p)
		return err == nil && fi.Size() > 0
	})
	out := filepath.Join(h.dir, protocol.DirOutput)
	must(t, os.Rename(out, filepath.Join(t.TempDir(), "moved")))
	must(t, os.RemoveAll(filepath.Join(h.dir, protocol.DirArchive)))
	h.send(1, "c2", "go on\n", nil)
	r := h.result(a)
	if r.Status != protocol.StatusError || r.Error == nil || r.Error.Code != protocol.CodeIO ||
		!strings.Contains(r.Error.Message, protocol.OutputName(a)) || !strings.Contains(r.Error.Message, fmt.Sprint(len(want))) {
		t.Fatalf("result %+v %+v, want io_error saying the output is gone", r, r.Error)
	}
	if r.Stats.Bytes != 0 {
		t.Errorf("the result claims %d bytes the session does not hold", r.Stats.Bytes)
	}
	must(t, os.Mkdir(filepath.Join(h.dir, protocol.DirArchive), 0o700))
	h.advanceUntil("usable again", 100*time.Millisecond, func() bool { return h.state().Phase == protocol.PhaseIdle })
}

package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/skillpilot/skillpilot/internal/testrunner"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
)

// markerLookalikes are payloads whose output looks like the runner's
// markers, and trailing carriage returns: all of it is output (PROTOCOL.md
// 6.2 item 4, 6.3), and the clean view keeps it.
var markerLookalikes = []string{
	`puts "__SP_DONE__ other rc=0"; puts "  __SP_DONE__ [set ::x] rc=0"; puts "\t__SP_DONE__ [set ::x] rc=0"; puts after`,
	`puts "__SP_BEGIN__ y"; puts "inside y"; puts "__SP_DONE__ y rc=0 v= vt=0"; puts end`,
	`puts -nonewline "abc\r"`,
	`puts "two\r"; puts -nonewline "cr-at-end\r\r"`,
	`puts "__SP_DONE__ sync-abcdefgh-1 rc=0"; puts -nonewline "__SP_BEGIN__ z"`,
	`puts plain`,
}

// TestTailCleanIsTheOutputFiles: master tail --clean over a session whose
// commands printed marker look-alikes and trailing \r prints exactly the
// concatenation of their output files, byte for byte.
func TestTailCleanIsTheOutputFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s")
	testrunner.Start(t, dir)
	ctx := context.Background()
	if _, err := master.WaitReady(ctx, dir, master.WaitOptions{}); err != nil {
		t.Fatal(err)
	}
	s, err := master.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	for i, p := range markerLookalikes {
		cmd, err := s.Submit(ctx, fmt.Sprintf("set ::x c%d; ", i)+p, master.SubmitOptions{CmdID: fmt.Sprintf("c%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cmd.Wait(ctx, master.WaitOptions{}); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, protocol.DirOutput, protocol.OutputName(cmd.Name)))
		if err != nil {
			t.Fatal(err)
		}
		want.Write(b)
	}
	// A command cancelled mid-line (plain tclsh dies on Ctrl-C and is
	// restarted): its output ends where its cmd_end says.
	cut, err := s.Submit(ctx, `puts -nonewline "__SP_DONE__ x rc=0\npartial\r"; flush stdout; after 60000`, master.SubmitOptions{CmdID: "cut"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.WaitFor(ctx, regexp.MustCompile("partial"), cut.ResumeCursor); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Cancel(ctx, cut.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := cut.Wait(ctx, master.WaitOptions{}); !errors.Is(err, master.ErrCancelled) {
		t.Fatalf("cancelled command: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, protocol.DirOutput, protocol.OutputName(cut.Name)))
	if err != nil {
		t.Fatal(err)
	}
	want.Write(b)
	after, err := s.Submit(ctx, "puts after-the-restart", master.SubmitOptions{CmdID: "after"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := after.Wait(ctx, master.WaitOptions{}); err != nil {
		t.Fatal(err)
	}
	want.WriteString("after-the-restart\n")
	var out, errb bytes.Buffer
	if rc := Main([]string{"tail", "--clean", "--session", dir}, strings.NewReader(""), &out, &errb); rc != 0 {
		t.Fatalf("rc %d: %s", rc, errb.String())
	}
	if out.String() != want.String() {
		t.Errorf("tail --clean printed\n%q\nthe output files hold\n%q", out.String(), want.String())
	}
	// Fed in chunks of any size, the clean view is the same.
	spool, err := os.ReadFile(filepath.Join(dir, protocol.FileSpool))
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []int{1, 2, 3, 7, 64} {
		var got bytes.Buffer
		cw := &cleanWriter{w: &got, ends: &cmdEnds{path: filepath.Join(dir, protocol.FileMeta)}}
		for i := 0; i < len(spool); i += step {
			cw.Write(spool[i:min(i+step, len(spool))])
		}
		if got.String() != want.String() {
			t.Errorf("chunks of %d: %q", step, got.String())
		}
	}
}

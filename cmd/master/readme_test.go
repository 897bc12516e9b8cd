package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/internal/testenv"
)

// readmeBlocks returns the shell blocks README.md marks as tested.
func readmeBlocks(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?s)<!-- tested: cmd/master/readme_test.go runs this block -->\n```sh\n(.*?)```")
	var blocks []string
	for _, m := range re.FindAllStringSubmatch(string(b), -1) {
		blocks = append(blocks, m[1])
	}
	if len(blocks) != 3 {
		t.Fatalf("README.md has %d tested blocks, want 3 (first steps, answering a prompt, hand-written client)", len(blocks))
	}
	return blocks
}

// binDir builds runner and master into a directory for PATH, as `make
// install` would put them there.
func binDir(t *testing.T) string {
	t.Helper()
	bin := t.TempDir()
	for name, pkg := range map[string]string{"runner": testenv.Runner, "master": testenv.Master} {
		if err := os.Symlink(testenv.BuildBinary(t, pkg), filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	return bin
}

func bash(t *testing.T, bin, script string) string {
	t.Helper()
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-done:
		case <-time.After(5 * time.Minute): // Anti-hang guard, not a timing assertion.
			cmd.Process.Kill()
		}
	}()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s\n--- script:\n%s", err, out, script)
	}
	return string(out)
}

// README's first steps read true on a machine with only Go and tclsh: the
// block runs as written (its session directory moved into the test's).
func TestReadmeFirstSteps(t *testing.T) {
	testenv.Slow(t, "the README's first steps, end to end")
	bin := binDir(t)
	sess := filepath.Join(t.TempDir(), "sp-first")
	script := strings.ReplaceAll(readmeBlocks(t)[0], "/tmp/sp-first", sess)
	out := bash(t, bin, script+"\nwait\n")
	if !strings.Contains(out, "hello\n42\n") || !regexp.MustCompile(`(?m)^phase +idle$`).MatchString(out) {
		t.Fatalf("first steps printed:\n%s", out)
	}
}

// README's hand-written client (no master) works against a runner, twice
// in a row: its cmd_ids are unique, so the second run is not answered from
// the first's result.
func TestReadmeHandWrittenClient(t *testing.T) {
	bin := binDir(t)
	sess := filepath.Join(t.TempDir(), "sp")
	script := strings.Replace(readmeBlocks(t)[2], "sp=/proj/run1/sp", "sp="+sess, 1)
	runner := exec.Command(filepath.Join(bin, "runner"), "--session", sess, "--heartbeat", "100ms")
	if err := runner.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		exec.Command(filepath.Join(bin, "master"), "stop", "--session", sess, "--force", "--wait").Run()
		runner.Wait()
	}()
	if out, err := exec.Command(filepath.Join(bin, "master"), "ready", "--session", sess).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for i := 0; i < 2; i++ {
		if out := bash(t, bin, script); out != "hi\n" {
			t.Fatalf("run %d printed %q", i, out)
		}
	}
	results, _ := filepath.Glob(filepath.Join(sess, "result", "cmd_*_step1-*.json"))
	if len(results) != 2 {
		t.Fatalf("results %v", results)
	}
}

// README's prompt-answering example runs as written: send --expect answers
// the prompt, the command's output shows the answer, and a send to the
// finished command exits 7.
func TestReadmeAnswerPrompt(t *testing.T) {
	bin := binDir(t)
	sess := filepath.Join(t.TempDir(), "sp-ask")
	script := strings.ReplaceAll(readmeBlocks(t)[1], "/tmp/sp-ask", sess)
	out := bash(t, bin, script+"\nwait\n")
	for _, want := range []string{"delivered: 2 bytes", "File top.v exists. Overwrite? (y/n) answer: y\n", "exit 7: "} {
		if !strings.Contains(out, want) {
			t.Fatalf("the example printed (no %q):\n%s", want, out)
		}
	}
}

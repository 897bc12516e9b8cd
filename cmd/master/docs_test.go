package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/skillpilot/skillpilot/internal/doctest"
	"github.com/skillpilot/skillpilot/internal/testenv"
)

// The code blocks of README.md and docs/*.md that need only tclsh, bash,
// python3 and the built binaries, run as written (internal/doctest moves
// their /tmp/ and /proj/ paths into the test's directories). Each test
// names its blocks; TestDocsBlocksMarked (internal/doctest) checks that
// every block is run by a test or says why not.

// README's first block is what a fresh machine runs: make demo works, and
// CI (.ci/run) runs the test command it names.
func TestDocsReadmeCommands(t *testing.T) {
	b := doctest.Get(t, "readme-commands")
	for _, w := range []string{"make demo ", "make test "} {
		if !strings.Contains(b.Text, w) {
			t.Fatalf("README's first block has no %q:\n%s", w, b.Text)
		}
	}
	root, err := doctest.Root()
	if err != nil {
		t.Fatal(err)
	}
	ci, err := os.ReadFile(filepath.Join(root, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^make test$`).Match(ci) {
		t.Fatalf(".ci/run does not run README's test command (make test)")
	}
	testenv.Slow(t, "make demo builds the binaries")
	testenv.NeedTool(t, "make", "make")
	out, err := exec.Command("make", "-C", root, "demo", "BIN="+t.TempDir()).CombinedOutput()
	if err != nil {
		t.Fatalf("make demo: %v\n%s", err, out)
	}
}

// README's install, from the source tree, into a $HOME of the test's (and
// a build directory of its own, so that the tree's bin/ is left alone).
func TestDocsReadmeInstall(t *testing.T) {
	testenv.Slow(t, "make install builds the binaries")
	testenv.NeedTool(t, "make", "make")
	e := doctest.NewEnv(t)
	e.Dir = e.Repo
	home := t.TempDir()
	b := doctest.Get(t, "readme-install")
	// A new HOME would also move Go's caches: keep the ones the tests use.
	goenv, err := exec.Command("go", "env", "GOCACHE", "GOMODCACHE", "GOPATH").Output()
	if err != nil {
		t.Fatal(err)
	}
	vars := []string{"HOME=" + home, "MAKEFLAGS=BIN=" + t.TempDir()}
	for i, name := range []string{"GOCACHE", "GOMODCACHE", "GOPATH"} {
		vars = append(vars, name+"="+strings.Split(string(goenv), "\n")[i])
	}
	e.Bash(b, vars...)
	for _, f := range []string{"bin/runner", "bin/master", "bin/master-history", "bin/master-mcp", "share/skillpilot/python/skillpilot/__init__.py",
		"share/skillpilot/tcl/skillpilot/pkgIndex.tcl", "share/man/man1/master.1", "share/doc/skillpilot/docs/python.md"} {
		if _, err := os.Stat(filepath.Join(home, ".local", f)); err != nil {
			t.Errorf("README's install did not install %s: %v", f, err)
		}
	}
}

func TestDocsReadmeFirstSteps(t *testing.T) {
	e := doctest.NewEnv(t)
	b := doctest.Get(t, "first-steps")
	out := e.Bash(b)
	if !strings.Contains(out, "hello\n42\n") || !regexp.MustCompile(`(?m)^phase +idle$`).MatchString(out) {
		t.Fatalf("first steps printed:\n%s", out)
	}
}

func TestDocsReadmePool(t *testing.T) {
	testenv.Slow(t, "a local pool")
	e := doctest.NewEnv(t)
	b := doctest.Get(t, "readme-pool")
	out := e.Bash(b)
	b.Want(t, out, "42\n", "ss\n", "stop_request")
}

// docs/first-session.md, in order, on one session.
func TestDocsFirstSession(t *testing.T) {
	testenv.Slow(t, "a tutorial's session, end to end")
	e := doctest.NewEnv(t)
	sess := "SP_SESSION_DIR=" + e.Path("/tmp/sp-tour")
	b := doctest.Get(t, "tour-start")
	b.Want(t, e.Bash(b), "loaded counter\n", "COUNTER\n", "2\n", `"status": "ok"`)
	b = doctest.Get(t, "tour-errors")
	b.Want(t, e.Bash(b, sess), "exit 1\n", "exit 3\n", "no such cell: U42", "0\n")
	b = doctest.Get(t, "tour-cancel")
	b.Want(t, e.Bash(b, sess), " sleeping\n", "running ", "cancelled_running: ", "exit 4\n")
	b = doctest.Get(t, "tour-stop")
	out := e.Bash(b, sess)
	b.Want(t, out, "started\nfinished\n", "stopped", "exit 5\n")
	if strings.Contains(out, "second\n") || !regexp.MustCompile(`(?m)^cmd_\d+_[-0-9a-f]+\.json$`).MatchString(out) {
		t.Fatalf("the queued command ran, or is not listed in queue/:\n%s", out)
	}
}

// docs/first-session.md's prompt answered with master send: the command's
// output shows the answer, and a send to the finished command exits 7.
func TestDocsAnswerPrompt(t *testing.T) {
	e := doctest.NewEnv(t)
	b := doctest.Get(t, "answer-prompt")
	b.Want(t, e.Bash(b), "delivered: 2 bytes", "File top.v exists. Overwrite? (y/n) answer: y\n", "exit 7: ")
}

// docs/drivers.md: a shell session (kind sh).
func TestDocsKindSh(t *testing.T) {
	testenv.NeedTool(t, "bash", "bash")
	e := doctest.NewEnv(t)
	b := doctest.Get(t, "kind-sh")
	out := e.Bash(b)
	if strings.Count(out, "/tmp\n") != 2 || !strings.Contains(out, "exit 1\n") {
		t.Fatalf("%s printed:\n%s", b.Where(), out)
	}
}

// docs/shell.md: the master CLI in a script, then a wait with no runner
// and withdraw.
func TestDocsShellScript(t *testing.T) {
	testenv.Slow(t, "a scripted session, end to end")
	e := doctest.NewEnv(t)
	b := doctest.Get(t, "shell-script")
	b.Want(t, e.Bash(b), "slack 0.220\n", "placed\n", "exit 7\n", "routed\n", "stopped")
	b = doctest.Get(t, "shell-withdraw")
	out := e.Bash(b, "SP_SESSION_DIR="+e.Path("/tmp/sp-script"))
	b.Want(t, out, "exit 5\n", "withdrawn: ", "exit 7\n", "stays queued")
	if strings.Contains(out, "later\n") {
		t.Fatalf("the withdrawn command ran:\n%s", out)
	}
}

// docs/shell.md's hand-written client (no master) works against a runner,
// twice in a row: its cmd_ids are unique, so the second run is not
// answered from the first's result. Then its mailbox cancel.
func TestDocsHandWrittenClient(t *testing.T) {
	e := doctest.NewEnv(t)
	sess := e.Path("/proj/run1/sp")
	if err := os.MkdirAll(filepath.Dir(sess), 0o755); err != nil {
		t.Fatal(err)
	}
	testenv.StartRunner(t, testenv.RunnerOptions{Dir: sess})
	b := doctest.Get(t, "hand-written-client")
	for i := 0; i < 2; i++ {
		if out := e.Bash(b); out != "hi\n" {
			t.Fatalf("run %d printed %q", i, out)
		}
	}
	results, _ := filepath.Glob(filepath.Join(sess, "result", "cmd_*_step1-*.json"))
	if len(results) != 2 {
		t.Fatalf("results %v", results)
	}
	// The mailbox block continues the script: sp set, $id a running command.
	mb := doctest.Get(t, "mailbox-cancel")
	mb.Text = "sp=/proj/run1/sp\nid=$(master submit --session $sp 'after 60000')\n" + mb.Text
	mb.Want(t, e.Bash(mb), `"outcome": "cancelled_`)
}

// docs/python.md, against a runner on /proj/run1/sp and a local pool on
// /proj/sta/pool.
func TestDocsPython(t *testing.T) {
	testenv.Slow(t, "the Python master, end to end")
	py := testenv.NeedTool(t, "python3", "python3")
	e := doctest.NewEnv(t)
	sess := e.Path("/proj/run1/sp")
	if err := os.MkdirAll(filepath.Dir(sess), 0o755); err != nil {
		t.Fatal(err)
	}
	testenv.StartRunner(t, testenv.RunnerOptions{Dir: sess})
	b := doctest.Get(t, "python-cli")
	b.Want(t, e.Bash(b), "hi\n", "skillpilot-master (SkillPilot) ", "protocol version 1")
	b = doctest.Get(t, "python-session")
	out := e.Run(b, []string{py, "FILE"})
	b.Want(t, out, "42 hello\n", "1 no such cell: U42\n", "True\n", "cancelled, exit 4\n", "Slack 0.22 True\n")
	if !regexp.MustCompile(`(?m)^cancelled_(running|queued)$`).MatchString(out) {
		t.Fatalf("no cancel outcome:\n%s", out)
	}
	startPool(t, e, "/proj/sta/pool")
	b = doctest.Get(t, "python-pool")
	if out := e.Run(b, []string{py, "FILE"}); !regexp.MustCompile(`(?m)^ok 1 s0[01]$`).MatchString(out) {
		t.Fatalf("%s printed:\n%s", b.Where(), out)
	}
}

// docs/tcl.md, as docs/python.md.
func TestDocsTcl(t *testing.T) {
	testenv.Slow(t, "the Tcl master, end to end")
	tclsh := testenv.NeedTool(t, "tclsh", "tcl")
	e := doctest.NewEnv(t)
	sess := e.Path("/proj/run1/sp")
	if err := os.MkdirAll(filepath.Dir(sess), 0o755); err != nil {
		t.Fatal(err)
	}
	testenv.StartRunner(t, testenv.RunnerOptions{Dir: sess})
	b := doctest.Get(t, "tcl-session")
	b.Want(t, e.Run(b, []string{tclsh, "FILE"}), "ok 42\n", "hello\n", "no such cell: U42: exit 1\n", "1\ncancelled_", "Slack 0.22\n")
	startPool(t, e, "/proj/sta/pool")
	b = doctest.Get(t, "tcl-pool")
	b.Want(t, e.Run(b, []string{tclsh, "FILE"}), "ok ss\n")
}

// startPool starts a local pool of two on the document's path dir and
// stops it when the test ends.
func startPool(t *testing.T, e *doctest.Env, dir string) {
	t.Helper()
	p := e.Path(dir)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	// The block's text is the document's path: Bash moves it as it moves a document's.
	start := doctest.Block{File: "(setup)", Name: "pool", Text: "master pool start --pool " + dir + " --size 2 --via local\n"}
	e.Bash(start)
	t.Cleanup(func() {
		_ = exec.Command(filepath.Join(e.Bin, "master"), "pool", "stop", "--pool", p, "--force").Run()
	})
}

// docs/go.md's program, built in a module of its own that requires this
// one (as a flow's module would), and run.
func TestDocsGo(t *testing.T) {
	testenv.Slow(t, "builds a program")
	e := doctest.NewEnv(t)
	sess := e.Path("/proj/run1/sp")
	if err := os.MkdirAll(filepath.Dir(sess), 0o755); err != nil {
		t.Fatal(err)
	}
	testenv.StartRunner(t, testenv.RunnerOptions{Dir: sess})
	b := doctest.Get(t, "go-session")
	mod := t.TempDir()
	gomod := "module example.com/flow\n\ngo 1.26.8\n\nrequire github.com/skillpilot/skillpilot v0.0.0\n\nreplace github.com/skillpilot/skillpilot => " + e.Repo + "\n"
	sum, err := os.ReadFile(filepath.Join(e.Repo, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{"go.mod": gomod, "go.sum": string(sum), "main.go": e.Rebase(b.Text)} {
		if err := os.WriteFile(filepath.Join(mod, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "run", ".")
	cmd.Dir = mod
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: go run: %v\n%s", b.Where(), err, out)
	}
	b.Want(t, string(out), "42\n", "failed: ", "no such cell: U42", "cancelled_running\n", "cancelled\n", "stopped\n")
}

// docs/farms.md: a launched session, a local pool that grows and
// shrinks, and the Grid Engine pool with --via local (test/farm/docs_test.go
// runs it on Grid Engine).
func TestDocsFarms(t *testing.T) {
	testenv.Slow(t, "launches and pools")
	e := doctest.NewEnv(t)
	b := doctest.Get(t, "launch-local")
	b.Want(t, e.Bash(b), "local ", "hi\n", "(local) running", "stopped (stop_request)")
	b = doctest.Get(t, "pool-local")
	out := e.Bash(b)
	b.Want(t, out, "retired s02", "s02      retired")
	b = doctest.Get(t, "pool-sge")
	if !strings.Contains(b.Text, "--via sge") {
		t.Fatalf("%s: no --via sge", b.Where())
	}
	b.Text = strings.ReplaceAll(b.Text, "--via sge", "--via local")
	b.Want(t, e.Bash(b), "ff\n", "4 sessions, 4 serving", "stop_request")
}

// docs/reading.md: a stand-in replays a recorded flow on plain tclsh, diff
// finds the runs the same, and report draws them.
func TestDocsReading(t *testing.T) {
	testenv.Slow(t, "two recorded runs, a stand-in, reports")
	e := doctest.NewEnv(t)
	b := doctest.Get(t, "standin-flow")
	out := e.Bash(b)
	b.Want(t, out, "slack 0.220 (MET)", "the runs agree: 2 commands matched, 2 the same")
	if strings.Count(out, "Startpoint: rst") != 2 {
		t.Fatalf("the flow did not run twice:\n%s", out)
	}
	e.Bash(doctest.Block{File: "(setup)", Text: "master pool start --pool /tmp/sp-farm --size 1 --via local\nmaster pool submit --pool /tmp/sp-farm --wait 'expr 1'\nmaster pool stop --pool /tmp/sp-farm\n"})
	b = doctest.Get(t, "report")
	b.Want(t, e.Bash(b), `"commands": 2`)
	for _, f := range []string{"golden.html", "t.svg", "golden.json", "farm.html"} {
		if fi, err := os.Stat(e.Path("/tmp/" + f)); err != nil || fi.Size() == 0 {
			t.Errorf("report wrote no %s: %v", f, err)
		}
	}
}

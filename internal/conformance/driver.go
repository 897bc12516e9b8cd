package conformance

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/internal/testenv"
	"github.com/skillpilot/skillpilot/protocol"
)

// Env says where the runner and the masters run. On one host RunnerRoot
// and MasterRoot are the same directory; over NFS they are two clients'
// mounts of one export and MasterPrefix puts the masters on "another host".
type Env struct {
	Repo         string   // repository root (clients/python, clients/tcl, conformance/)
	Bin          string   // directory holding the runner and master executables
	Self         string   // executable that runs the Go and CLI adapters (a test binary calling Main)
	RunnerRoot   string   // where sessions are made, as the runner sees it
	MasterRoot   string   // the same directory as the masters see it ("": RunnerRoot)
	MasterPrefix []string // command prefix of every master process
	RunnerPrefix []string // command prefix of every runner process
	RunnerFlags  []string // flags of every runner (default: --heartbeat 500ms)
	Masters      []string // masters to run (default: Masters)
	Scenarios    string   // scenario directory (default: Repo/internal/conformance/scenarios)
	// Tool, if set, is the argv every runner drives (after "--"): a real
	// EDA shell instead of tclsh.
	Tool []string
	// Only, if set, names the scenarios to run (file names without .txtar).
	Only []string
	// ParallelScenarios runs a master's scenarios in parallel too, not
	// only the masters: on this host, where they mostly wait. Not in a
	// user-mode Linux guest (NFS), where two shell-master scenarios at once
	// made every fork-heavy step take 10-30 s and a 3 s lease lapse.
	ParallelScenarios bool
}

// stepLimit bounds every wait of the driver: a master step's outcome, a
// runner's start or exit, a file or event to appear. It only turns a hang
// into a failure; no check depends on how fast anything is.
const stepLimit = 3 * time.Minute

// Run runs every scenario with every master, each pair on a new session
// with its own runner. Masters run in parallel subtests, and so do
// scenarios when e.ParallelScenarios (as many at a time as -test.parallel
// says).
func Run(t *testing.T, e Env) {
	if e.MasterRoot == "" {
		e.MasterRoot = e.RunnerRoot
	}
	if e.RunnerFlags == nil {
		e.RunnerFlags = []string{"--heartbeat", "500ms"}
	}
	if e.Masters == nil {
		e.Masters = Masters
	}
	if e.Scenarios == "" {
		e.Scenarios = filepath.Join(e.Repo, "internal", "conformance", "scenarios")
	}
	// Masters run under umask 022, the usual default, so that a mode the
	// umask narrows (a create without the chmod §19.1 asks for) shows.
	syscall.Umask(0o022)
	scenarios, err := LoadScenarios(e.Scenarios)
	if err != nil {
		t.Fatal(err)
	}
	if e.Only != nil {
		var keep []Scenario
		for _, sc := range scenarios {
			if slices.Contains(e.Only, sc.Name) {
				keep = append(keep, sc)
			}
		}
		if len(keep) != len(e.Only) {
			t.Fatalf("only %d of the scenarios %v are in %s", len(keep), e.Only, e.Scenarios)
		}
		scenarios = keep
	}
	if len(scenarios) == 0 {
		t.Fatalf("no scenarios in %s", e.Scenarios)
	}
	help, _ := exec.Command(filepath.Join(e.Bin, "runner"), "--help").CombinedOutput()
	for _, m := range e.Masters {
		t.Run(m, func(t *testing.T) {
			t.Parallel()
			for _, sc := range scenarios {
				if sc.Masters != nil && !slices.Contains(sc.Masters, m) {
					continue // Not this master's (the scenario's "masters:" line says whose).
				}
				t.Run(sc.Name, func(t *testing.T) {
					if e.ParallelScenarios {
						t.Parallel() // Each scenario has its own session, runner and adapter.
					}
					for _, flag := range sc.Requires {
						if !bytes.Contains(help, []byte(strings.TrimLeft(flag, "-")+" ")) {
							need(t, "the runner has no "+flag+" (another slice brings it)")
						}
					}
					runScenario(t, &e, m, sc)
				})
			}
		})
	}
}

// need fails under CI and skips elsewhere, saying what is missing.
func need(t *testing.T, what string) {
	t.Helper()
	testenv.Unavailable(t, "%s", what)
}

// driver runs one scenario with one master.
type driver struct {
	t          *testing.T
	e          *Env
	sc         Scenario
	runnerDir  string // the session as the runner sees it
	masterDir  string // the same, as the master sees it
	filesDir   string // the scenario's other files, runner side
	ad         *adapter
	runner     *runnerProc
	pending    bool
	vars       map[string]string
	lastOutput map[string]string
}

type runnerProc struct {
	cmd    *exec.Cmd
	stderr *testenv.LockedBuffer
	done   chan struct{}
	code   int
}

func runScenario(t *testing.T, e *Env, master string, sc Scenario) {
	name := master + "-" + sc.Name
	base := filepath.Join(e.RunnerRoot, name)
	if err := os.MkdirAll(filepath.Join(base, "files"), 0o700); err != nil {
		t.Fatal(err)
	}
	d := &driver{t: t, e: e, sc: sc, runnerDir: filepath.Join(base, "sess"),
		masterDir: filepath.Join(e.MasterRoot, name, "sess"), filesDir: filepath.Join(base, "files"), vars: map[string]string{}}
	if sc.Pool {
		// The session is s00 of a pool whose sessions the scenario's
		// runner serves; pool.json says nothing is respawned.
		d.runnerDir, d.masterDir = filepath.Join(base, "pool", "s00"), filepath.Join(e.MasterRoot, name, "pool", "s00")
		if err := os.MkdirAll(filepath.Join(base, "pool"), 0o700); err != nil {
			t.Fatal(err)
		}
		cfg := `{"protocol_version":1,"size":1,"via":"local","respawn":false,"max_respawns":3}` + "\n"
		if err := os.WriteFile(filepath.Join(base, "pool", "pool.json"), []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for n, data := range sc.Files {
		if err := os.WriteFile(filepath.Join(d.filesDir, n), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cmd, err := e.adapterCommand(master, d.masterDir)
	if err != nil {
		t.Fatal(err)
	}
	if d.ad, err = startAdapter(cmd); err != nil {
		t.Fatalf("start %s adapter: %v", master, err)
	}
	t.Cleanup(func() {
		d.ad.close()
		d.stopRunner()
		// Every scenario ends with the session-invariant check, on the
		// runner's side, once its runner has stopped.
		switch {
		case t.Failed():
		case sc.NoCheck != "":
			testenv.SkipCheck(t, d.runnerDir, sc.NoCheck)
		default:
			testenv.VerifySession(t, d.runnerDir, sc.Check)
		}
		if t.Failed() {
			d.dump()
		}
	})
	for _, st := range sc.Steps {
		start := time.Now()
		d.step(st)
		if took := time.Since(start); took > 10*time.Second {
			t.Logf("%s line %d (%s %s) took %v", sc.Name, st.Line, st.Kind, strings.Join(st.Args, " "), took.Round(time.Millisecond))
		}
	}
	if d.pending {
		t.Fatalf("a started master step (&>) was never collected (<-)")
	}
}

func (d *driver) fail(st Step, format string, args ...any) {
	d.t.Helper()
	d.t.Fatalf("%s line %d (%s %s): %s", d.sc.Name, st.Line, st.Kind, strings.Join(st.Args, " "), fmt.Sprintf(format, args...))
}

func (d *driver) subst(s string) string {
	return os.Expand(s, func(k string) string {
		if v, ok := d.vars[k]; ok {
			return v
		}
		return "$" + k
	})
}

func (d *driver) step(st Step) {
	d.t.Helper()
	args := make([]string, len(st.Args))
	for i, a := range st.Args {
		args[i] = d.subst(a)
	}
	switch st.Kind {
	case ">", "&>":
		if d.pending {
			d.fail(st, "a started master step is still pending")
		}
		line, err := wireLine(args)
		if err != nil {
			d.fail(st, "%v", err)
		}
		if err := d.ad.send(line); err != nil {
			d.fail(st, "send to adapter: %v", err)
		}
		if st.Kind == "&>" {
			d.pending = true
			return
		}
		d.collect(st)
	case "<-":
		if !d.pending {
			d.fail(st, "nothing was started")
		}
		d.pending = false
		d.collect(st)
	default:
		d.harness(st, args)
	}
}

// collect reads the master's outcome and checks the expectations.
func (d *driver) collect(st Step) {
	d.t.Helper()
	raw, err := d.ad.receive(stepLimit)
	if err != nil {
		d.fail(st, "%v", err)
	}
	got, err := normalize(raw, d.masterDir)
	if err != nil {
		d.fail(st, "outcome %v: %v", raw, err)
	}
	d.lastOutput = got
	for _, ex := range st.Expect {
		ex = d.subst(ex)
		if k, ok := strings.CutPrefix(ex, "!"); ok {
			if v, present := got[k]; present {
				d.fail(st, "%s is there (%q), want none; outcome %s", k, v, show(got))
			}
			continue
		}
		if k, name, ok := strings.Cut(ex, "=>"); ok {
			v, present := got[k]
			if !present {
				d.fail(st, "no %s to capture in %s", k, show(got))
			}
			d.vars[name] = v
			continue
		}
		if k, want, ok := strings.Cut(ex, "~="); ok {
			if !strings.Contains(got[k], want) {
				d.fail(st, "%s = %q does not contain %q; outcome %s", k, got[k], want, show(got))
			}
			continue
		}
		k, want, ok := strings.Cut(ex, "=")
		if !ok {
			d.fail(st, "bad expectation %q", ex)
		}
		if got[k] != want {
			d.fail(st, "%s = %q, want %q; outcome %s", k, got[k], want, show(got))
		}
	}
}

func show(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%q", k, m[k])
	}
	return "{" + strings.TrimSpace(b.String()) + "}"
}

// waitFor polls cond until it holds or stepLimit passes: every 5 ms at
// first, each pause a quarter longer than the one before, up to 100 ms.
// Most waits end within a few polls; the long ones (a runner's start, a
// liveness window, a lease) poll ten times a second, not fifty: in the
// NFS guest every poll is a read over NFS on a CPU the scenarios share.
func (d *driver) waitFor(st Step, what string, cond func() bool) {
	d.t.Helper()
	deadline := time.Now().Add(stepLimit)
	pause := 5 * time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			d.fail(st, "%s: not within %v", what, stepLimit)
		}
		time.Sleep(pause)
		pause = min(pause*5/4, 100*time.Millisecond)
	}
}

func (d *driver) readJSON(rel string) map[string]any {
	data, err := os.ReadFile(filepath.Join(d.runnerDir, rel))
	if err != nil {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(data, &m) != nil {
		return nil
	}
	return m
}

// fieldsMatch checks K=V and K~=V against top-level fields of m, then its
// "detail" object.
// fieldsMatch reports whether m (or its detail) has every field exps
// asks for: K=V (equal), K~=V (contains) or K>=N (a number at least N).
func fieldsMatch(m map[string]any, exps []string) bool {
	for _, ex := range exps {
		k, want, op := ex, "", "="
		for _, o := range []string{"~=", ">=", "="} {
			if a, b, ok := strings.Cut(ex, o); ok {
				k, want, op = a, b, o
				break
			}
		}
		v, ok := eventField(m, k)
		if !ok {
			return false
		}
		got := scalar(v)
		switch op {
		case "~=":
			ok = strings.Contains(got, want)
		case ">=":
			g, err1 := strconv.ParseFloat(got, 64)
			w, err2 := strconv.ParseFloat(want, 64)
			ok = err1 == nil && err2 == nil && g >= w
		default:
			ok = got == want
		}
		if !ok {
			return false
		}
	}
	return true
}

// eventField reads field k of a meta.log event or of its detail.
func eventField(m map[string]any, k string) (any, bool) {
	if v, ok := m[k]; ok {
		return v, true
	}
	if det, isMap := m["detail"].(map[string]any); isMap {
		v, ok := det[k]
		return v, ok
	}
	return nil, false
}

func (d *driver) events() []map[string]any {
	data, _ := os.ReadFile(filepath.Join(d.runnerDir, "log", "meta.log"))
	var out []map[string]any
	// Lines split in place: waitFor calls this every poll, and a scanner's
	// buffer per call cost the NFS guest more than the reading.
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		var m map[string]any
		if len(line) > 0 && json.Unmarshal(line, &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

var durRE = regexp.MustCompile(`^[0-9.]+(ms|s)$`)

func (d *driver) harness(st Step, args []string) {
	d.t.Helper()
	argN := func(n int) {
		if len(args) < n {
			d.fail(st, "needs %d arguments", n)
		}
	}
	switch st.Kind {
	case "runner", "runner!":
		d.startRunner(st, args, st.Kind == "runner")
	case "kill-runner":
		if d.runner == nil {
			d.fail(st, "no runner")
		}
		_ = d.runner.cmd.Process.Signal(syscall.SIGKILL)
		<-d.runner.done
	case "freeze-runner", "thaw-runner":
		// SIGSTOP / SIGCONT: a runner alive (its lock held, its tool
		// running) whose heartbeat is late, as on a loaded host.
		if d.runner == nil {
			d.fail(st, "no runner")
		}
		sig := syscall.SIGSTOP
		if st.Kind == "thaw-runner" {
			sig = syscall.SIGCONT
		}
		if err := d.runner.cmd.Process.Signal(sig); err != nil {
			d.fail(st, "%v", err)
		}
		// The steps after a freeze assume the runner is stopped: wait
		// until the kernel says every thread is (state T in /proc; a
		// group stop of a process with many threads on a loaded host is
		// not instant), or running again after a thaw. Without /proc
		// (another OS) the signal alone is trusted.
		want := sig == syscall.SIGSTOP
		pid := d.runner.cmd.Process.Pid
		for deadline := time.Now().Add(stepLimit); ; time.Sleep(time.Millisecond) {
			stopped, ok := procStopped(pid)
			if !ok || stopped == want {
				break
			}
			if time.Now().After(deadline) {
				d.fail(st, "runner pid %d: stopped=%v after %v, want %v", pid, stopped, stepLimit, want)
			}
		}
	case "runner-exit":
		argN(1)
		if d.runner == nil {
			d.fail(st, "no runner")
		}
		select {
		case <-d.runner.done:
		case <-time.After(stepLimit):
			d.fail(st, "runner did not exit")
		}
		if want, _ := strconv.Atoi(args[0]); d.runner.code != want {
			d.fail(st, "runner exited %d, want %d", d.runner.code, want)
		}
	case "running":
		argN(1)
		d.waitFor(st, "state.json current_cmd_id "+args[0], func() bool {
			return scalar(d.readJSON("state/state.json")["current_cmd_id"]) == args[0]
		})
	case "write", "touch":
		argN(1)
		p := filepath.Join(d.runnerDir, args[0])
		var err error
		if st.Kind == "touch" {
			var f *os.File
			if f, err = os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
				err = f.Close()
			}
		} else {
			argN(2)
			tmp := filepath.Join(filepath.Dir(p), ".conformance.tmp")
			_ = os.MkdirAll(filepath.Dir(p), 0o700) // forward/ and the like: a pool master's directories.
			if err = os.WriteFile(tmp, []byte(args[1]), 0o600); err == nil {
				err = os.Rename(tmp, p)
			}
		}
		if err != nil {
			d.fail(st, "%v", err)
		}
	case "plant":
		// plant fifo|symlink ID: put a FIFO, or a symlink to a regular
		// file outside the session, where ID's result will go.
		argN(2)
		name := ""
		for _, dir := range []string{"queue", "inflight"} {
			m, _ := filepath.Glob(filepath.Join(d.runnerDir, dir, "cmd_*_"+args[1]+".json"))
			if len(m) == 1 {
				name = filepath.Base(m[0])
			}
		}
		if name == "" {
			d.fail(st, "no queued or running command %s", args[1])
		}
		p := filepath.Join(d.runnerDir, "result", name)
		var err error
		switch args[0] {
		case "fifo":
			err = syscall.Mkfifo(p, 0o600)
		case "symlink":
			target := filepath.Join(d.t.TempDir(), "elsewhere.json")
			if err = os.WriteFile(target, []byte(`{"protocol_version":1,"cmd_id":"`+args[1]+`","status":"ok","value":"planted"}`), 0o600); err == nil {
				err = os.Symlink(target, p)
			}
		default:
			d.fail(st, "plant fifo or symlink")
		}
		if err != nil {
			d.fail(st, "%v", err)
		}
	case "event":
		argN(1)
		var match []string
		capture := map[string]string{} // field => variable
		for _, a := range args[1:] {
			if k, name, ok := strings.Cut(a, "=>"); ok {
				capture[k] = name
				continue
			}
			match = append(match, a)
		}
		d.waitFor(st, "event "+strings.Join(args, " "), func() bool {
			for _, ev := range d.events() {
				if scalar(ev["event"]) != args[0] || !fieldsMatch(ev, match) {
					continue
				}
				for k := range capture {
					if _, ok := eventField(ev, k); !ok {
						return false
					}
				}
				for k, name := range capture {
					v, _ := eventField(ev, k)
					d.vars[name] = scalar(v)
				}
				return true
			}
			return false
		})
	case "count":
		argN(2)
		n := 0
		for _, ev := range d.events() {
			if scalar(ev["event"]) == args[0] {
				n++
			}
		}
		if want, _ := strconv.Atoi(args[1]); n != want {
			d.fail(st, "%d %s events, want %d", n, args[0], want)
		}
	case "json":
		argN(1)
		d.waitFor(st, args[0]+" with "+strings.Join(args[1:], " "), func() bool {
			p := args[0]
			if strings.ContainsAny(path.Base(p), "*?[") { // One file whose name has a seq: result/cmd_*_x.json.
				m, _ := listMatches(filepath.Join(d.runnerDir, p))
				if len(m) != 1 {
					return false
				}
				p = path.Join(path.Dir(p), filepath.Base(m[0]))
			}
			m := d.readJSON(p)
			return m != nil && fieldsMatch(m, args[1:])
		})
	case "command":
		// command ID K=V...: the command file ID ran from (its result's
		// command_path: archive/ or log/rejected/) has these fields, as the
		// runner read them.
		argN(1)
		d.waitFor(st, "command "+strings.Join(args, " "), func() bool {
			res, _ := listMatches(filepath.Join(d.runnerDir, protocol.DirResult, "cmd_*_"+args[0]+".json"))
			if len(res) != 1 {
				return false
			}
			p, ok := d.readJSON(protocol.DirResult + "/" + filepath.Base(res[0]))["command_path"].(string)
			if !ok || !filepath.IsLocal(p) {
				return false
			}
			m := d.readJSON(p)
			return m != nil && fieldsMatch(m, args[1:])
		})
	case "take-back":
		// take-back ID: withdraw ID as another master does (PROTOCOL.md
		// section 19): queue/<name> renamed into withdrawn/<name>.
		argN(1)
		m, _ := listMatches(filepath.Join(d.runnerDir, protocol.DirQueue, "cmd_*_"+args[0]+".json"))
		if len(m) != 1 {
			d.fail(st, "%d queued commands %s, want 1", len(m), args[0])
		}
		w := filepath.Join(d.runnerDir, "withdrawn")
		if err := os.Mkdir(w, 0o770); err != nil && !errors.Is(err, fs.ErrExist) {
			d.fail(st, "%v", err)
		}
		if err := os.Rename(m[0], filepath.Join(w, filepath.Base(m[0]))); err != nil {
			d.fail(st, "%v", err)
		}
	case "reclaim":
		// reclaim ID: put ID's command file back in inflight/ beside its
		// result, as a runner leaves it between the result's rename and
		// the claim's move to archive/ (PROTOCOL.md section 7).
		argN(1)
		res, _ := listMatches(filepath.Join(d.runnerDir, protocol.DirResult, "cmd_*_"+args[0]+".json"))
		if len(res) != 1 {
			d.fail(st, "%d results of %s, want 1", len(res), args[0])
		}
		p, ok := d.readJSON(protocol.DirResult + "/" + filepath.Base(res[0]))["command_path"].(string)
		if !ok || !filepath.IsLocal(p) {
			d.fail(st, "the result of %s names no command file in the session", args[0])
		}
		b, err := os.ReadFile(filepath.Join(d.runnerDir, p))
		if err == nil {
			err = os.WriteFile(filepath.Join(d.runnerDir, protocol.DirInflight, filepath.Base(res[0])), b, 0o600)
		}
		if err != nil {
			d.fail(st, "%v", err)
		}
	case "remove", "truncate":
		argN(1)
		matches, err := listMatches(filepath.Join(d.runnerDir, args[0]))
		if err == nil && len(matches) == 0 {
			err = fmt.Errorf("no session file matches %s", args[0])
		}
		for _, m := range matches {
			if err != nil {
				break
			}
			if st.Kind == "remove" {
				err = os.Remove(m)
				continue
			}
			argN(2)
			n, perr := strconv.ParseInt(args[1], 10, 64)
			if perr != nil {
				d.fail(st, "truncate: size %q: %v", args[1], perr)
			}
			err = os.Truncate(m, n)
		}
		if err != nil {
			d.fail(st, "%v", err)
		}
	case "files":
		// Waited for, not looked at once: the runner deletes a request
		// just after its reply (PROTOCOL.md 9.1, step 4), and a master
		// returns as soon as it sees the reply.
		argN(2)
		want, _ := strconv.Atoi(args[1])
		var matches []string
		d.waitFor(st, fmt.Sprintf("%d files matching %s", want, args[0]), func() bool {
			var err error
			if matches, err = listMatches(filepath.Join(d.runnerDir, args[0])); err != nil {
				d.fail(st, "%v", err)
			}
			return len(matches) == want
		})
	case "printed":
		// printed ID TEXT: ID's output file holds TEXT. A cancel or signal
		// that must find a command's first words printed waits for them:
		// "running" says only that the runner has sent the command.
		argN(2)
		d.waitFor(st, fmt.Sprintf("%s printed %q", args[0], args[1]), func() bool {
			outs, _ := listMatches(filepath.Join(d.runnerDir, "output", "cmd_*_"+args[0]+".out"))
			for _, p := range outs {
				if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), args[1]) {
					return true
				}
			}
			return false
		})
	case "absent":
		argN(1)
		_ = filepath.WalkDir(d.runnerDir, func(p string, de os.DirEntry, err error) error {
			if err != nil || !de.Type().IsRegular() {
				return nil
			}
			if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(args[0])) {
				d.fail(st, "%s holds %q", p, args[0])
			}
			return nil
		})
	case "mode":
		argN(2)
		want, err := strconv.ParseUint(args[1], 8, 32)
		if err != nil {
			d.fail(st, "mode %q is not octal", args[1])
		}
		matches, err := filepath.Glob(filepath.Join(d.runnerDir, args[0]))
		if err != nil || len(matches) == 0 {
			d.fail(st, "no file matches %s (%v)", args[0], err)
		}
		for _, p := range matches {
			fi, err := os.Lstat(p)
			if err != nil {
				d.fail(st, "%v", err)
			}
			if got := fi.Mode().Perm(); got != os.FileMode(want) {
				d.fail(st, "%s has mode %04o, want %04o", p, got, want)
			}
		}
	case "remove-session":
		// Delete the session directory as rm -rf would (the runner was
		// killed first: a pool session deleted under its masters).
		if err := os.RemoveAll(d.runnerDir); err != nil {
			d.fail(st, "%v", err)
		}
	case "sleep":
		argN(1)
		if !durRE.MatchString(args[0]) {
			d.fail(st, "bad duration")
		}
		dur, _ := time.ParseDuration(args[0])
		time.Sleep(dur)
	default:
		d.fail(st, "unknown step")
	}
}

// startRunner starts a runner on the session; with ready, it waits until
// state.json says idle.
func (d *driver) startRunner(st Step, flags []string, ready bool) {
	d.t.Helper()
	if d.runner != nil {
		select {
		case <-d.runner.done:
		default:
			d.fail(st, "a runner is still running")
		}
	}
	argv := append(append([]string{}, d.e.RunnerPrefix...), filepath.Join(d.e.Bin, "runner"), "--session", d.runnerDir)
	argv = append(argv, d.e.RunnerFlags...)
	for _, f := range flags {
		if name, ok := strings.CutPrefix(f, "@"); ok {
			f = filepath.Join(d.filesDir, name)
		}
		argv = append(argv, f)
	}
	if len(d.e.Tool) > 0 {
		argv = append(append(argv, "--"), d.e.Tool...)
	}
	p := &runnerProc{cmd: exec.Command(argv[0], argv[1:]...), stderr: &testenv.LockedBuffer{}, done: make(chan struct{})}
	p.cmd.Stderr = p.stderr
	p.cmd.Env = append(os.Environ(), "PATH="+d.e.Bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	if err := p.cmd.Start(); err != nil {
		d.fail(st, "%v", err)
	}
	go func() {
		err := p.cmd.Wait()
		p.code = p.cmd.ProcessState.ExitCode()
		if ee, ok := err.(*exec.ExitError); ok && !ee.Exited() {
			p.code = -1
		}
		close(p.done)
	}()
	d.runner = p
	if !ready {
		return
	}
	d.waitFor(st, "runner idle", func() bool {
		select {
		case <-p.done:
			d.fail(st, "runner exited %d:\n%s", p.code, p.stderr)
		default:
		}
		return scalar(d.readJSON("state/state.json")["phase"]) == "idle"
	})
}

// stopRunner ends a runner left running: SIGTERM (a graceful stop), then
// SIGKILL.
func (d *driver) stopRunner() {
	if d.runner == nil {
		return
	}
	_ = d.runner.cmd.Process.Signal(syscall.SIGCONT) // One a scenario left frozen.
	_ = d.runner.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.runner.done:
		return
	case <-time.After(15 * time.Second):
	}
	_ = d.runner.cmd.Process.Signal(syscall.SIGKILL)
	<-d.runner.done
}

// dump logs what helps to understand a failure.
func (d *driver) dump() {
	t := d.t
	t.Logf("adapter stderr:\n%s", d.ad.stderr)
	if d.runner != nil {
		t.Logf("runner stderr:\n%s", d.runner.stderr)
	}
	for _, dir := range []string{"queue", "inflight", "result", "ctl", "ctl/ack", "state"} {
		names, _ := filepath.Glob(filepath.Join(d.runnerDir, dir, "*"))
		for i := range names {
			names[i] = filepath.Base(names[i])
		}
		t.Logf("%s/: %v", dir, names)
	}
	meta, _ := os.ReadFile(filepath.Join(d.runnerDir, "log", "meta.log"))
	if len(meta) > 8000 {
		meta = meta[len(meta)-8000:]
	}
	t.Logf("meta.log (tail):\n%s", meta)
}

// listMatches is filepath.Glob for a pattern whose wildcards are in its
// last element only, by reading the directory: on NFS a name the other
// client removed can still answer a stat (Glob of a name without
// wildcards) from this client's lookup cache, while a directory listing
// is revalidated when the directory is opened (a master on client B
// withdrew queue/X; the runner's client A still stat-ed X).
func listMatches(pattern string) ([]string, error) {
	dir, base := filepath.Split(pattern)
	if _, err := filepath.Match(base, ""); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if ok, _ := filepath.Match(base, e.Name()); ok {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out, nil
}

// procStopped reports whether every thread of process pid is stopped
// (state T in /proc/<pid>/task/*/stat; a group stop is complete only when
// the last thread has taken it); ok is false when that cannot be read.
func procStopped(pid int) (stopped, ok bool) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil || len(tasks) == 0 {
		return false, false
	}
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, t.Name()))
		if err != nil {
			continue // A thread that just ended.
		}
		i := bytes.LastIndexByte(b, ')') // The command name may hold spaces and parentheses.
		if i < 0 || i+2 >= len(b) {
			return false, false
		}
		if b[i+2] != 'T' {
			return false, true
		}
	}
	return true, true
}

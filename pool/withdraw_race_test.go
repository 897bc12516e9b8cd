package pool

import (
	"bufio"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/internal/testenv"
	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
)

// TestWithdrawRacesHeal races withdraws against heal moves:
// commands queued in a dead session are moved by two concurrent healers
// while each is withdrawn, by cmd_id or by its file's name, from the
// session it was queued in, by the Go master and by the Python and Tcl
// masters (processes that start withdrawing when the healers start).
// Whatever the interleaving, a withdraw that answers "withdrawn" or
// "unknown" is about a command that never runs; only "not queued"
// (claimed: it runs) and "already finished" come with a run. Every
// command runs at most once.
func TestWithdrawRacesHeal(t *testing.T) {
	testenv.Slow(t, "real runners racing for seconds")
	p, pool := newPoolDir(t, "s00", "s01", "s02")
	runnerIn(t, filepath.Join(pool, "s01"))
	runnerIn(t, filepath.Join(pool, "s02"))
	side := filepath.Join(t.TempDir(), "ran")
	dead := filepath.Join(pool, "s00")
	type outcome struct {
		c   *master.Command
		err error
	}
	var all []outcome
	for round := 0; round < 12; round++ {
		cmds := queueSideEffects(t, dead, side, 8)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for h := 0; h < 2; h++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, _ = p.Heal(ctx(t)) // Errors: a lost race of movers; the final heals below finish.
			}()
		}
		res := make([]outcome, len(cmds))
		byLang := map[string][]int{}
		for i := range cmds {
			switch i % 4 {
			case 2:
				byLang["python3"] = append(byLang["python3"], i)
			case 3:
				byLang["tclsh"] = append(byLang["tclsh"], i)
			}
		}
		for lang, idx := range byLang {
			refs := make([]string, len(idx))
			for k, i := range idx {
				refs[k] = cmds[i].ID
				if k%2 == 1 {
					refs[k] = protocol.DirQueue + "/" + cmds[i].Name
				}
			}
			w := startWithdrawer(t, lang, dead, refs)
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				codes := w()
				for k, i := range idx {
					res[i] = outcome{cmds[i], codeErr(codes[refs[k]])}
				}
			}()
		}
		for i, c := range cmds {
			if i%4 >= 2 {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, err := master.Open(dead)
				if err != nil {
					res[i] = outcome{c, err}
					return
				}
				ref := c.ID
				if i%2 == 1 {
					ref = protocol.DirQueue + "/" + c.Name // The name form, as ls shows it.
				}
				<-start
				time.Sleep(time.Duration(rand.IntN(40)) * time.Millisecond)
				res[i] = outcome{c, withdrawRef(s, ref)}
			}()
		}
		close(start)
		wg.Wait()
		all = append(all, res...)
	}
	// Let every move finish and every moved command run.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if _, err := p.Heal(ctx(t)); err != nil {
			t.Logf("heal: %v", err)
		}
		busy := len(commandsIn(filepath.Join(dead, protocol.DirQueue))) + len(commandsIn(filepath.Join(dead, DirMoved)))
		for _, n := range []string{"s01", "s02"} {
			for _, d := range []string{protocol.DirQueue, protocol.DirInflight} {
				busy += len(commandsIn(filepath.Join(pool, n, d)))
			}
		}
		if busy == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d commands still queued, moving or running", busy)
		}
		time.Sleep(100 * time.Millisecond)
	}
	b, _ := os.ReadFile(side)
	ran := map[string]int{}
	for _, l := range strings.Fields(string(b)) {
		ran[l]++
	}
	count := map[string]int{}
	for _, o := range all {
		code, _ := master.Classify(o.err)
		if o.err == nil {
			code = "withdrawn"
		}
		count[code]++
		switch {
		case ran[o.c.ID] > 1:
			t.Errorf("%s ran %d times", o.c.ID, ran[o.c.ID])
		case ran[o.c.ID] == 1 && (o.err == nil || errors.Is(o.err, master.ErrUnknownCmdID)):
			t.Errorf("%s: withdraw answered %q (%v), and then it ran", o.c.ID, code, o.err)
		case ran[o.c.ID] == 0 && !(o.err == nil || errors.Is(o.err, master.ErrUnknownCmdID)):
			t.Errorf("%s: withdraw answered %q (%v), and it never ran", o.c.ID, code, o.err)
		}
	}
	t.Logf("withdraw outcomes: %v", count)
}

// withdrawRef withdraws the command ref (a cmd_id, or queue/<name>) of s,
// as master withdraw does.
func withdrawRef(s *master.Session, ref string) error {
	_, err := s.Withdraw(ref)
	return err
}

// startWithdrawer starts a Python or Tcl master (lang) that withdraws refs
// from the session dir once told to; the function it returns tells it and
// returns each ref's outcome code ("withdrawn" or an error code).
func startWithdrawer(t *testing.T, lang, dir string, refs []string) func() map[string]string {
	t.Helper()
	needTool(t, lang)
	var cmd *exec.Cmd
	if lang == "python3" {
		cmd = exec.Command(testenv.Python3(), "-c", `import sys
sys.path.insert(0, "clients/python")
import skillpilot as sp
s = sp.Session(sys.argv[1])
print("ready", flush=True)
sys.stdin.readline()
for ref in sys.argv[2:]:
    try:
        s.withdraw(ref)
        print(ref, "withdrawn", flush=True)
    except sp.MasterError as e:
        print(ref, e.code, flush=True)`, dir)
	} else {
		f := filepath.Join(t.TempDir(), "w.tcl")
		os.WriteFile(f, []byte(`lappend auto_path clients/tcl
package require skillpilot
set dir [lindex $argv 0]
puts ready; flush stdout
gets stdin
foreach ref [lrange $argv 1 end] {
    if {[catch {skillpilot::withdraw $dir $ref} m o]} {
        puts "$ref [string tolower [lindex [dict get $o -errorcode] 1]]"
    } else {
        puts "$ref withdrawn"
    }
    flush stdout
}`), 0o600)
		cmd = exec.Command("tclsh", f, dir)
	}
	cmd.Args = append(cmd.Args, refs...)
	cmd.Dir = ".."
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	if !sc.Scan() || sc.Text() != "ready" {
		t.Fatalf("%s withdrawer: %q %s", lang, sc.Text(), stderr.String())
	}
	return func() map[string]string {
		in.Write([]byte("go\n"))
		codes := map[string]string{}
		for sc.Scan() {
			if ref, code, ok := strings.Cut(sc.Text(), " "); ok {
				codes[ref] = code
			}
		}
		if err := cmd.Wait(); err != nil {
			t.Errorf("%s withdrawer: %v %s", lang, err, stderr.String())
		}
		return codes
	}
}

// codeErr turns an outcome code back into the master error it stands for
// (nil for "withdrawn").
func codeErr(code string) error {
	switch code {
	case "withdrawn":
		return nil
	case "unknown_cmd_id":
		return master.ErrUnknownCmdID
	case "not_queued":
		return master.ErrNotQueued
	case "already_finished":
		return master.ErrAlreadyFinished
	case "already_withdrawn":
		return master.ErrAlreadyWithdrawn
	}
	return errors.New("withdraw answered " + code)
}

package nfs

import (
	"github.com/skillpilot/skillpilot/internal/testenv"

	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
)

// Answering prompts across NFS clients: the runner on A, masters on B. A tool that
// asks twice is answered by the Go master's send --expect and then by the
// Python master's; several sends to one command arrive in order, each
// once; sends racing the end of a command never reach the next one; a
// secret leaves no trace. It prints the send latency (B's send → the tool
// has the bytes on A; one kernel, so one clock).
func TestNFSInteractive(t *testing.T) {
	a, b := session(t)
	r := runnerOnA(t, a)
	s := ready(t, b)
	c, err := s.Submit(ctx(t), `foreach q {first second} {puts -nonewline "$q? (y/n) "; flush stdout; gets stdin v($q)}; `+
		`for {set i 0} {$i < 5} {incr i} {gets stdin l; puts "line $l"}; puts "$v(first) $v(second)"`, master.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := s.Send(ctx(t), c.ID, []byte("y\n"), master.SendOptions{Expect: `\? \(y/n\) $`})
	if err != nil || rep.Outcome != protocol.OutcomeDelivered {
		t.Fatalf("go send: %+v %v", rep, err)
	}
	py := onHostB(t, testenv.Python3(), "-c", fmt.Sprintf(`
import sys; sys.path.insert(0, %q)
import skillpilot as sp
s = sp.Session(%q)
r = s.send(%q, "n\n", expect=r"second\? \(y/n\) $")
assert r["outcome"] == "delivered", r
for i in range(5):
    s.send(%q, "%%d\n" %% i)
print("ok")`, filepath.Join(repo, "clients/python"), b, c.ID, c.ID))
	if out, err := py.CombinedOutput(); err != nil || !strings.Contains(string(out), "ok") {
		t.Fatalf("python master on B: %v\n%s", err, out)
	}
	if _, err := c.Wait(ctx(t), master.WaitOptions{}); err != nil {
		t.Fatal(err)
	}
	out, _ := c.Output(0, 0)
	if want := "first? (y/n) second? (y/n) line 0\nline 1\nline 2\nline 3\nline 4\ny n\n"; string(out) != want {
		t.Fatalf("output %q, want %q (order or exactly-once broken)", out, want)
	}

	// Sends racing the end of a command: delivered or refused, never seen
	// by the next command.
	for i := 0; i < 5; i++ {
		x, _ := s.Submit(ctx(t), fmt.Sprintf("after %d", 20*i), master.SubmitOptions{})
		y, _ := s.Submit(ctx(t), `fconfigure stdin -blocking 0; after 20; set got [read stdin]; fconfigure stdin -blocking 1; string length $got`, master.SubmitOptions{})
		for k := 0; ; k++ {
			rep, err := s.Send(ctx(t), x.ID, []byte(fmt.Sprintf("LEAK-%d-%d\n", i, k)), master.SendOptions{})
			var re *master.RequestError
			if errors.As(err, &re) && re.Reply.CmdState == "finished" {
				break
			}
			if err != nil && !errors.Is(err, master.ErrNotRunning) {
				t.Fatalf("%+v %v", rep, err)
			}
		}
		if res, err := y.Wait(ctx(t), master.WaitOptions{}); err != nil || *res.Value != "0" {
			t.Fatalf("the next command saw input: %+v %v", res, err)
		}
	}
	spool, _ := os.ReadFile(filepath.Join(b, protocol.FileSpool))
	if strings.Contains(string(spool), "LEAK") {
		t.Fatalf("input reached the tool's prompt")
	}

	// A secret; then the latency figure.
	pw, _ := s.Submit(ctx(t), `puts -nonewline "password: "; flush stdout; gets stdin p; string length $p`, master.SubmitOptions{})
	if _, err := s.Send(ctx(t), pw.ID, []byte("NFS-Secret-31\n"), master.SendOptions{Expect: "password: ", Secret: true}); err != nil {
		t.Fatal(err)
	}
	if res, err := pw.Wait(ctx(t), master.WaitOptions{}); err != nil || *res.Value != "13" {
		t.Fatalf("%+v %v", res, err)
	}
	n := 20
	lat, err := sendLatency(t, s, n)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stopWait(ctx(t), s, protocol.StopGraceful); err != nil {
		t.Fatal(err)
	}
	if code := r.wait(t); code != 0 {
		t.Fatalf("runner exit %d", code)
	}
	checkStopped(t, a)
	filepath.Walk(a, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			if data, _ := os.ReadFile(p); strings.Contains(string(data), "NFS-Secret-31") {
				t.Errorf("%s holds the secret", p)
			}
		}
		return nil
	})
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	fmt.Printf("NFS FIGURES: send on B → the tool on A has the bytes (--poll 250ms, master polls every 20ms): p50 %v p90 %v max %v\n",
		lat[len(lat)/2].Round(time.Millisecond), lat[len(lat)*9/10].Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond))
}

// sendLatency sends n lines to a command that prints when it read each.
func sendLatency(t *testing.T, s *master.Session, n int) ([]time.Duration, error) {
	s.PollInterval = 20 * time.Millisecond
	c, err := s.Submit(ctx(t), fmt.Sprintf(`puts -nonewline "ready> "; flush stdout
for {set i 0} {$i < %d} {incr i} {gets stdin l; puts "$l [clock microseconds]"; flush stdout}`, n), master.SubmitOptions{})
	if err != nil {
		return nil, err
	}
	sent := map[int]time.Time{}
	for i := 0; i < n; i++ {
		opts := master.SendOptions{}
		if i == 0 {
			opts.Expect = "ready> "
		}
		sent[i] = time.Now()
		if _, err := s.Send(ctx(t), c.ID, []byte(strconv.Itoa(i)+"\n"), opts); err != nil {
			return nil, err
		}
	}
	if _, err := c.Wait(ctx(t), master.WaitOptions{}); err != nil {
		return nil, err
	}
	out, _ := c.Output(0, 0)
	var lat []time.Duration
	for _, m := range regexp.MustCompile(`(?m)^(\d+) (\d+)$`).FindAllStringSubmatch(string(out), -1) {
		i, _ := strconv.Atoi(m[1])
		at, _ := strconv.ParseInt(m[2], 10, 64)
		if i > 0 {
			lat = append(lat, time.UnixMicro(at).Sub(sent[i]))
		}
	}
	if len(lat) != n-1 {
		return nil, fmt.Errorf("%d of %d lines read: %q", len(lat), n-1, out)
	}
	return lat, nil
}

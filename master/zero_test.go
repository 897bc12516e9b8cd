package master

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/skillpilot/skillpilot/protocol"
)

// zeroChecked lists, per struct a caller fills in, the exported fields
// whose zero value the tests below hold to its documented default. A field
// added without a check here fails TestEveryZeroFieldIsChecked (every
// zero value of an exported field means its documented default).
var zeroChecked = map[reflect.Type][]string{
	reflect.TypeFor[Session]():       {"PollInterval", "QuickPoll", "WaitForRunner"},
	reflect.TypeFor[SubmitOptions](): {"Kind", "Timeout", "CancelPolicy", "CmdID", "Marker", "Submitter", "TraceID", "Labels", "MaxOutputBytes", "Extra"},
	reflect.TypeFor[SendOptions]():   {"Expect", "ExpectTimeout", "ExpectFrom", "Secret"},
	reflect.TypeFor[WaitOptions]():   {"WaitForRunner", "Progress"},
}

func TestEveryZeroFieldIsChecked(t *testing.T) {
	for typ, checked := range zeroChecked {
		for f := range typ.Fields() {
			if f.IsExported() && !slices.Contains(checked, f.Name) {
				t.Errorf("%s.%s: no test holds its zero value to its default (add it to zeroChecked and check it)", typ.Name(), f.Name)
			}
		}
	}
}

// A Session whose PollInterval, QuickPoll and WaitForRunner are 0 behaves
// as their defaults: Tail with follow used to panic on PollInterval 0
// ("non-positive interval for NewTicker").
func TestZeroSessionFieldsMeanDefaults(t *testing.T) {
	s, dir := fakeSession(t, idleState)
	s.PollInterval, s.QuickPoll, s.WaitForRunner = 0, 0, 0
	if got := s.pollInterval(); got != DefaultPollInterval {
		t.Errorf("PollInterval 0 polls every %v, want DefaultPollInterval", got)
	}
	if got := s.watching().Poll; got != DefaultPollInterval {
		t.Errorf("PollInterval 0: the shared watcher polls every %v", got)
	}
	if got := graceFor(s.newRunnerWatch().base, 0); got != DefaultWaitForRunner {
		t.Errorf("WaitForRunner 0: grace %v, want DefaultWaitForRunner", got)
	}
	if err := os.WriteFile(filepath.Join(dir, protocol.FileSpool), []byte("hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tctx, cancel := context.WithTimeout(context.Background(), 3*DefaultPollInterval)
	defer cancel()
	var out bytes.Buffer
	if n, err := s.Tail(tctx, &out, 0, true); err != nil || n != 6 || out.String() != "hello\n" {
		t.Errorf("Tail with follow: %d %q %v", n, out.String(), err)
	}
	if m, err := s.WaitFor(context.Background(), regexp.MustCompile(`hel+o`), 0); err != nil || !m.Matched || m.ResumeCursor != 5 {
		t.Errorf("WaitFor: %+v %v", m, err)
	}

	// QuickPoll 0 joins the shared watcher at once; the result written
	// later is seen, and the zero WaitOptions neither call a progress
	// function nor change the Session's grace.
	c, err := s.Submit(context.Background(), "expr 1", SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		b, _ := json.Marshal(protocol.Result{ProtocolVersion: protocol.Version, CmdID: c.ID, Seq: c.Seq, Status: protocol.StatusOK})
		tmp := filepath.Join(dir, protocol.DirResult, "."+c.Name)
		os.WriteFile(tmp, b, 0o600)
		os.Rename(tmp, filepath.Join(dir, protocol.DirResult, c.Name)) // Whole, as a runner writes it.
	}()
	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer wcancel()
	if r, err := c.Wait(wctx, WaitOptions{}); err != nil || r.Status != protocol.StatusOK {
		t.Errorf("Wait with zero options: %+v %v", r, err)
	}
}

// The zero WaitOptions: the Session's WaitForRunner for Command.Wait,
// DefaultWaitForRunner for WaitReady; no progress calls.
func TestZeroWaitOptionsMeanDefaults(t *testing.T) {
	var o WaitOptions
	if got := o.waitForRunner(3 * time.Second); got != 3*time.Second {
		t.Errorf("Wait: base %v, want the Session's 3s", got)
	}
	if got := graceFor(o.waitForRunner(0), 0); got != DefaultWaitForRunner {
		t.Errorf("WaitReady: grace %v, want DefaultWaitForRunner", got)
	}
	if o.Progress != nil {
		t.Error("zero Progress is not nil")
	}
	o.WaitForRunner = time.Second
	if got := o.waitForRunner(3 * time.Second); got != time.Second {
		t.Errorf("WaitForRunner set: base %v", got)
	}
}

// The zero SubmitOptions write a command of the session's kind, with a new
// cmd_id, this master as submitter, cancel policy ctrl_c, the runner_inject
// marker with the cmd_id as token, and no key for what the runner defaults
// (timeout, output budget) or what is not there (trace, labels, extra).
func TestZeroSubmitOptionsMeanDefaults(t *testing.T) {
	s, dir := fakeSession(t, `{"protocol_version":1,"phase":"idle","session_id":"s1","runner_pid":1,"hostname":"h","kind":"sh","updated_at":"2026-11-26T12:00:00Z"}`)
	c, err := s.Submit(context.Background(), "echo hi", SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, protocol.DirQueue, c.Name))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m["kind"] != "sh" || m["cmd_id"] != c.ID || !protocol.ValidCmdID(c.ID) || m["submitter"] != s.io.Owner() {
		t.Errorf("kind %v cmd_id %v submitter %v (owner %s)", m["kind"], m["cmd_id"], m["submitter"], s.io.Owner())
	}
	if m["cancel_policy"] != string(protocol.PolicyCtrlC) {
		t.Errorf("cancel_policy %v", m["cancel_policy"])
	}
	if mk, _ := m["marker"].(map[string]any); mk["mode"] != "runner_inject" || mk["token"] != c.ID {
		t.Errorf("marker %v", m["marker"])
	}
	for _, k := range []string{"max_output_bytes", "trace_id", "labels"} {
		if v, ok := m[k]; ok {
			t.Errorf("%s = %v written for its zero value; the runner's default applies only to a missing key", k, v)
		}
	}
	if v, ok := m["timeout_s"]; ok && v != 0.0 {
		t.Errorf("timeout_s = %v for Timeout 0 (the runner's default)", v)
	}
	for k := range m {
		if !isCommandField(k) {
			t.Errorf("key %q that is no command field, with Extra nil", k)
		}
	}
	var pc protocol.Command
	if err := json.Unmarshal(b, &pc); err != nil {
		t.Fatal(err)
	}
	if err := pc.Validate(); err != nil {
		t.Errorf("the command of zero options is invalid: %v", err)
	}
}

// The zero SendOptions send at once (no expect), with the runner's expect
// timeout, from the expect cursor, not secret.
func TestZeroSendOptionsMeanDefaults(t *testing.T) {
	req, err := SendOptions{}.request(NewCmdID(), []byte("y\n"))
	if err != nil {
		t.Fatal(err)
	}
	if req.Expect != "" || req.ExpectTimeoutMS != nil || req.ExpectFrom != nil || req.Secret {
		t.Errorf("%+v", req)
	}
	req.ReqID, req.ProtocolVersion = NewCmdID(), protocol.Version // Request's part.
	if err := checkRequest(req); err != nil {
		t.Errorf("the request of zero options is invalid: %v", err)
	}
}

// SubmitOptions.Extra adds top-level keys to the command file; a key the
// command file has anyway is a usage error and writes nothing.
func TestSubmitOptionsExtra(t *testing.T) {
	s, dir := fakeSession(t, idleState)
	c, err := s.Submit(context.Background(), "expr 1", SubmitOptions{Extra: map[string]any{"affinity": "corner_ss"}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, protocol.DirQueue, c.Name))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil || m["affinity"] != "corner_ss" || m["cmd_id"] != c.ID {
		t.Fatalf("%s (%v)", b, err)
	}
	for _, k := range []string{"payload", "trace_id"} { // Written, and left out when empty.
		if _, err := s.Submit(context.Background(), "expr 1", SubmitOptions{Extra: map[string]any{k: "x"}}); !errors.Is(err, ErrUsage) {
			t.Errorf("extra %s: %v", k, err)
		}
	}
	if n, err := s.QueueDepth(); n != 1 || err != nil {
		t.Errorf("queue depth %d (%v) after refused submits", n, err)
	}
}

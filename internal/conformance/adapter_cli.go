package conformance

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/protocol"
)

// cliAdapter drives the master command line (bin) as a user's script
// would: one process per step, --json, the exit code.
func cliAdapter(dir, bin string) int {
	a := &cliAd{dir: dir, bin: bin}
	defer a.stopLease()
	return serve(a.do)
}

type cliAd struct {
	dir, bin string
	lease    *exec.Cmd
}

// run runs master with args and --session, --json; it returns the exit
// code and stdout.
func (a *cliAd) run(args ...string) (int, []byte, string) {
	return a.runArgv(append(args[:1:1], append([]string{"--session", a.dir, "--json"}, args[1:]...)...))
}

// runArgv runs master with argv as given.
func (a *cliAd) runArgv(argv []string) (int, []byte, string) {
	cmd := exec.Command(a.bin, argv...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), out.Bytes(), errb.String()
	}
	if err != nil {
		return 10, nil, err.Error()
	}
	return 0, out.Bytes(), errb.String()
}

// doc decodes the first JSON document on stdout.
func doc(out []byte) map[string]any {
	var m map[string]any
	_ = json.NewDecoder(bytes.NewReader(out)).Decode(&m)
	return m
}

// errOutcome is the outcome of a failed CLI call: the JSON error's code,
// else the exit code alone.
func errOutcome(code int, m map[string]any, stderr string) map[string]any {
	out := map[string]any{"exit": code, "message": strings.TrimSpace(stderr)}
	if e, ok := m["error"].(map[string]any); ok {
		out["outcome"] = e["code"]
		if ctx, ok := e["context"].(map[string]any); ok {
			out["context"] = ctx
		}
	} else {
		out["outcome"] = fmt.Sprintf("exit_%d", code)
	}
	return out
}

func waitArgs(st step) []string {
	var args []string
	if v := st["wait_timeout_ms"]; v != "" {
		args = append(args, "--wait-timeout", v+"ms")
	}
	if v := st["wait_for_runner_ms"]; v != "" {
		args = append(args, "--wait-for-runner", v+"ms")
	}
	return args
}

// ofResultDoc is the outcome of a result document printed by wait or
// submit --wait.
func (a *cliAd) ofResultDoc(code int, m map[string]any, stderr string) map[string]any {
	if m == nil || m["status"] == nil {
		return errOutcome(code, m, stderr)
	}
	out := map[string]any{"outcome": m["status"], "exit": code, "cmd_id": m["cmd_id"], "value": m["value"]}
	if e, ok := m["error"].(map[string]any); ok {
		out["error_message"] = e["message"]
	}
	var res protocol.Result
	if b, err := json.Marshal(m); err == nil && json.Unmarshal(b, &res) == nil && res.Status != protocol.StatusOK {
		// The CLI prints the result as the runner wrote it; its context is
		// the Go library's for that result.
		out["context"] = (&master.ResultError{Result: &res}).ErrorContext()
	}
	if p, ok := m["output_path"].(string); ok {
		if b, err := os.ReadFile(filepath.Join(a.dir, p)); err == nil {
			out["output_b64"] = base64.StdEncoding.EncodeToString(b)
		}
	}
	return out
}

func (a *cliAd) stopLease() {
	if a.lease != nil {
		_ = a.lease.Process.Signal(syscall.SIGTERM)
		_ = a.lease.Wait()
		a.lease = nil
	}
}

// runPool runs master pool SUB with --pool (the directory holding the
// session: a pool scenario's session is POOL/s00) and --json.
func (a *cliAd) runPool(sub string, args ...string) (int, []byte, string) {
	return a.runArgv(append([]string{"pool", sub, "--pool", filepath.Dir(a.dir), "--json"}, args...))
}

func (a *cliAd) do(st step) map[string]any {
	switch st["op"] {
	case "pool_submit":
		args := commandArgs(st)
		if st["affinity"] != "" {
			args = append(args, "--affinity", st["affinity"])
		}
		code, out, stderr := a.runPool("submit", append(args, "--", st["payload"])...)
		m := doc(out)
		if code != 0 {
			return errOutcome(code, m, stderr)
		}
		return map[string]any{"outcome": "queued", "exit": 0, "cmd_id": m["cmd_id"], "session": m["session"]}
	case "pool_heal":
		code, out, stderr := a.runPool("heal")
		m := doc(out)
		if code != 0 {
			return errOutcome(code, m, stderr)
		}
		rep, _ := m["report"].(map[string]any)
		moved, _ := rep["moved"].([]any)
		return map[string]any{"outcome": "ok", "exit": 0, "moved": len(moved)}
	case "pool_wait":
		args := []string{}
		if v := st["wait_timeout_ms"]; v != "" {
			args = append(args, "--wait-timeout", v+"ms")
		}
		code, out, stderr := a.runPool("wait", append(args, st["id"])...)
		return a.ofResultDoc(code, doc(out), stderr)
	case "submit", "run":
		args := append([]string{"submit"}, commandArgs(st)...)
		if st["op"] == "run" {
			args = append(append(args, "--wait"), waitArgs(st)...)
		}
		code, out, stderr := a.run(append(args, "--", st["payload"])...)
		m := doc(out)
		if st["op"] == "run" {
			return a.ofResultDoc(code, m, stderr)
		}
		if code != 0 {
			return errOutcome(code, m, stderr)
		}
		return map[string]any{"outcome": "queued", "exit": 0, "cmd_id": m["cmd_id"], "reply": pick(m, "resume_cursor")}
	case "wait":
		code, out, stderr := a.run(append(append([]string{"wait"}, waitArgs(st)...), st["id"])...)
		return a.ofResultDoc(code, doc(out), stderr)
	case "cancel", "stop":
		args := append([]string{st["op"]}, waitArgs(st)...)
		if st["force"] == "1" {
			args = append(args, "--force")
		}
		if st["wait"] == "1" {
			args = append(args, "--wait")
		}
		if st["id"] != "" {
			args = append(args, st["id"])
		}
		code, out, stderr := a.run(args...)
		m := doc(out)
		if m["outcome"] == nil {
			return errOutcome(code, m, stderr)
		}
		// A reply was printed: its outcome, by the code the other masters
		// report for it.
		outcome := fmt.Sprint(m["outcome"])
		if outcome == "not_found" {
			outcome = "unknown_cmd_id"
		}
		res := map[string]any{"outcome": outcome, "exit": code}
		var rep protocol.ControlReply
		if code != 0 && json.Unmarshal(out, &rep) == nil {
			// The CLI prints a refused request's reply; its context is the
			// Go library's for that reply.
			res["context"] = (&master.RequestError{Reply: &rep}).ErrorContext()
		}
		return res
	case "send", "signal", "resize":
		var args []string
		switch st["op"] {
		case "send":
			args = append([]string{"send"}, waitArgs(st)...)
			if st["expect"] != "" {
				args = append(args, "--expect", st["expect"])
			}
			if v := st["expect_timeout_ms"]; v != "" {
				args = append(args, "--expect-timeout", v+"ms")
			}
			if v, raw := st["expect_timeout"]; raw {
				args = append(args, "--expect-timeout", v)
			}
			if st["secret"] == "1" {
				args = append(args, "--secret")
			}
			if st["no_newline"] == "1" {
				args = append(args, "--no-newline")
			}
			args = append(args, "--", st["id"], st["text"])
		case "signal":
			args = append(append([]string{"signal"}, waitArgs(st)...), "--", st["id"], st["sig"])
		default:
			args = append(append([]string{"resize"}, waitArgs(st)...), st["cols"], st["rows"])
		}
		code, out, stderr := a.run(args...)
		var rep protocol.ControlReply
		if m := doc(out); m == nil || m["outcome"] == nil || json.Unmarshal(out, &rep) != nil {
			return errOutcome(code, m, stderr)
		}
		// The reply was printed: its outcome, by the code the other
		// masters report for it.
		outcome := string(rep.Outcome)
		switch rep.Outcome {
		case protocol.OutcomeNotFound:
			outcome = "unknown_cmd_id"
		case protocol.OutcomeRejected:
			outcome = "rejected"
		}
		res := replyFields(map[string]any{"outcome": outcome, "exit": code}, &rep)
		if code != 0 { // A refused request's context, as for cancel above.
			res["context"] = (&master.RequestError{Reply: &rep}).ErrorContext()
		}
		return res
	case "status":
		code, out, stderr := a.run("status")
		m := doc(out)
		if m == nil || m["alive"] == nil {
			return errOutcome(code, m, stderr)
		}
		res := statusOutcome(m["alive"] == true, m["can_serve"] == true, fmt.Sprint(m["phase"]))
		res["exit"], res["reply"] = code, pick(m, "resume_cursor")
		return res
	case "lease":
		ttl := st["ttl_ms"] + "ms"
		if v, raw := st["ttl"]; raw {
			ttl = v
		}
		if st["keep"] != "1" {
			code, out, stderr := a.run("lease", "--ttl", ttl)
			if code != 0 {
				return errOutcome(code, doc(out), stderr)
			}
			return map[string]any{"outcome": "ok", "exit": 0}
		}
		a.lease = exec.Command(a.bin, "lease", "--session", a.dir, "--ttl", ttl, "--keep")
		a.lease.Stderr = os.Stderr
		if err := a.lease.Start(); err != nil {
			return map[string]any{"outcome": "io_error", "exit": 10, "message": err.Error()}
		}
		return map[string]any{"outcome": "ok", "exit": 0}
	case "lease_stop":
		a.stopLease()
		return map[string]any{"outcome": "ok", "exit": 0}
	case "waitfor":
		args := append([]string{"waitfor", "--from", st["from"]}, waitArgs(st)...)
		if st["from"] == "" {
			args[2] = "0"
		}
		code, out, stderr := a.run(append(args, "--", st["re"])...)
		m := doc(out)
		reply := map[string]any{} // The --json document but for its envelope: the one waitfor reply shape.
		for k, v := range m {
			if k != "protocol_version" && k != "error" {
				reply[k] = v
			}
		}
		if code != 0 || m["matched"] != true {
			res := errOutcome(code, m, stderr)
			if m != nil && m["resume_cursor"] != nil {
				res["resume_cursor"], res["reply"] = m["resume_cursor"], reply
			}
			if res["outcome"] == "exit_3" {
				res["outcome"] = "wait_timeout"
			}
			return res
		}
		span, _ := m["match_span"].(map[string]any)
		return map[string]any{"outcome": "matched", "exit": 0, "start": span["start"], "end": span["end"],
			"resume_cursor": m["resume_cursor"], "match_b64": base64.StdEncoding.EncodeToString([]byte(fmt.Sprint(m["match_text"]))),
			"reply": reply}
	case "output":
		args := []string{"output"}
		for _, k := range []string{"offset", "length"} {
			if v := st[k]; v != "" {
				args = append(args, "--"+k, v)
			}
		}
		code, out, stderr := a.run(append(args, st["id"])...)
		m := doc(out)
		if code != 0 {
			return errOutcome(code, m, stderr)
		}
		text, _ := m["text"].(string)
		b := []byte(text)
		if d, ok := m["data_b64"].(string); ok {
			b, _ = base64.StdEncoding.DecodeString(d)
		}
		return map[string]any{"outcome": "ok", "exit": 0, "output_b64": base64.StdEncoding.EncodeToString(b)}
	case "withdraw":
		code, out, stderr := a.run("withdraw", st["id"])
		m := doc(out)
		if code != 0 || m["withdrawn"] != true {
			return errOutcome(code, m, stderr)
		}
		return map[string]any{"outcome": "withdrawn", "exit": 0}
	case "ready":
		args := []string{"ready"}
		if v := st["wait_timeout_ms"]; v != "" {
			args = append(args, "--wait-timeout", v+"ms")
		}
		if v := st["wait_for_runner_ms"]; v != "" {
			args = append(args, "--wait-for-runner", v+"ms")
		}
		code, out, stderr := a.run(args...)
		if code != 0 {
			return errOutcome(code, doc(out), stderr)
		}
		return map[string]any{"outcome": "ready", "exit": 0}
	}
	return map[string]any{"outcome": "usage", "exit": 2}
}

// commandArgs are the flags of a step's command options, the same for
// master submit and master pool submit (one table: commandFlags): raw
// values (timeout_s, max_output_bytes) as they are.
func commandArgs(st step) []string {
	var args []string
	for _, f := range []struct{ key, flag, unit string }{{"id", "--id", ""}, {"timeout_ms", "--timeout", "ms"},
		{"timeout_s", "--timeout", ""}, {"cancel_policy", "--cancel-policy", ""}, {"trace_id", "--trace-id", ""},
		{"max_output_bytes", "--max-output-bytes", ""}} {
		if v, ok := st[f.key]; ok {
			args = append(args, f.flag, v+f.unit)
		}
	}
	for k, v := range labelsOf(st["labels"]) {
		args = append(args, "--label", k+"="+v)
	}
	return args
}

// pick is the keys of m that are there (none of them: an empty map).
func pick(m map[string]any, keys ...string) map[string]any {
	out := map[string]any{}
	for _, k := range keys {
		if v, ok := m[k]; ok {
			out[k] = v
		}
	}
	return out
}

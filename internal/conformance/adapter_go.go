package conformance

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/skillpilot/skillpilot/master"
	"github.com/skillpilot/skillpilot/pool"
	"github.com/skillpilot/skillpilot/protocol"
)

// step is one decoded adapter line.
type step map[string]string

func parseStep(line string) step {
	words := strings.Fields(line)
	if len(words) == 0 {
		return nil
	}
	s := step{"op": words[0]}
	for _, w := range words[1:] {
		k, v, _ := strings.Cut(w, "=")
		if base, ok := strings.CutSuffix(k, "_b64"); ok {
			b, _ := base64.StdEncoding.DecodeString(v)
			k, v = base, string(b)
		}
		s[k] = v
	}
	return s
}

func (s step) ms(k string) time.Duration {
	n, err := strconv.ParseInt(s[k], 10, 64)
	if err != nil {
		return 0
	}
	return time.Duration(n) * time.Millisecond
}

// int64 is the step's integer value of k (0: absent or not a number).
func (s step) int64(k string) int64 {
	n, _ := strconv.ParseInt(s[k], 10, 64)
	return n
}

// notExpressible is the outcome of a raw value (timeout_s, ttl, cols...)
// that Go's typed API cannot take: a caller's code holding it would not
// compile, so the adapter refuses it as the other masters refuse it at
// run time (usage, exit 2).
func notExpressible(k, v string) map[string]any {
	return map[string]any{"outcome": "usage", "exit": 2, "message": fmt.Sprintf("%s %q: not a value of its Go type", k, v)}
}

// seconds is the raw value of k, in seconds, as the time.Duration a Go
// caller passes; ok false when no Duration holds it (not a number,
// infinite, NaN, out of range). A negative number is kept: the master
// judges it.
func (s step) seconds(k string) (d time.Duration, ok bool) {
	f, err := strconv.ParseFloat(s[k], 64)
	if err != nil || math.IsNaN(f) || math.Abs(f) > math.MaxInt64/1e9 {
		return 0, false
	}
	return time.Duration(f * 1e9), true
}

// integer is the raw value of k as a Go int64; ok false when none holds it.
func (s step) integer(k string) (int64, bool) {
	n, err := strconv.ParseInt(s[k], 10, 64)
	return n, err == nil
}

// serve runs an adapter loop: one step per stdin line, one JSON outcome per
// stdout line, until quit or end of input.
func serve(do func(step) map[string]any) int {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	enc := json.NewEncoder(os.Stdout)
	for in.Scan() {
		st := parseStep(in.Text())
		if st == nil {
			continue
		}
		if st["op"] == "quit" {
			break
		}
		_ = enc.Encode(do(st))
	}
	return 0
}

// goAdapter drives the Go library (package master) on the session dir.
func goAdapter(dir string) int {
	a := &goAd{dir: dir}
	defer a.stopLease()
	return serve(a.do)
}

type goAd struct {
	dir       string
	pool      *pool.Pool
	poolCmds  map[string]*master.Command // by cmd_id, from pool_submit
	s         *master.Session
	leaseStop context.CancelFunc
	leaseErrs <-chan error
}

func (a *goAd) session() (*master.Session, error) {
	if a.s == nil {
		s, err := master.Open(a.dir)
		if err != nil {
			return nil, err
		}
		a.s = s
	}
	return a.s, nil
}

func (a *goAd) stopLease() {
	if a.leaseStop != nil {
		a.leaseStop()
		for range a.leaseErrs { // Drained until KeepLease closes it.
		}
		a.leaseStop = nil
	}
}

// ofResult is the outcome of a command with a result.
func ofResult(c *master.Command, r *protocol.Result) map[string]any {
	out := map[string]any{"outcome": string(r.Status), "exit": statusExit(r.Status), "cmd_id": r.CmdID, "value": r.Value}
	if r.Error != nil {
		out["error_message"] = r.Error.Message
	}
	if r.Status != protocol.StatusOK {
		out["context"] = master.ErrorContext(&master.ResultError{Result: r})
	}
	if b, err := c.Output(0, 0); err == nil {
		out["output_b64"] = base64.StdEncoding.EncodeToString(b)
	}
	return out
}

func statusExit(s protocol.Status) int {
	switch s {
	case protocol.StatusOK:
		return 0
	case protocol.StatusTimeout:
		return 3
	case protocol.StatusCancelled:
		return 4
	}
	return 1
}

// ofError is the outcome of an error: its stable code and exit code.
func ofError(err error) map[string]any {
	code, exit := master.Classify(err)
	out := map[string]any{"outcome": code, "exit": exit, "message": err.Error()}
	if ctx := master.ErrorContext(err); len(ctx) > 0 {
		out["context"] = ctx
	}
	return out
}

func withTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return context.WithCancel(context.Background())
	}
	return context.WithTimeout(context.Background(), d)
}

func (a *goAd) do(st step) map[string]any {
	if strings.HasPrefix(st["op"], "pool_") {
		return a.poolDo(st)
	}
	s, err := a.session()
	if err != nil {
		return ofError(err)
	}
	s.WaitForRunner = st.ms("wait_for_runner_ms")
	ctx, cancel := withTimeout(st.ms("wait_timeout_ms"))
	defer cancel()
	switch st["op"] {
	case "submit", "run":
		so, bad := st.submitOptions()
		if bad != nil {
			return bad
		}
		c, err := s.Submit(ctx, st["payload"], so)
		if err != nil {
			return ofError(err)
		}
		if st["op"] == "submit" {
			return map[string]any{"outcome": "queued", "exit": 0, "cmd_id": c.ID,
				"reply": map[string]any{"resume_cursor": c.ResumeCursor}}
		}
		return a.wait(ctx, c)
	case "wait":
		c, err := s.Command(st["id"])
		if err != nil {
			return ofError(err)
		}
		return a.wait(ctx, c)
	case "cancel":
		var rep *protocol.ControlReply
		if st["id"] == "" {
			rep, err = s.CancelCurrent(ctx)
		} else {
			rep, err = s.Cancel(ctx, st["id"])
		}
		if err != nil {
			return ofError(err)
		}
		return map[string]any{"outcome": string(rep.Outcome), "exit": 0}
	case "stop":
		mode := protocol.StopGraceful
		if st["force"] == "1" {
			mode = protocol.StopForce
		}
		p, err := s.Stop(ctx, mode)
		if err != nil {
			return ofError(err)
		}
		var rep *protocol.ControlReply
		if st["wait"] == "1" {
			rep, err = p.Wait(ctx)
		} else {
			rep, err = p.Reply(ctx)
		}
		if err != nil {
			return ofError(err)
		}
		return map[string]any{"outcome": string(rep.Outcome), "exit": 0}
	case "status":
		stat, err := s.Status(ctx)
		if err != nil {
			return ofError(err)
		}
		out := statusOutcome(stat.Alive, stat.CanServe, string(stat.Phase))
		out["reply"] = map[string]any{"resume_cursor": stat.ResumeCursor}
		return out
	case "lease":
		ttl := st.ms("ttl_ms")
		if _, raw := st["ttl"]; raw {
			var ok bool
			if ttl, ok = st.seconds("ttl"); !ok {
				return notExpressible("ttl", st["ttl"])
			}
		}
		if st["keep"] == "1" {
			lctx, lcancel := context.WithCancel(context.Background())
			a.leaseStop, a.leaseErrs = lcancel, s.KeepLease(lctx, ttl)
		} else if _, err := s.WriteLease("conformance", ttl); err != nil {
			return ofError(err)
		}
		return map[string]any{"outcome": "ok", "exit": 0}
	case "lease_stop":
		a.stopLease()
		return map[string]any{"outcome": "ok", "exit": 0}
	case "waitfor":
		re, err := regexp.Compile(st["re"])
		if err != nil {
			return ofError(err)
		}
		from, _ := strconv.ParseInt(st["from"], 10, 64)
		m, err := s.WaitFor(ctx, re, from)
		var reply map[string]any // The Match as it marshals: the one waitfor reply shape.
		if b, jerr := json.Marshal(m); jerr == nil {
			_ = json.Unmarshal(b, &reply)
		}
		if err != nil {
			out := ofError(err)
			out["resume_cursor"], out["reply"] = m.ResumeCursor, reply
			return out
		}
		return map[string]any{"outcome": "matched", "exit": 0, "start": m.Start, "end": m.End,
			"resume_cursor": m.ResumeCursor, "match_b64": base64.StdEncoding.EncodeToString([]byte(m.Text)), "reply": reply}
	case "send":
		data := st["text"]
		if st["no_newline"] != "1" {
			data += "\n"
		}
		et := st.ms("expect_timeout_ms")
		if _, raw := st["expect_timeout"]; raw {
			var ok bool
			if et, ok = st.seconds("expect_timeout"); !ok {
				return notExpressible("expect_timeout", st["expect_timeout"])
			}
		}
		rep, err := s.Send(ctx, st["id"], []byte(data), master.SendOptions{Expect: st["expect"],
			ExpectTimeout: et, Secret: st["secret"] == "1"})
		return ofReply(rep, err)
	case "signal":
		return ofReply(s.Signal(ctx, st["id"], st["sig"]))
	case "resize":
		cols, ok1 := st.integer("cols")
		rows, ok2 := st.integer("rows")
		switch {
		case !ok1:
			return notExpressible("cols", st["cols"])
		case !ok2:
			return notExpressible("rows", st["rows"])
		}
		return ofReply(s.Resize(ctx, int(cols), int(rows)))
	case "output":
		c, err := s.Command(st["id"])
		if err != nil {
			return ofError(err)
		}
		b, err := c.Output(st.int64("offset"), st.int64("length"))
		if err != nil && !errors.Is(err, os.ErrNotExist) { // Not there yet: no output so far.
			return ofError(err)
		}
		return map[string]any{"outcome": "ok", "exit": 0, "output_b64": base64.StdEncoding.EncodeToString(b)}
	case "withdraw":
		if _, err := s.Withdraw(st["id"]); err != nil {
			return ofError(err)
		}
		return map[string]any{"outcome": "withdrawn", "exit": 0}
	case "ready":
		if st["wait_timeout_ms"] == "" {
			cancel()
			ctx, cancel = withTimeout(time.Minute)
			defer cancel()
		}
		if _, err := master.WaitReady(ctx, a.dir, master.WaitOptions{WaitForRunner: st.ms("wait_for_runner_ms")}); err != nil {
			return ofError(err)
		}
		return map[string]any{"outcome": "ready", "exit": 0}
	}
	return map[string]any{"outcome": "usage", "exit": 2}
}

func (a *goAd) wait(ctx context.Context, c *master.Command) map[string]any {
	r, err := c.Wait(ctx, master.WaitOptions{})
	var re *master.ResultError
	if r != nil && (err == nil || errors.As(err, &re)) {
		return ofResult(c, r)
	}
	return ofError(err)
}

// ofReply is the outcome of a send, signal or resize: delivered with the
// reply's counts, or the error's code with the named command's state.
func ofReply(rep *protocol.ControlReply, err error) map[string]any {
	if err != nil {
		out := ofError(err)
		var re *master.RequestError
		if errors.As(err, &re) && re.Reply.CmdState != "" {
			out["cmd_state"] = re.Reply.CmdState
		}
		return out
	}
	return replyFields(map[string]any{"outcome": string(rep.Outcome), "exit": 0}, rep)
}

func replyFields(out map[string]any, rep *protocol.ControlReply) map[string]any {
	for k, v := range map[string]*int64{"bytes": rep.Bytes, "match_start": rep.MatchStart, "match_end": rep.MatchEnd} {
		if v != nil {
			out[k] = *v
		}
	}
	if rep.CmdState != "" {
		out["cmd_state"] = rep.CmdState
	}
	return out
}

func statusOutcome(alive, canServe bool, phase string) map[string]any {
	out := map[string]any{"outcome": "ok", "exit": 0, "alive": alive, "phase": phase, "can_serve": canServe}
	switch {
	case !alive:
		out["outcome"], out["exit"] = "not_alive", 5
	case !canServe:
		out["outcome"], out["exit"] = "cannot_serve", 5
	}
	return out
}

// labelsOf reads a step's labels=k=v,k2=v2 (nil for none).
func labelsOf(s string) map[string]string {
	if s == "" {
		return nil
	}
	m := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

// submitOptions are the step's options of a command (submit, run and
// pool_submit alike: one table), or the outcome of a raw value Go cannot
// hold. timeout_s is raw seconds, timeout_ms milliseconds.
func (s step) submitOptions() (master.SubmitOptions, map[string]any) {
	so := master.SubmitOptions{CmdID: s["id"], Timeout: s.ms("timeout_ms"), TraceID: s["trace_id"],
		Labels: labelsOf(s["labels"]), CancelPolicy: protocol.CancelPolicy(s["cancel_policy"])}
	if _, raw := s["timeout_s"]; raw {
		var ok bool
		if so.Timeout, ok = s.seconds("timeout_s"); !ok {
			return so, notExpressible("timeout_s", s["timeout_s"])
		}
	}
	if _, raw := s["max_output_bytes"]; raw {
		var ok bool
		if so.MaxOutputBytes, ok = s.integer("max_output_bytes"); !ok {
			return so, notExpressible("max_output_bytes", s["max_output_bytes"])
		}
	}
	return so, nil
}

// poolDo runs pool_submit and pool_wait on the pool holding the session
// (a pool scenario's session is POOL/s00).
func (a *goAd) poolDo(st step) map[string]any {
	if a.pool == nil {
		p, err := pool.Open(filepath.Dir(a.dir))
		if err != nil {
			return ofError(err)
		}
		a.pool, a.poolCmds = p, map[string]*master.Command{}
	}
	ctx, cancel := withTimeout(st.ms("wait_timeout_ms"))
	defer cancel()
	switch st["op"] {
	case "pool_submit":
		so, bad := st.submitOptions()
		if bad != nil {
			return bad
		}
		pc, err := a.pool.Submit(ctx, st["payload"], pool.SubmitOptions{SubmitOptions: so, Affinity: st["affinity"]})
		if err != nil {
			return ofError(err)
		}
		a.poolCmds[pc.ID] = pc.Command
		return map[string]any{"outcome": "queued", "exit": 0, "cmd_id": pc.ID, "session": pc.Session}
	case "pool_heal":
		rep, err := a.pool.Heal(ctx)
		if err != nil {
			return ofError(err)
		}
		return map[string]any{"outcome": "ok", "exit": 0, "moved": len(rep.Moved)}
	case "pool_wait":
		c := a.poolCmds[st["id"]]
		if c == nil {
			return map[string]any{"outcome": "usage", "exit": 2}
		}
		r, err := a.pool.WaitCommand(ctx, c)
		var re *master.ResultError
		if r != nil && (err == nil || errors.As(err, &re)) {
			_, final := a.pool.Locate(c)
			return ofResult(final, r)
		}
		return ofError(err)
	}
	return map[string]any{"outcome": "usage", "exit": 2}
}

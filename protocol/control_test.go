package protocol

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// A malformed legacy cancel.json must do nothing but report;
// only an empty file means the current command, and a request that names a
// cmd_id never falls back to the current command.
func TestParseCancelLegacy(t *testing.T) {
	for _, tc := range []struct {
		in    string
		scope CancelScope
		id    string
		bad   string // substring of the error; "" when valid
	}{
		{"", ScopeCurrent, "", ""},
		{" \n\t", ScopeCurrent, "", ""},
		{`{"cmd_id":"x"}`, ScopeCmdID, "x", ""},
		{`{"scope":"cmd_id","cmd_id":"x"}`, ScopeCmdID, "x", ""},
		{`{"scope":"current"}`, ScopeCurrent, "", ""},
		{`{"scope":"current","cmd_id":null,"ts":"1707221123456"}`, ScopeCurrent, "", ""}, // the seed's example
		{`{"scope":"current","cmd_id":""}`, ScopeCurrent, "", ""},
		{`{"cmd_id":"x","ts":1707221123456}`, ScopeCmdID, "x", ""},
		{`{"cmd_id":"x","ts":"2024-02-06T12:05:23"}`, ScopeCmdID, "x", ""}, // ISO 8601 without offset
		{`{"cmd_id":"x","ts":"2024-02-06T12:05:23.5+01:00"}`, ScopeCmdID, "x", ""},
		{`{"scope":"everything","cmd_id":"x"}`, "", "", "scope"},
		{`{"scope":"cmd_id","cmd_id":null}`, "", "", "cmd_id"},
		{`{"cmd_id":null}`, "", "", "cmd_id"},
		{`{"cmd_id":42}`, "", "", "cmd_id"},
		{`{"scope":"cmd_id"}`, "", "", "cmd_id"},
		{`{"scope":"current","cmd_id":"x"}`, "", "", "cmd_id"},
		{`{"scope":null}`, "", "", "scope"},
		{`{}`, "", "", "cmd_id"},
		{`{"cmd_id":"../x"}`, "", "", "cmd_id"},
		{`{"cmd_id":"x","ts":"yesterday"}`, "", "", "ts"},
		{`{"cmd_id":"x","ts":1e30}`, "", "", "ts"},
		{`[1,2]`, "", "", "object"},
		{`"current"`, "", "", "object"},
		{`{"cmd_id":"x"`, "", "", "JSON"},
	} {
		req, err := ParseCancel([]byte(tc.in))
		if tc.bad != "" {
			if err == nil || !strings.Contains(err.Error(), tc.bad) {
				t.Errorf("%s: err %v, want one about %s", tc.in, err, tc.bad)
			}
			if req.Scope != "" || req.CmdID != "" {
				t.Errorf("%s: a rejected request must carry nothing to act on, got %+v", tc.in, req)
			}
			continue
		}
		if err != nil || req.Scope != tc.scope || req.CmdID != tc.id {
			t.Errorf("%s: %+v %v, want %s %q", tc.in, req, err, tc.scope, tc.id)
		}
	}
}

// A ts the runner cannot read must not turn a force stop into a
// graceful one; it is rejected.
func TestParseStopLegacy(t *testing.T) {
	for _, tc := range []struct {
		in   string
		mode StopMode
		bad  bool
	}{
		{"", StopGraceful, false},
		{"\n", StopGraceful, false},
		{`{}`, StopGraceful, false},
		{`{"mode":"force"}`, StopForce, false},
		{`{"mode":"graceful","ts":"1707221123456"}`, StopGraceful, false},
		{`{"mode":"force","ts":"2024-02-06T12:05:23"}`, StopForce, false},
		{`{"mode":"force","ts":"soon"}`, "", true},
		{`{"mode":"now"}`, "", true},
		{`{"mode":null}`, "", true},
		{`{"mode":1}`, "", true},
		{`stop`, "", true},
	} {
		req, err := ParseStop([]byte(tc.in))
		if (err != nil) != tc.bad || req.Mode != tc.mode {
			t.Errorf("%s: %+v %v", tc.in, req, err)
		}
	}
}

func TestRequestName(t *testing.T) {
	n := RequestName(12, "0190-ab")
	if n != "req_0000000012_0190-ab.json" {
		t.Fatal(n)
	}
	if seq, id, err := ParseRequestName(n); err != nil || seq != 12 || id != "0190-ab" {
		t.Fatal(seq, id, err)
	}
	if seq, id, err := ParseRequestName("req_7_x.json"); err != nil || seq != 7 || id != "x" {
		t.Fatal(seq, id, err)
	}
	for _, bad := range []string{"req_x.json", "req__x.json", "req_1_.json", "req_1_a b.json", "req_1_x.JSON", "cmd_1_x.json", "req_-1_x.json", "req_1_..json"} {
		if _, _, err := ParseRequestName(bad); !errors.Is(err, ErrBadRequestName) {
			t.Errorf("%s accepted", bad)
		}
	}
}

func TestParseControlRequest(t *testing.T) {
	name := RequestName(5, "r1")
	head := `"protocol_version":1,"req_id":"r1","seq":5,`
	for _, tc := range []struct {
		body string
		bad  string // field the error names; "" when valid
		chk  func(*ControlRequest) bool
	}{
		{`{` + head + `"op":"cancel","cmd_id":"c1"}`, "", func(r *ControlRequest) bool { return r.Scope == ScopeCmdID && r.CmdID == "c1" }},
		{`{` + head + `"op":"cancel","scope":"current","session_id":"s"}`, "", func(r *ControlRequest) bool { return r.Scope == ScopeCurrent && r.SessionID == "s" }},
		{`{"req_id":"r1","seq":5,"op":"cancel","cmd_id":"c1","session_id":null,"ts":null}`, "", nil},
		{`{` + head + `"op":"stop"}`, "", func(r *ControlRequest) bool { return r.Mode == StopGraceful }},
		{`{` + head + `"op":"stop","mode":"force"}`, "", func(r *ControlRequest) bool { return r.Mode == StopForce }},
		{`{` + head + `"op":"send","cmd_id":"c1","data_b64":"aGkK","secret":true,"expect":"^ok$","expect_timeout_ms":10,"expect_from":3}`, "",
			func(r *ControlRequest) bool {
				return string(r.Data) == "hi\n" && r.Secret && *r.ExpectTimeoutMS == 10 && *r.ExpectFrom == 3
			}},
		{`{` + head + `"op":"signal","cmd_id":"c1","signal":"USR1"}`, "", func(r *ControlRequest) bool { return r.Signal == "USR1" }},
		{`{` + head + `"op":"resize","cols":200,"rows":50}`, "", func(r *ControlRequest) bool { return r.Cols == 200 && r.Rows == 50 }},
		{`{` + head + `"op":"resize","cols":200,"rows":50,"cmd_id":"any"}`, "", nil},
		{`{` + head + `"op":"explode"}`, "op", nil},
		{`{` + head + `"op":null}`, "op", nil},
		{`{"req_id":"r1","seq":5}`, "op", nil},
		{`{"req_id":"r2","seq":5,"op":"stop"}`, "req_id", nil},
		{`{"req_id":"r1","seq":6,"op":"stop"}`, "seq", nil},
		{`{"req_id":"r1","seq":5.0,"op":"stop"}`, "seq", nil},
		{`{"req_id":"r1","op":"stop"}`, "seq", nil},
		{`{"seq":5,"op":"stop"}`, "req_id", nil},
		{`{"protocol_version":2,"req_id":"r1","seq":5,"op":"stop"}`, "protocol_version", nil},
		{`{` + head + `"op":"stop","session_id":7}`, "session_id", nil},
		{`{` + head + `"op":"stop","ts":"never"}`, "ts", nil},
		{`{` + head + `"op":"cancel","scope":"bogus","cmd_id":"c1"}`, "scope", nil},
		{`{` + head + `"op":"cancel","cmd_id":null}`, "cmd_id", nil},
		{`{` + head + `"op":"cancel"}`, "cmd_id", nil},
		{`{` + head + `"op":"stop","mode":"later"}`, "mode", nil},
		{`{` + head + `"op":"send","data_b64":"aGk="}`, "cmd_id", nil},
		{`{` + head + `"op":"send","cmd_id":"c1"}`, "data_b64", nil},
		{`{` + head + `"op":"send","cmd_id":"c1","data_b64":"not base64!"}`, "data_b64", nil},
		{`{` + head + `"op":"send","cmd_id":"c1","data_b64":"aGk=","expect":"("}`, "expect", nil},
		{`{` + head + `"op":"send","cmd_id":"c1","data_b64":"aGk=","expect_timeout_ms":-1}`, "expect_timeout_ms", nil},
		{`{` + head + `"op":"send","cmd_id":"c1","data_b64":"aGk=","secret":"yes"}`, "secret", nil},
		{`{` + head + `"op":"signal","cmd_id":"c1","signal":"STOP"}`, "signal", nil}, // KILL and TERM are accepted; STOP is not.
		{`{` + head + `"op":"signal","cmd_id":"c1","signal":"SIGINT"}`, "signal", nil},
		{`{` + head + `"op":"signal","signal":"INT"}`, "cmd_id", nil},
		{`{` + head + `"op":"resize","cols":0,"rows":50}`, "cols", nil},
		{`{` + head + `"op":"resize","cols":80,"rows":10001}`, "rows", nil},
		{`{` + head + `"op":"resize","cols":80}`, "rows", nil},
	} {
		req, err := ParseControlRequest(name, []byte(tc.body))
		if tc.bad != "" {
			var ve *ValidationError
			if !errors.As(err, &ve) || ve.Field != tc.bad {
				t.Errorf("%s: err %v, want one about %s", tc.body, err, tc.bad)
			}
			if req == nil || req.ReqID != "r1" || req.Seq != 5 {
				t.Errorf("%s: a rejected request must still carry its name's req_id and seq: %+v", tc.body, req)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.body, err)
			continue
		}
		if tc.chk != nil && !tc.chk(req) {
			t.Errorf("%s: %+v", tc.body, req)
		}
	}
	if _, err := ParseControlRequest(name, []byte(`{"req_id":`)); !errors.Is(err, ErrIncomplete) {
		t.Errorf("half a file: %v", err)
	}
	if _, err := ParseControlRequest(name, nil); !errors.Is(err, ErrIncomplete) {
		t.Errorf("empty file: %v", err)
	}
	big := `{` + head + `"op":"send","cmd_id":"c1","data_b64":"` + strings.Repeat("A", MaxRequestSize) + `"}`
	if _, err := ParseControlRequest(name, []byte(big)); err == nil {
		t.Error("oversized request accepted")
	}
}

func TestTimeISOWithoutOffset(t *testing.T) {
	var tm Time
	if err := tm.Parse("2024-02-06T12:05:23.456"); err != nil || !tm.Equal(time.UnixMilli(1707221123456)) {
		t.Fatalf("%v %v (taken as UTC)", tm, err)
	}
	if err := tm.Parse("2024-02-06 12:05:23"); err != nil || tm.Unix() != 1707221123 {
		t.Fatalf("%v %v", tm, err)
	}
	for _, bad := range []string{"99999999999999999999", "2024-13-01T00:00:00", "1e400"} {
		if err := tm.Parse(bad); err == nil {
			t.Errorf("%s accepted: %v", bad, tm)
		}
	}
}

// FuzzParseControlRequest: any bytes under any name give a request or a
// *ValidationError, never a panic; an accepted request agrees with its name,
// carries a valid op and the fields that op needs, survives a round trip
// through JSON, and a cancel that names a cmd_id is never scope current.
func FuzzParseControlRequest(f *testing.F) {
	f.Add("req_1_a.json", []byte(`{"req_id":"a","seq":1,"op":"cancel","cmd_id":"x"}`))
	f.Add("req_1_a.json", []byte(`{"req_id":"a","seq":1,"op":"cancel","scope":"current","cmd_id":null}`))
	f.Add("req_2_b.json", []byte(`{"req_id":"b","seq":2,"op":"send","cmd_id":"x","data_b64":"aGk=","expect":"a+"}`))
	f.Add("req_3_c.json", []byte(`{"req_id":"c","seq":3,"op":"resize","cols":1,"rows":10000}`))
	f.Add("req_4_d.json", []byte(`{"req_id":"d","seq":4,"op":"signal","cmd_id":"x","signal":"INT","ts":"2024-02-06T12:05:23"}`))
	f.Add("req_5_e.json", []byte(`{"req_id":"e","seq":5,"op":"stop","mode":"force","session_id":"s"}`))
	f.Fuzz(func(t *testing.T, name string, body []byte) {
		req, err := ParseControlRequest(name, body)
		if err != nil {
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		seq, id, nerr := ParseRequestName(name)
		if nerr != nil || req.Seq != seq || req.ReqID != id {
			t.Fatalf("request %+v does not match its name %q", req, name)
		}
		switch req.Op {
		case OpCancel:
			if req.Scope == ScopeCurrent && req.CmdID != "" || req.Scope == ScopeCmdID && !ValidCmdID(req.CmdID) {
				t.Fatalf("cancel %+v", req)
			}
		case OpStop:
			if req.Mode != StopGraceful && req.Mode != StopForce {
				t.Fatalf("stop %+v", req)
			}
		case OpSend:
			if !ValidCmdID(req.CmdID) || len(req.Data) > MaxSendBytes {
				t.Fatalf("send %+v", req)
			}
		case OpSignal:
			if !ValidCmdID(req.CmdID) || req.Signal == "" {
				t.Fatalf("signal %+v", req)
			}
		case OpResize:
			if req.Cols < 1 || req.Rows < 1 || req.Cols > MaxResize || req.Rows > MaxResize {
				t.Fatalf("resize %+v", req)
			}
		default:
			t.Fatalf("op %q accepted", req.Op)
		}
		b, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		again, err := ParseControlRequest(name, b)
		if err != nil {
			t.Fatalf("round trip of %s: %v", b, err)
		}
		if again.Op != req.Op || again.CmdID != req.CmdID || again.Scope != req.Scope || again.Mode != req.Mode || string(again.Data) != string(req.Data) {
			t.Fatalf("round trip changed %+v into %+v", req, again)
		}
	})
}

// FuzzParseCancel: a legacy cancel file either parses into a request that
// says exactly what to cancel, or is an error carrying nothing to act on.
func FuzzParseCancel(f *testing.F) {
	for _, s := range []string{"", `{"cmd_id":"x"}`, `{"scope":"current","cmd_id":null}`, `{"scope":"x"}`, `{"cmd_id":null}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := ParseCancel(b)
		if err != nil {
			if req != (CancelRequest{}) {
				t.Fatalf("error %v with %+v", err, req)
			}
			return
		}
		switch req.Scope {
		case ScopeCurrent:
			if req.CmdID != "" {
				t.Fatalf("%+v", req)
			}
		case ScopeCmdID:
			if !ValidCmdID(req.CmdID) {
				t.Fatalf("%+v", req)
			}
		default:
			t.Fatalf("%+v", req)
		}
	})
}

package protocol

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"regexp"
	"slices"
	"unicode/utf8"
)

// ParseControlRequest decodes and validates ctl/<name>, a mailbox request.
// Errors are *ValidationError and say what to fix; an error wrapping
// ErrIncomplete means the file is empty or not complete JSON (a writer may
// still be writing it). On a validation error the returned request still
// carries what could be read (ReqID and Seq from the name, Op if valid), so
// that the reply can name it.
func ParseControlRequest(name string, data []byte) (*ControlRequest, error) {
	seq, id, err := ParseRequestName(name)
	if err != nil {
		return nil, invalid("", "file name %q is not req_<seq>_<req_id>.json", name)
	}
	req := &ControlRequest{ProtocolVersion: Version, ReqID: id, Seq: seq}
	if len(data) > MaxRequestSize {
		return req, invalid("", "file is %d bytes, the limit is %d", len(data), MaxRequestSize)
	}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || !json.Valid(trimmed) {
		return req, incomplete("%s", jsonProblem(trimmed, "ctl/"))
	}
	if !utf8.Valid(trimmed) {
		return req, invalid("", "not valid UTF-8")
	}
	o, err := decodeObject(trimmed, "a request")
	if err != nil {
		return req, err
	}
	if op, ok, err := o.str("op", false); err != nil {
		return req, err
	} else if !ok {
		return req, invalid("op", "required field is missing")
	} else if !slices.Contains([]Op{OpCancel, OpStop, OpSend, OpSignal, OpResize}, Op(op)) {
		req.Op = Op(op) // The reply says which op was refused.
		return req, invalid("op", "unknown op %q (want cancel, stop, send, signal or resize)", op)
	} else {
		req.Op = Op(op)
	}
	if err := req.decodeCommon(o, seq, id); err != nil {
		return req, err
	}
	switch req.Op {
	case OpCancel:
		err = req.decodeCancel(o)
	case OpStop:
		req.Mode, err = stopMode(o)
	case OpSend:
		err = req.decodeSend(o)
	case OpSignal:
		err = req.decodeSignal(o)
	case OpResize:
		err = req.decodeResize(o)
	}
	return req, err
}

// decodeCommon checks the fields every request has.
func (req *ControlRequest) decodeCommon(o object, seq int64, id string) error {
	if err := checkVersion(o["protocol_version"]); err != nil {
		return err
	}
	rid, ok, err := o.str("req_id", false)
	if err != nil {
		return err
	}
	if !ok {
		return invalid("req_id", "required field is missing")
	}
	if rid != id {
		return invalid("req_id", "is %q but the file name says %q", rid, id)
	}
	n, ok, err := o.integer("seq")
	if err != nil {
		return err
	}
	if !ok {
		return invalid("seq", "required field is missing")
	}
	if n != seq {
		return invalid("seq", "is %d but the file name says %d", n, seq)
	}
	if req.SessionID, _, err = o.str("session_id", true); err != nil {
		return err
	}
	if req.Submitter, _, err = o.str("submitter", true); err != nil {
		return err
	}
	req.TS, err = o.time("ts")
	return err
}

func (req *ControlRequest) decodeCancel(o object) error {
	c, err := cancelFields(o)
	req.Scope, req.CmdID = c.Scope, c.CmdID
	return err
}

// cancelFields reads scope and cmd_id of a cancel request (mailbox or
// legacy). A request that names a cmd_id never means the current command:
// with scope cmd_id, or without scope, cmd_id must be a valid cmd_id; scope
// current takes no cmd_id (null or "" are accepted, as the seed writes them).
func cancelFields(o object) (CancelRequest, error) {
	scope, hasScope, err := o.str("scope", false)
	if err != nil {
		return CancelRequest{}, err
	}
	if hasScope && scope != string(ScopeCurrent) && scope != string(ScopeCmdID) {
		return CancelRequest{}, invalid("scope", "unknown scope %q (want cmd_id or current)", scope)
	}
	current := hasScope && scope == string(ScopeCurrent)
	id, hasID, err := o.str("cmd_id", current)
	if err != nil {
		return CancelRequest{}, err
	}
	if current {
		if id != "" {
			return CancelRequest{}, invalid("cmd_id", "scope current cancels whatever runs; it takes no cmd_id (use scope cmd_id to name one)")
		}
		return CancelRequest{Scope: ScopeCurrent}, nil
	}
	if !hasID {
		return CancelRequest{}, invalid("cmd_id", "required unless scope is current (only an empty file means the current command)")
	}
	if !ValidCmdID(id) {
		return CancelRequest{}, invalid("cmd_id", "%q is not 1-%d characters of [A-Za-z0-9._-]", id, MaxCmdIDLen)
	}
	return CancelRequest{Scope: ScopeCmdID, CmdID: id}, nil
}

// stopMode reads the mode of a stop request; absent means graceful.
func stopMode(o object) (StopMode, error) {
	m, ok, err := o.str("mode", false)
	if err != nil {
		return "", err
	}
	switch {
	case !ok:
		return StopGraceful, nil
	case m == string(StopGraceful), m == string(StopForce):
		return StopMode(m), nil
	}
	return "", invalid("mode", "unknown mode %q (want graceful or force)", m)
}

// requiredCmdID reads a cmd_id that must be there.
func requiredCmdID(o object) (string, error) {
	id, ok, err := o.str("cmd_id", false)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", invalid("cmd_id", "required field is missing")
	}
	if !ValidCmdID(id) {
		return "", invalid("cmd_id", "%q is not 1-%d characters of [A-Za-z0-9._-]", id, MaxCmdIDLen)
	}
	return id, nil
}

func (req *ControlRequest) decodeSend(o object) error {
	var err error
	if req.CmdID, err = requiredCmdID(o); err != nil {
		return err
	}
	b64, ok, err := o.str("data_b64", false)
	if err != nil {
		return err
	}
	if !ok {
		return invalid("data_b64", "required field is missing")
	}
	if base64.StdEncoding.DecodedLen(len(b64)) > MaxSendBytes+3 {
		return invalid("data_b64", "more than %d bytes", MaxSendBytes)
	}
	if req.Data, err = base64.StdEncoding.DecodeString(b64); err != nil {
		return invalid("data_b64", "not standard base64: %v", err)
	}
	if len(req.Data) > MaxSendBytes {
		return invalid("data_b64", "%d bytes, the limit is %d", len(req.Data), MaxSendBytes)
	}
	req.DataB64 = b64
	if req.Secret, err = o.boolean("secret"); err != nil {
		return err
	}
	if req.Expect, _, err = o.str("expect", true); err != nil {
		return err
	}
	if req.Expect != "" {
		if _, rerr := regexp.Compile(req.Expect); rerr != nil {
			return invalid("expect", "not a valid RE2 regular expression: %v", rerr)
		}
	}
	if n, ok, err := o.integer("expect_timeout_ms"); err != nil {
		return err
	} else if ok {
		if n < 0 || n > maxExpectTimeoutMS {
			return invalid("expect_timeout_ms", "must be 0 to %d", maxExpectTimeoutMS)
		}
		req.ExpectTimeoutMS = &n
	}
	if n, ok, err := o.integer("expect_from"); err != nil {
		return err
	} else if ok {
		if n < 0 {
			return invalid("expect_from", "must not be negative")
		}
		req.ExpectFrom = &n
	}
	return nil
}

func (req *ControlRequest) decodeSignal(o object) error {
	var err error
	if req.CmdID, err = requiredCmdID(o); err != nil {
		return err
	}
	sig, ok, err := o.str("signal", false)
	if err != nil {
		return err
	}
	if !ok {
		return invalid("signal", "required field is missing")
	}
	if !slices.Contains(Signals, sig) {
		return invalid("signal", "unknown signal %q (want one of %v)", sig, Signals)
	}
	req.Signal = sig
	return nil
}

func (req *ControlRequest) decodeResize(o object) error {
	for _, f := range []struct {
		name string
		dst  *int
	}{{"cols", &req.Cols}, {"rows", &req.Rows}} {
		n, ok, err := o.integer(f.name)
		if err != nil {
			return err
		}
		if !ok {
			return invalid(f.name, "required field is missing")
		}
		if n < 1 || n > MaxResize {
			return invalid(f.name, "must be 1 to %d", MaxResize)
		}
		*f.dst = int(n)
	}
	id, ok, err := o.str("cmd_id", true)
	if err != nil {
		return err
	}
	if ok && id != "" && !ValidCmdID(id) {
		return invalid("cmd_id", "%q is not 1-%d characters of [A-Za-z0-9._-]", id, MaxCmdIDLen)
	}
	req.CmdID = id
	return nil
}

// ErrBadRequestName reports a ctl/ file name that starts like a request
// (req_) but is not req_<seq>_<req_id>.json.
var ErrBadRequestName = errors.New("protocol: not a control request file name")

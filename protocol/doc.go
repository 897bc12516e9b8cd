// Package protocol defines the SkillPilot file protocol, version 1: the Go
// types of every file in a session directory, their validation, and the
// grammar of file names. It knows nothing about processes or watching; the
// runner and master packages compose it with package fsq.
//
// A session directory looks like this (PROTOCOL.md is the normative text):
//
//	session/
//	  queue/     cmd_<seq>_<cmd_id>.json   written by masters
//	  inflight/  cmd_<seq>_<cmd_id>.json   claimed by the runner (rename)
//	  result/    cmd_<seq>_<cmd_id>.json   written by the runner
//	  output/    cmd_<seq>_<cmd_id>.out    exactly what the command printed
//	  ctl/       req_<seq>_<req_id>.json   control requests (the mailbox); cancel.json,
//	             stop.json (the legacy single-slot forms)
//	  ctl/ack/   req_<seq>_<req_id>.json   the runner's reply to each request
//	  state/     state.json, heartbeat.json, lease.json, runner.lock
//	  seq/       one empty file per allocated seq (exclusive create)
//	  log/       session.out, meta.log, last_n_lines.txt, rejected/
//
// Only this package formats or parses file names.
//
// Guarantees: the parsers (ParseCommand, ParseControlRequest, the name
// grammar) accept any bytes without panicking (they are fuzzed) and answer
// every problem with a *ValidationError whose message names the field and
// what to fix; what they accept is valid and carries its defaults; one
// version rule (checkVersion) applies to commands and requests alike.
package protocol

// Version is the protocol version written into every file the runner and the
// masters produce, as "protocol_version".
const Version = 1

// Package conformance runs every SkillPilot master through one set of
// language-neutral scenarios against a real runner, with the same
// expectations: the Go library, the master CLI, the Python master, the Tcl
// master and a plain shell script written as docs/shell.md teaches.
//
// # Scenarios
//
// Each scenarios/*.txtar file is one scenario. Its comment says what it
// checks; a line "requires: --flag" in the comment names a runner flag the
// scenario needs. The file "steps" holds one step per line; other files
// (an --init script, say) can be named in runner flags as @file.
//
// Masters run under umask 022 (Run sets it), so a file a master creates
// without setting its mode shows the umask's narrowing.
//
// Every scenario ends, once its runner has stopped, with the
// session-invariant check (internal/sessioncheck) on the runner's side:
// each command has exactly one result, meta.log's cmd_begin and cmd_end
// pair up, nothing is left in inflight/ or tmp/, modes are right. A
// scenario that leaves its session mid-state on purpose says so in its
// comment, with the reason: "check: queued (why)" accepts commands left in
// queue/, "check: crashed (why)" a killed runner's leftovers (one command
// in inflight/ with an open cmd_begin, files in tmp/); "nocheck: why"
// skips the check and logs why.
//
// Harness steps, carried out by the driver on the runner's side:
//
//	runner [FLAG...]        start a runner on the session and wait until it is idle
//	runner! [FLAG...]       start a runner without waiting
//	kill-runner             SIGKILL the runner
//	freeze-runner           SIGSTOP the runner: alive (lock held) but its heartbeat late
//	thaw-runner             SIGCONT the runner
//	runner-exit CODE        wait for the runner to exit with CODE
//	running ID              wait until state.json says ID is running
//	printed ID TEXT         wait until ID's output file holds TEXT
//	write PATH CONTENT      write a session file (temp file + rename; its directory made if missing)
//	touch PATH              create an empty session file (as touch(1) does)
//	plant fifo|symlink ID   put a FIFO, or a symlink to a file elsewhere, where ID's result goes
//	event TYPE K=V...       wait for a meta.log event of TYPE with these fields
//	                        (K=V equal, K~=V contains, K>=N at least N;
//	                        K=>NAME captures the first match's K into $NAME)
//	count TYPE N            meta.log holds exactly N events of TYPE
//	json PATH K=V...        wait for a JSON file with these top-level fields
//	                        (wildcards in PATH's last element: exactly one file)
//	command ID K=V...       wait until ID's result names its command file
//	                        (command_path) and that file has these fields
//	files GLOB N            wait until exactly N session files match GLOB
//	take-back ID            withdraw queued ID as another master does (queue/ to withdrawn/)
//	reclaim ID              copy ID's command file back into inflight/ beside its result
//	                        (a runner between the result's rename and the claim's archiving)
//	remove GLOB             delete the session files matching GLOB (at least one)
//	truncate GLOB SIZE      cut the session files matching GLOB to SIZE bytes
//	absent TEXT             no file of the session holds TEXT (a secret)
//	mode GLOB PERM          every session file matching GLOB (at least one) has mode PERM (octal)
//	sleep DURATION          let time pass (only to age a liveness window)
//	remove-session          delete the session directory (rm -rf)
//
// A comment line "layout: pool" makes the session s00 of a pool directory
// (pool.json beside it, no respawn); "masters: go cli python tcl" limits
// the scenario to those masters.
//
// Master steps, sent to the master under test through its adapter:
//
//	> OP K=V... [-> EXPECT...]   run OP and check its outcome
//	&> OP K=V...                 start OP; harness steps may follow
//	<- EXPECT...                 the outcome of the started OP
//
// OP is submit, run, wait, output (id=ID, offset=N, length=N: a byte
// range of the command's output; outcome ok with output, or the error's
// code), cancel, stop, status, lease, lease_stop,
// waitfor, ready, send, signal, resize or withdraw (id=ID: take back a
// queued command, ID being a cmd_id, a command file's name or queue/NAME;
// outcome withdrawn, or the error's code); in a pool scenario also
// pool_submit (id, payload, affinity and every option of submit; outcome
// queued with session) and pool_wait (id, wait_timeout_ms), the pool's
// submit and wait of each master, and pool_heal (outcome ok, moved: how
// many commands the heal moved; the Go and CLI masters', which heal).
// submit, run and pool_submit take the
// same options: id, timeout_ms, trace_id, labels, cancel_policy and the
// raw timeout_s and max_output_bytes.
//
// A raw value (timeout_s, max_output_bytes, cols, rows; lease's ttl and
// send's expect_timeout) is given to the master as a caller in its
// language holds that text, in the master's own unit for the option
// (seconds, bytes; ttl and expect_timeout: Tcl and shell milliseconds,
// the others seconds): Tcl, the CLI and the shell master the text itself;
// Python the bool true/false spell, else the int or float the text reads
// as (inf, nan, 1e999 included), else the str; Go the Duration or int64
// strconv reads, and a text no such Go value holds (true, 0x50, Inf) is
// refused by the adapter with usage, exit 2, as Go's types refuse it in a
// caller's code. Values may be
// Go-quoted ("a b\n"); payload=, re=, text= and expect= are sent
// base64-encoded. send id=ID text=TEXT types TEXT and a newline
// (no_newline=1: TEXT alone), with expect=RE, expect_timeout_ms=N and
// secret=1 as the masters offer them; signal id=ID sig=SIG; resize cols=N
// rows=N. EXPECT is K=V (equal), K~=V
// (contains), K=>NAME (capture into $NAME for later steps) or !K (no such
// key). Outcome keys: outcome (result status, reply outcome or error code),
// exit (the CLI exit code of that outcome), cmd_id, value, output,
// error_message, alive, phase, can_serve, match, start, end,
// resume_cursor; for send bytes, match_start, match_end; for a refused
// send or signal cmd_state. For submit, status and waitfor, "reply" holds
// the cursor fields of the master's own reply under the names it uses
// (PROTOCOL.md section 19, "Cursors"); a nested key is named with dots
// (reply.match_span.start).
//
// # Adapters
//
// An adapter is a small program per master that reads steps on stdin, one
// per line ("op key=value ..."; text values base64 in keys ending _b64),
// and prints one JSON outcome per line. The Go library and CLI adapters are
// in this package (the test binary runs them, see Main); the others are in
// adapters/. A shell outcome may name its result file (result_file)
// instead of carrying value and output: the driver reads it as cat would.
package conformance

#!/usr/bin/env bash
# make demo: one runner on tclsh in a temporary session, a few commands
# through the master CLI, their results and outputs, then a clean stop.
set -euo pipefail
bin=${BIN:-$(cd "$(dirname "$0")/.." && pwd)/bin}
sess=$(mktemp -d /tmp/skillpilot-demo.XXXXXX)/session
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
cleanup() { "$bin/master" stop --session "$sess" --force --wait --wait-timeout 10s >/dev/null 2>&1 || true; }
trap cleanup EXIT

say "start a runner on tclsh (session: $sess)"
"$bin/runner" --session "$sess" 2>"$sess.runner.log" &
"$bin/master" ready --session "$sess" --wait-timeout 30s
"$bin/master" status --session "$sess"

say "master submit --wait 'puts \"Hello from tclsh [info patchlevel]\"; set design top'"
"$bin/master" submit --session "$sess" --wait 'puts "Hello from tclsh [info patchlevel]"; set design top'

say "state persists between commands: the value of the last command is kept too"
"$bin/master" submit --session "$sess" --json --wait 'puts "design is $design"; expr {6 * 7}' | grep -E '"(status|value|output_path|exit_reason)"'

say "a Tcl error: exit code 1, message in the result"
"$bin/master" submit --session "$sess" --wait 'error {no such cell: U42}' || echo "(master exited $?)"

say "a command that outlives its timeout: exit code 3"
"$bin/master" submit --session "$sess" --wait --timeout 300ms 'after 5000' || echo "(master exited $?)"

say "plain files are the API: a shell script writes queue/ itself"
printf '{"cmd_id":"from-shell","seq":1000,"kind":"tcl","payload":"puts {written by printf}"}' > "$sess/queue/.tmp" && mv "$sess/queue/.tmp" "$sess/queue/cmd_1000_from-shell.json"
"$bin/master" wait --session "$sess" from-shell   # on stderr: it had ended before the wait began
grep -E '"(status|exit_reason|output_path)"' "$sess/result/cmd_1000_from-shell.json"

say "the session directory"
for d in queue inflight result output archive ctl state log seq tmp; do
  [ -d "$sess/$d" ] || continue
  n=$(ls "$sess/$d" | wc -l)
  more=""; [ "$n" -gt 3 ] && more="… ($n in all)"
  printf '  %-10s %s%s\n' "$d/" "$(ls "$sess/$d" | sed -E 's/_[0-9a-f]{8}-[0-9a-f-]{27}/_<uuid>/' | head -3 | tr '\n' ' ')" "$more"
done

say "stop"
"$bin/master" stop --session "$sess" --wait
"$bin/master" status --session "$sess" || true
trap - EXIT
echo; echo "session kept in $sess (runner log: $sess.runner.log)"

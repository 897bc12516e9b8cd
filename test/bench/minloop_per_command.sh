#!/usr/bin/env bash
# minloop_per_command.sh [N]: the minimal loop's counterpart of
# syscalls_per_command.sh: N commands (3,000) renamed into its queue/ in one
# burst, counted by perf stat (system calls, context switches, CPU time, the
# tool's included) per command, and the wall time from the first rename to
# the last result. Run beside syscalls_per_command.sh, alternating, to see
# where the runner's CPU per command goes (docs/benchmarks-log.md, "Issue 44,
# sixth pass").
set -euo pipefail
. "$(dirname "$0")/diskflushes.sh"
cd "$(dirname "$0")/../.."
n=${1:-3000}
d=$(mktemp -d "${SP_BENCH_DIR:-$PWD}/.ml.XXXXXX"); chmod 700 "$d"; s=$d/s; mkdir "$s"
go build -o "$d/minloop" ./test/bench/minloop
perf stat -x, -o "$d/perf" -e raw_syscalls:sys_enter,context-switches,task-clock "$d/minloop" --dir "$s" >"$d/log" 2>&1 &
pid=$!
trap 'kill -TERM $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$d"' EXIT
mkdir "$d/stage"
for i in $(seq 1 "$n"); do
  printf '{"cmd_id":"c%d","payload":"puts hi"}' "$i" >"$(printf '%s/stage/cmd_%010d_c%d.json' "$d" "$i" "$i")"
done
until [ -e "$s/ready" ]; do sleep 0.05; done
sleep 1
f0=$(diskflushes "$d")
t0=$(date +%s.%N)
python3 -c 'import os, sys
src, dst = sys.argv[1:]
for n in sorted(os.listdir(src)):
    os.rename(os.path.join(src, n), os.path.join(dst, n))' "$d/stage" "$s/queue"
last=$(printf '%s/result/cmd_%010d_c%d.json' "$s" "$n" "$n")
until [ -f "$last" ]; do sleep 0.01; done
f1=$(diskflushes "$d")
t1=$(date +%s.%N)
# minloop ends tclsh and exits on SIGTERM; perf stat then writes its counts.
pkill -TERM -P $pid -x minloop
wait $pid || true
awk -F, -v n="$n" -v fl="$(perflush "$n" "$f0" "$f1")" -v a="$t0" -v b="$t1" '/sys_enter/{s=$1} /context-switches/{c=$1} /task-clock/{k=$1}
  END{printf "minimal loop: system calls/command %.1f, context switches/command %.2f, CPU ms/command %.3f, wall ms/command %.3f, disk flushes/command %s\n", s/n, c/n, k/n, (b-a)*1000/n, fl}' "$d/perf"

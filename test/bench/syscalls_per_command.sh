#!/usr/bin/env bash
# syscalls_per_command.sh RUNNER [N]: N commands (2,000) renamed into queue/
# in one burst (one mv: a rename each) while RUNNER serves a fresh session in
# the work tree (the inotify-fed case of BenchmarkThroughputAlone), counted
# by perf stat: the
# runner's system calls, context switches and CPU time per command, and the
# drain's time per command from its results' end_ts. Counts, unlike times,
# hardly move with the machine's load. BENCHMARKS.md, issue 44.
set -euo pipefail
. "$(dirname "$0")/diskflushes.sh"
bin=$1; n=${2:-2000}
d=$(mktemp -d "${SP_BENCH_DIR:-$PWD}/.sys.XXXXXX"); chmod 700 "$d"; s=$d/s
${SP_WRAP:-perf stat -x, -o "$d/perf" -e raw_syscalls:sys_enter,context-switches,task-clock} "$bin" --session "$s" --log-level warn >"$d/log" 2>&1 &
pid=$!
trap 'kill -TERM $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$d"' EXIT
mkdir "$d/stage"
for i in $(seq 1 "$n"); do
  printf '{"cmd_id":"c%d","seq":%d,"kind":"tcl","payload":"puts hi"}' "$i" "$i" >"$(printf '%s/stage/cmd_%010d_c%d.json' "$d" "$i" "$i")"
done
until grep -qs '"phase": "idle"' "$s/state/state.json"; do sleep 0.05; done
sleep 1
# One rename each, nothing else: mv -t looks at what it moved, and the
# runner may have claimed it by then ("cannot stat").
f0=$(diskflushes "$d")
python3 -c 'import os, sys
src, dst = sys.argv[1:]
for n in sorted(os.listdir(src)):
    os.rename(os.path.join(src, n), os.path.join(dst, n))' "$d/stage" "$s/queue"
last=$(printf '%s/result/cmd_%010d_c%d.json' "$s" "$n" "$n")
until [ -f "$last" ]; do sleep 0.05; done
f1=$(diskflushes "$d")
printf '{"mode":"graceful"}' >"$s/ctl/.stop.json" && mv "$s/ctl/.stop.json" "$s/ctl/stop.json"
wait $pid
endts() { grep -o '"end_ts": "[^"]*"' "$1" | cut -d'"' -f4; }
first=$(date -d "$(endts "$s/result/$(printf 'cmd_%010d_c1.json' 1)")" +%s.%N)
lastt=$(date -d "$(endts "$last")" +%s.%N)
awk -F, -v n="$n" -v fl="$(perflush "$n" "$f0" "$f1")" -v a="$first" -v b="$lastt" '/sys_enter/{s=$1} /context-switches/{c=$1} /task-clock/{k=$1}
  END{printf "system calls/command %.1f, context switches/command %.2f, CPU ms/command %.3f, drain ms/command %.3f, disk flushes/command %s\n", s/n, c/n, k/n, (b-a)*1000/(n-1), fl}' "$d/perf"

#!/usr/bin/env bash
# idle_syscalls.sh RUNNER [SECONDS] [RUNNER FLAGS...]: the system calls of an
# idle polling runner (strace -f -c) and its CPU ticks, on a fresh session in
# the work tree. docs/benchmarks-log.md, "NFS: adaptive polling". HB sets --heartbeat (1s).
set -euo pipefail
bin=$1; secs=${2:-10}; shift $(($# > 1 ? 2 : 1))
d=$(mktemp -d "${SP_BENCH_DIR:-$PWD}/.idle.XXXXXX"); chmod 700 "$d"
"$bin" --session "$d/s" --watch poll --poll 250ms --heartbeat "${HB:-1s}" "$@" >"$d/log" 2>&1 &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$d"' EXIT
sleep 2
timeout -s INT "$secs" strace -f -c -p "$pid" -o "$d/strace" 2>/dev/null || true
t0=$(awk '{print $14+$15}' /proc/$pid/stat)
sleep "$secs"
t1=$(awk '{print $14+$15}' /proc/$pid/stat)
echo "CPU ticks in ${secs}s: $((t1 - t0))"
grep -E 'total|calls' "$d/strace"
sort -k4 -n -r "$d/strace" | sed -n 3,16p

#!/usr/bin/env bash
# scripts/bench-adapt.sh [VIA]: 24 commands of 1 s each submitted at once to
# a pool of 2 sessions, once with no adapter and once beside
# `master pool adapt --min 2 --max 6 --every 1s`; prints the time from the
# first submit to the last result and how many commands each session ran
# (docs/benchmarks-log.md, "Adapt and a backlog"). VIA: local (default) or sge
# (Grid Engine must answer qstat: scripts/sge-up.sh). Needs bin/ (make build).
set -euo pipefail
cd "$(dirname "$0")/.."
via=${1:-local}
bin=$PWD/bin
export PATH=$bin:$PATH
n=${SP_BENCH_N:-24}
work=$(mktemp -d /tmp/sp-bench-adapt.XXXXXX)
adapter=""
cleanup() {
  [ -n "$adapter" ] && kill "$adapter" 2>/dev/null && wait "$adapter" 2>/dev/null
  for p in "$work"/*/; do [ -f "$p/pool.json" ] && master pool stop --pool "$p" --force >/dev/null 2>&1 || true; done
  rm -rf "$work"
}
trap cleanup EXIT
run() { # run NAME ADAPT(0|1)
  local pool=$work/$1
  master pool start --pool "$pool" --size 2 --via "$via" --runner-arg=--heartbeat=500ms >/dev/null 2>&1
  if [ "$2" = 1 ]; then
    master pool adapt --pool "$pool" --min 2 --max 6 --every 1s --idle 60s >"$work/$1.adapt" 2>&1 &
    adapter=$!
  fi
  local t0 ids=()
  t0=$(date +%s.%N)
  for i in $(seq 1 "$n"); do ids+=("$(master pool submit --pool "$pool" --id "b$i" 'after 1000; expr 1')"); done
  for id in "${ids[@]}"; do master pool wait --pool "$pool" --no-value "$id" >/dev/null; done
  local t1
  t1=$(date +%s.%N)
  if [ -n "$adapter" ]; then kill "$adapter"; wait "$adapter" 2>/dev/null || true; adapter=""; fi
  printf '%-10s %6.1f s   ran per session:' "$1" "$(echo "$t1 - $t0" | bc)"
  for s in "$pool"/s*/; do printf ' %s:%s' "$(basename "$s")" "$(ls "$s/result" | grep -c '^cmd_.*_b[0-9]*\.json$' || true)"; done
  echo
  [ -f "$work/$1.adapt" ] && grep -E '^(grown|balanced)' "$work/$1.adapt" | sed 's/^/    /'
  master pool stop --pool "$pool" --force >/dev/null 2>&1 || true
}
echo "via $via: $n commands of 1 s (after 1000) submitted at once to a pool of 2"
run no-adapt 0
run adapt 1

#!/usr/bin/env bash
# make test-slurm: the farm suite (package farm) against a real single-node
# Slurm. Starts Slurm with scripts/slurm-up.sh (installing slurm-wlm and
# munge with apt when missing; needs root) unless it already answers, and
# stops it again afterwards only if this script started it (keeping its
# logs in /tmp/realparts-slurm when the suite failed).
set -euo pipefail
cd "$(dirname "$0")/.."
started=0 rc=1
log=$(mktemp /tmp/skillpilot-farm.XXXXXX)
down() {
  rm -f "$log"
  if [ "$started" = 1 ]; then
    SLURM_DOWN_KEEP=$([ "$rc" = 0 ] && echo 0 || echo 1) ./scripts/slurm-down.sh
  fi
}
trap down EXIT
if ! sinfo -h >/dev/null 2>&1; then
  started=1 # Before: a failed start is taken down too.
  ./scripts/slurm-up.sh
fi
set +e
SP_SLURM=1 go test -race -count=1 -timeout 20m -v -run "^TestSlurm" ./test/farm/ >"$log" 2>&1
rc=$?
set -e
grep -E '^(=== RUN|--- |PASS$|FAIL|ok )|BENCH' "$log" || true # BENCH: the farm's figures (BENCHMARKS.md)
if [ "$rc" != 0 ]; then
  echo "farm suite failed; full log:"
  cat "$log"
fi
exit "$rc"

#!/usr/bin/env bash
# make test-sge: the Grid Engine tests of the farm suite (package farm)
# against a real single-node Grid Engine. Starts it with scripts/sge-up.sh
# (installing Debian's gridengine with apt when missing; needs root) unless
# it already answers, and stops it again afterwards only if this script
# started it.
set -euo pipefail
cd "$(dirname "$0")/.."
export SGE_ROOT=${SGE_ROOT:-/var/lib/gridengine} SGE_CELL=${SGE_CELL:-default}
started=0 rc=1
log=$(mktemp /tmp/skillpilot-farm-sge.XXXXXX)
down() {
  rm -f "$log"
  if [ "$started" = 1 ]; then ./scripts/sge-down.sh; fi
}
trap down EXIT
if ! qstat -f >/dev/null 2>&1; then
  started=1 # Before: a failed start is taken down too.
  ./scripts/sge-up.sh
fi
# The client programs without Debian's per-call wrapper (see sge-up.sh):
# links to the binaries, first on PATH.
bin=/tmp/skillpilot-sge/bin
mkdir -p "$bin"
for c in qsub qstat qdel qacct qrls qhold qalter qconf qmod; do
  if [ -x "/usr/lib/gridengine/$c" ]; then ln -sfn "/usr/lib/gridengine/$c" "$bin/$c"; fi
done
export PATH=$bin:$PATH
set +e
SP_SGE=1 go test -race -count=1 -timeout 20m -v -run '^TestSGE' ./test/farm/ >"$log" 2>&1
rc=$?
set -e
grep -E '^(=== RUN|--- |PASS$|FAIL|ok )|BENCH' "$log" || true # BENCH: the farm's figures (BENCHMARKS.md)
if [ "$rc" != 0 ]; then
  echo "Grid Engine suite failed; full log:"
  cat "$log"
fi
exit "$rc"

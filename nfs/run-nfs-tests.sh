#!/usr/bin/env bash
# make test-nfs: the shared-filesystem suite on real NFS, twice: NFS v4.2
# (locks work across clients) and NFS v3 mounted nolock (flock is local to
# each client, so the heartbeat and exclusive create must carry the day),
# with lookupcache=positive as PROTOCOL.md requires for v3.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d /tmp/skillpilot-nfs.XXXXXX)
trap 'rm -rf "$out"' EXIT
go build -o "$out/runner" ./cmd/runner
go test -c -o "$out/nfs.test" ./nfs
export SP_RUNNER_BIN=$out/runner SP_REPO=$PWD
# A pass takes about 2.5 minutes; a hung guest is stopped after 20.
export NFS_UML_TIMEOUT=${NFS_UML_TIMEOUT:-1200}
status=0
# pass MODE TIMEOUT TESTFLAGS...: one guest boot running nfs.test.
pass() {
  local mode=$1 limit=$2; shift 2
  echo "== NFS $mode $*"
  # shellcheck disable=SC2086
  # The guest's console ends lines with CRLF.
  NFS_UML_TIMEOUT=$limit ./nfs/nfs-uml.sh $mode -- "$out/nfs.test" -test.v "$@" 2>&1 | tr -d '\r' >"$out/log" || true
  grep -E '^(=== RUN|--- |PASS|FAIL|ok)|NFS FIGURES|nfs-uml:|driver.go' "$out/log" || true
  if ! grep -q '^PASS$' "$out/log"; then
    echo "NFS suite failed ($mode $*); full log:"
    cat "$out/log"
    status=1
  fi
}
for mode in "-v 4.2" "-v 3 -o nolock,lookupcache=positive"; do
  pass "$mode" "$NFS_UML_TIMEOUT" -test.skip '^TestNFSConformance$' -test.timeout 15m
done
# The conformance suite (every master through every scenario, runner on
# client A, masters on client B) in a guest of its own: its scenarios mostly
# wait (liveness graces, leases, polls), so masters run in parallel, three at a time.
# NFS_CONFORMANCE_MODES: mount modes separated by ';' (default: -v 4.2).
IFS=';' read -r -a cmodes <<<"${NFS_CONFORMANCE_MODES:--v 4.2}"
for mode in "${cmodes[@]}"; do
  # Two masters at a time, not five (nor three): the loaded guest
  # (user-mode Linux) delayed a runner's heartbeat past a master's 1.25 s liveness
  # window (a cancel answered "runner not alive" by the Tcl master) with five,
  # and again with three once every session operation became a directory walk
  # (issue 21's session root; BENCHMARKS.md). Requests judging liveness by
  # the waits' grace is issue 22 item 7, still open.
  pass "$mode" 2400 -test.run '^TestNFSConformance$' -test.parallel 2 -test.timeout 35m
done
exit $status

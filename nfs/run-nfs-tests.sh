#!/usr/bin/env bash
# make test-nfs: the shared-filesystem suite on real NFS, twice: NFS v4.2
# (locks work across clients) and NFS v3 mounted nolock (flock is local to
# each client, so the heartbeat and exclusive create must carry the day),
# with lookupcache=positive as PROTOCOL.md requires for v3.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d /tmp/skillpilot-nfs.XXXXXX)
trap 'rm -rf "$out"' EXIT
# CGO_ENABLED=0: the flavour make install ships and make test's binaries
# use (internal/testenv), so the build reuses what make test compiled.
CGO_ENABLED=0 go build -o "$out/runner" ./cmd/runner
CGO_ENABLED=0 go build -o "$out/master" ./cmd/master
CGO_ENABLED=0 go test -c -o "$out/nfs.test" ./nfs
export SP_RUNNER_BIN=$out/runner SP_MASTER_BIN=$out/master SP_REPO=$PWD
# A plain pass takes about 4 minutes; a hung guest is stopped after 20.
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
# wait (liveness graces, leases, polls), so masters run in parallel.
# NFS_CONFORMANCE_MODES: mount modes separated by ';' (default: -v 4.2).
IFS=';' read -r -a cmodes <<<"${NFS_CONFORMANCE_MODES:--v 4.2}"
for mode in "${cmodes[@]}"; do
  # Two masters at a time, not five (nor three): the loaded guest
  # (user-mode Linux) delayed a runner's heartbeat past a master's 1.25 s liveness
  # window (a cancel answered "runner not alive" by the Tcl master) with five,
  # and again with three once every session operation became a directory walk
  # (issue 21's session root; BENCHMARKS.md). Requests judging liveness by
  # the waits' grace is issue 22 item 7, still open.
  cstatus=$status status=0
  pass "$mode" 2400 -test.run '^TestNFSConformance$' -test.parallel 2 -test.timeout 35m
  [ "$status" = 0 ] && { status=$cstatus; continue; }
  # A failed scenario gets one more try, alone, in a fresh guest: the guest is
  # user-mode Linux on a shared CI host, and a scenario's liveness windows
  # (1.25 s heartbeat windows, lease ttls) are real time. It passes only if
  # every failed scenario passes on its retry; the retried ones are named
  # here ("NFS RETRIED") so a flake stays visible. The local conformance run
  # in make test gets no retries.
  failed=$(sed -n 's|^ *--- FAIL: TestNFSConformance/\([a-z]*\)/\([a-z_]*\) .*|\1/\2|p' "$out/log" | sort -u)
  if [ -z "$failed" ] || [ "$(wc -l <<<"$failed")" -gt 3 ]; then
    echo "NFS conformance: not retried (failed scenarios: ${failed:-none named})"
    continue
  fi
  masters=$(cut -d/ -f1 <<<"$failed" | sort -u | paste -sd'|')
  scen=$(cut -d/ -f2 <<<"$failed" | sort -u | paste -sd'|')
  echo "NFS RETRIED ($mode): $(paste -sd' ' <<<"$failed")"
  status=0
  pass "$mode" 1200 -test.run "^TestNFSConformance\$/^($masters)\$/^($scen)\$" -test.timeout 15m
  [ "$status" = 0 ] && status=$cstatus || status=1
done
exit $status

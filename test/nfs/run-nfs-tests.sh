#!/usr/bin/env bash
# make test-nfs: the shared-filesystem suite on real NFS, twice: NFS v4.2
# (locks work across clients), with the conformance suite, and NFS v3
# mounted nolock (flock is local to each client, so the heartbeat and
# exclusive create must carry the day), with lookupcache=positive as
# PROTOCOL.md requires for v3.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(mktemp -d /tmp/skillpilot-nfs.XXXXXX)
trap 'rm -rf "$out"' EXIT
# CGO_ENABLED=0: the flavour make install ships and make test's binaries
# use (internal/testenv), so the build reuses what make test compiled.
CGO_ENABLED=0 go build -o "$out/runner" ./cmd/runner
CGO_ENABLED=0 go build -o "$out/master" ./cmd/master
CGO_ENABLED=0 go test -c -o "$out/nfs.test" ./test/nfs
export SP_RUNNER_BIN=$out/runner SP_MASTER_BIN=$out/master SP_REPO=$PWD
# The v3 pass takes about 4 minutes, the v4.2 pass about 15; a hung guest
# is stopped after 20 and 50.
export NFS_UML_TIMEOUT=${NFS_UML_TIMEOUT:-1200}
status=0
# pass MODE TIMEOUT TESTFLAGS...: one guest boot running nfs.test.
pass() {
  local mode=$1 limit=$2; shift 2
  echo "== NFS $mode $*"
  # shellcheck disable=SC2086
  # The guest's console ends lines with CRLF.
  NFS_UML_TIMEOUT=$limit ./test/nfs/nfs-uml.sh $mode -- "$out/nfs.test" -test.v "$@" 2>&1 | tr -d '\r' >"$out/log" || true
  grep -E '^(=== RUN|--- |PASS|FAIL|ok)|NFS FIGURES|nfs-uml:|driver.go' "$out/log" || true
  if ! grep -q '^PASS$' "$out/log"; then
    echo "NFS suite failed ($mode $*); full log:"
    cat "$out/log"
    status=1
  fi
}
# retry MODE: after a pass that failed, give its failed conformance
# scenarios one more try, alone, in a fresh guest: the guest is user-mode
# Linux on a shared CI host, and a scenario's liveness windows (1.25 s
# heartbeat windows, lease ttls) are real time. The pass counts as passed
# only if nothing else failed and every failed scenario (at most three)
# passes on its retry; the retried ones are named ("NFS RETRIED") so a
# flake stays visible. The local conformance run in make test gets no
# retries.
retry() {
  local mode=$1 failed others masters scen
  failed=$(sed -n 's|^ *--- FAIL: TestNFSConformance/\([a-z]*\)/\([a-z_]*\) .*|\1/\2|p' "$out/log" | sort -u)
  others=$(grep -E '^--- FAIL: ' "$out/log" | grep -v '^--- FAIL: TestNFSConformance ' || true)
  if [ -n "$others" ] || [ -z "$failed" ] || [ "$(wc -l <<<"$failed")" -gt 3 ]; then
    echo "NFS $mode: not retried (failed: ${others:+$(paste -sd' ' <<<"$others") }scenarios ${failed:-none named})"
    return 1
  fi
  masters=$(cut -d/ -f1 <<<"$failed" | sort -u | paste -sd'|')
  scen=$(cut -d/ -f2 <<<"$failed" | sort -u | paste -sd'|')
  echo "NFS RETRIED ($mode): $(paste -sd' ' <<<"$failed")"
  status=0
  pass "$mode" 1200 -test.run "^TestNFSConformance\$/^($masters)\$/^($scen)\$" -test.timeout 15m
  [ "$status" = 0 ]
}
# v4.2: the conformance suite (every master through every scenario, runner
# on client A, masters on client B), then the plain tests, in one guest (one
# boot and NFS grace period fewer than a guest each). Two masters at a time,
# not five (nor three): the loaded guest (user-mode Linux) delayed a runner's
# heartbeat past a master's 1.25 s liveness window (a cancel answered
# "runner not alive" by the Tcl master) with five, and again with three
# once every session operation became a directory walk (the session
# root; BENCHMARKS.md). -test.parallel bounds only the conformance
# scenarios: the plain tests run one at a time.
pass "-v 4.2" 3000 -test.parallel 2 -test.timeout 50m
if [ "$status" != 0 ]; then
  retry "-v 4.2" && status=0 || status=1
fi
cstatus=$status
# v3 nolock: the plain tests.
pass "-v 3 -o nolock,lookupcache=positive" "$NFS_UML_TIMEOUT" -test.skip '^TestNFSConformance$' -test.timeout 15m
[ "$cstatus" = 0 ] || status=1
# NFS_CONFORMANCE_MODES: more mount modes for the conformance suite alone,
# separated by ';' (e.g. '-v 3 -o nolock,lookupcache=positive').
if [ -n "${NFS_CONFORMANCE_MODES:-}" ]; then
  IFS=';' read -r -a cmodes <<<"$NFS_CONFORMANCE_MODES"
  for mode in "${cmodes[@]}"; do
    cstatus=$status status=0
    pass "$mode" 2400 -test.run '^TestNFSConformance$' -test.parallel 2 -test.timeout 35m
    if [ "$status" != 0 ]; then
      retry "$mode" && status=0 || status=1
    fi
    [ "$cstatus" = 0 ] || status=1
  done
fi
exit $status

#!/usr/bin/env bash
# nfs-costs.sh [MODE...]: what the NFS file server pays for one session and
# one master (TestNFSFarmCosts: nfsstat -s counters of the test bed's
# server, nfsstat -c of each client), at several settings of the runner's
# --heartbeat and --poll and of the Go master's PollInterval, with what
# each setting costs in latency. One guest boot per mount mode (default:
# "-v 4.2" and "-v 3 -o nolock,lookupcache=positive"). Prints the
# "NFS COSTS:" lines; docs/benchmarks-log.md, "Farm on NFS: what the file server pays".
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(mktemp -d /tmp/skillpilot-nfs-costs.XXXXXX)
trap 'rm -rf "$out"' EXIT
go build -o "$out/runner" ./cmd/runner
go build -o "$out/master" ./cmd/master
go test -c -o "$out/nfs.test" ./test/nfs
export SP_RUNNER_BIN=$out/runner SP_MASTER_BIN=$out/master SP_REPO=$PWD SP_NFS_COSTS=1
(($#)) || set -- "-v 4.2" "-v 3 -o nolock,lookupcache=positive"
status=0
for mode in "$@"; do
  echo "== NFS $mode"
  # shellcheck disable=SC2086
  NFS_UML_TIMEOUT=${NFS_UML_TIMEOUT:-1200} ./test/nfs/nfs-uml.sh $mode -- "$out/nfs.test" -test.v -test.run '^TestNFSFarmCosts$' -test.timeout 15m 2>&1 |
    tr -d '\r' >"$out/log" || true
  grep -E '^(--- |PASS|FAIL)|NFS COSTS' "$out/log" || true
  grep -q '^PASS$' "$out/log" || { echo "failed ($mode); full log:"; cat "$out/log"; status=1; }
done
exit $status

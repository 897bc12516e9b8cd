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
for mode in "-v 4.2" "-v 3 -o nolock,lookupcache=positive"; do
  echo "== NFS $mode"
  # shellcheck disable=SC2086
  # The guest's console ends lines with CRLF.
  ./nfs/nfs-uml.sh $mode -- "$out/nfs.test" -test.v -test.timeout 15m 2>&1 | tr -d '\r' >"$out/log" || true
  grep -E '^(=== RUN|--- |PASS|FAIL|ok)|NFS FIGURES|nfs-uml:' "$out/log" || true
  if ! grep -q '^PASS$' "$out/log"; then
    echo "NFS suite failed ($mode); full log:"
    cat "$out/log"
    status=1
  fi
done
exit $status

#!/usr/bin/env bash
# roundtrip-ab.sh N RUNNER0 TEST0 RUNNER1 TEST1: inside the NFS guest,
# TestNFSRoundTrips (40 round trips, runner on client A, Go master on B) with
# binaries 0 ("before") and 1 ("after") alternating, N pairs, one guest boot.
# TESTn is an nfs test binary (go test -c ./test/nfs) built with the master code
# to compare. Summarise the output with test/nfs/roundtrip-stats.py.
# docs/benchmarks-log.md, "NFS: adaptive polling".
# ./test/nfs/nfs-uml.sh -v 4.2 -- ./test/nfs/roundtrip-ab.sh 4 /tmp/runner0 /tmp/nfs0.test /tmp/runner1 /tmp/nfs1.test >ab.log
set -uo pipefail
n=$1 bins=("$2" "$4") tests=("$3" "$5")
export SP_NFS_TRIPS=1
for i in $(seq 1 "$n"); do
  for v in 0 1; do
    echo "== AB run $i side $v"
    SP_RUNNER_BIN=${bins[$v]} "${tests[$v]}" -test.run '^TestNFSRoundTrips$' -test.v 2>&1 | grep -E "NFS TRIP|^--- |^(PASS|FAIL)"
  done
done

#!/usr/bin/env bash
# idle-nfs-calls.sh RUNNER...: NFS calls by type of each idle runner on
# client A over 10 s (nfsstat -c -l against a snapshot), one after another.
# Run inside the guest: ./test/nfs/nfs-uml.sh -v 4.2 -- ./test/nfs/idle-nfs-calls.sh BIN...
# HB sets --heartbeat (200ms, as TestNFSFigures). docs/benchmarks-log.md, "NFS: adaptive polling".
set -uo pipefail
for bin in "$@"; do
  dir=$(mktemp -d "$NFS_A/idle.XXXXXX")
  "$bin" --session "$dir/s" --heartbeat "${HB:-200ms}" >/tmp/idle.log 2>&1 &
  pid=$!
  sleep 6
  cat /proc/net/rpc/nfs >/tmp/idle-before
  t0=$(awk '{print $14+$15}' /proc/$pid/stat)
  sleep 10
  t1=$(awk '{print $14+$15}' /proc/$pid/stat)
  echo "== $bin: CPU ticks in 10s: $((t1 - t0))"
  nfsstat -c -l -S /tmp/idle-before
  kill -TERM $pid; wait $pid
done

#!/usr/bin/env bash
# guest-costs.sh: what starting a process costs here, per operation. Run it
# on the host and in the NFS suite's guest to compare (docs/benchmarks-log.md, "What
# a process costs in the NFS guest"):
#   ./test/nfs/guest-costs.sh
#   ./test/nfs/nfs-uml.sh -- ./test/nfs/guest-costs.sh
set -u
TIMEFORMAT='%R s'
py=$(python3 -c 'import sys; print(sys.executable)')
echo -n "100 x fork+exec /bin/true: "; time (for _ in $(seq 100); do /bin/true; done)
echo -n "100 x \$(...) subshell: "; time (for _ in $(seq 100); do x=$(echo hi); done)
echo -n "100 x read (built-in): "; time (for _ in $(seq 100); do read -r _ </etc/hostname; done)
echo -n "100 x stat: "; time (for _ in $(seq 100); do stat -c %s /etc/hostname >/dev/null; done)
echo -n "python3 -c pass (as PATH finds it): "; time python3 -c pass
echo -n "$py -c pass: "; time "$py" -c pass

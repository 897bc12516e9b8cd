#!/usr/bin/env bash
# sge-up.sh - bring up a real single-node Grid Engine (Debian's gridengine,
# Son of Grid Engine 8.1.9) on this machine, as root, unattended.
#
# Idempotent: installs gridengine-master/-exec/-client with apt when missing
# (debconf preseeded: cell "default", this host as master), then fixes what
# the packaged set-up leaves for a human: a host_aliases line (this host's
# name resolves to 127.0.0.1, which resolves back to "localhost"), root may
# run jobs (min_uid/min_gid 0), this host is a submit host, a 1 s scheduler
# interval dispatching a whole 128-element array in one run, 1 s accounting flush, 501 additional group ids (each running
# job takes one: the packaged 101 start at most 101 jobs), and a queue all.q on this host with
# $SGE_SLOTS slots (default 160: the farm suite runs a 128-session pool, and
# sessions idle at ~0% CPU, so slots oversubscribe the cores) and no load
# threshold (a loaded test machine would otherwise put the queue in alarm
# state "a" and start nothing). The daemons are started in that order (sge_execd reads min_uid when
# it starts). Running it again while everything is up only re-checks.
#
# Env: SGE_UP_TIMEOUT seconds to wait for the queue (default 60); SGE_SLOTS
# slots of all.q (default 160).
# Pair: sge-down.sh. Jobs need SGE_ROOT=/var/lib/gridengine SGE_CELL=default
# in the environment of qsub/qstat/qdel/qacct.
set -euo pipefail
export SGE_ROOT=/var/lib/gridengine SGE_CELL=default
TIMEOUT=${SGE_UP_TIMEOUT:-60}
SLOTS=${SGE_SLOTS:-160}
HOST=$(hostname)
CFG=/tmp/skillpilot-sge
# Each daemon runs under subreaper.py, which reaps it when it stops: where
# PID 1 reaps no orphans (a container), it would stay a zombie after
# sge-down.sh.
REAP="python3 $(cd "$(dirname "$0")" && pwd)/subreaper.py"
log() { printf '[sge-up] %s\n' "$*" >&2; }
[[ $(id -u) == 0 ]] || { log "must run as root"; exit 1; }

# 1. packages ------------------------------------------------------------------
if ! command -v qsub >/dev/null || [[ ! -x /usr/sbin/sge_qmaster || ! -x /usr/sbin/sge_execd ]]; then
    log "installing gridengine"
    export DEBIAN_FRONTEND=noninteractive
    debconf-set-selections <<SEL
gridengine-master shared/gridenginemaster string $HOST
gridengine-common shared/gridenginecell string default
gridengine-common shared/gridengineconfig boolean true
gridengine-client shared/gridenginemaster string $HOST
gridengine-exec shared/gridenginemaster string $HOST
SEL
    apt-get install -y -q --no-install-recommends gridengine-master gridengine-exec gridengine-client >/dev/null 2>&1 || {
        apt-get update -q >/dev/null
        apt-get install -y -q --no-install-recommends gridengine-master gridengine-exec gridengine-client >/dev/null
    }
fi
mkdir -p "$CFG"
echo "$HOST localhost" >"$SGE_ROOT/$SGE_CELL/common/host_aliases"

# alive: the PID file names a live process (not a zombie left unreaped).
alive() { [[ -s $1 ]] && [[ $(awk '{print $3}' "/proc/$(cat "$1")/stat" 2>/dev/null) =~ ^[RSDT]$ ]]; }
QPID=/var/spool/gridengine/qmaster/qmaster.pid

# 2. qmaster and its configuration ---------------------------------------------
if ! alive "$QPID"; then
    setsid $REAP /usr/sbin/sge_qmaster >"$CFG/qmaster.out" 2>&1 </dev/null & # Daemonizes and becomes sgeadmin.
    log "sge_qmaster started"
fi
for _ in $(seq 100); do qconf -sh >/dev/null 2>&1 && break; sleep 0.2; done
qconf -sh >/dev/null || { log "qmaster does not answer"; cat "$CFG/qmaster.out" >&2; exit 1; }

# Debian runs every Grid Engine program through a wrapper script
# (/usr/share/gridengine/gridengine-wrapper) that works out the host's
# architecture twice per call, each time running util/arch, which runs cpp
# and ldd: about 0.35 s of CPU per call on an idle machine, and 0.6 s of
# wall time per job start for sge_execd's shepherd (128 array elements
# took 80 s to start on this 2-core machine, 17 s without the wrapper). A
# real site runs the binaries from $SGE_ROOT/bin/<arch>: the shepherd is
# named directly (shepherd_cmd); test-sge.sh does the same for the clients.
qconf -sconf global >"$CFG/global"
sed -i -e 's/^min_uid .*/min_uid                      0/' -e 's/^min_gid .*/min_gid                      0/' \
       -e 's/flush_time=[0-9:]*/flush_time=00:00:01/' \
       -e 's/^gid_range .*/gid_range                    65000-65500/' "$CFG/global"
if [[ -x /usr/lib/gridengine/sge_shepherd ]]; then
    sed -i 's|^shepherd_cmd .*|shepherd_cmd                 /usr/lib/gridengine/sge_shepherd|' "$CFG/global"
fi
if ! cmp -s <(qconf -sconf global) "$CFG/global"; then qconf -Mconf "$CFG/global" >/dev/null; fi
qconf -ss | grep -qx "$HOST" || qconf -as "$HOST" >/dev/null
qconf -ssconf >"$CFG/sched"
# A 1 s interval; every element of a 128-element array in one scheduling run
# (max_pending_tasks_per_job is 50 by default: three runs, three waves); no
# per-job "why not scheduled" bookkeeping (schedd_job_info), no load
# adjustments (no load threshold to apply them to).
sed -e 's/^schedule_interval .*/schedule_interval                 0:0:1/' \
    -e 's/^max_pending_tasks_per_job .*/max_pending_tasks_per_job         256/' \
    -e 's/^schedd_job_info .*/schedd_job_info                   false/' \
    -e 's/^job_load_adjustments .*/job_load_adjustments              NONE/' "$CFG/sched" >"$CFG/sched.new"
if ! cmp -s "$CFG/sched" "$CFG/sched.new"; then qconf -Msconf "$CFG/sched.new" >/dev/null; fi
if ! qconf -sql 2>/dev/null | grep -qx all.q; then
    cat >"$CFG/edit-queue" <<ED
#!/bin/sh
sed -i -e 's/^hostlist .*/hostlist $HOST/' -e 's/^slots .*/slots $SLOTS/' -e 's/^load_thresholds .*/load_thresholds NONE/' -e 's/^pe_list .*/pe_list NONE/' "\$1"
ED
    chmod +x "$CFG/edit-queue"
    EDITOR="$CFG/edit-queue" qconf -aq all.q >/dev/null
fi
# A queue made by an earlier version of this script had 4 slots and the default load threshold.
qattr() { qconf -sq all.q | awk -v k="$1" '$1==k {print $2}'; }
[[ $(qattr slots) == "$SLOTS" ]] || qconf -mattr queue slots "$SLOTS" all.q >/dev/null
[[ $(qattr load_thresholds) == NONE ]] || qconf -rattr queue load_thresholds NONE all.q >/dev/null

# 3. execd (after min_uid is 0) ------------------------------------------------
# running NAME: a process NAME lives (pgrep alone also finds a zombie left unreaped).
running() { for p in $(pgrep -x "$1"); do [[ $(awk '{print $3}' "/proc/$p/stat" 2>/dev/null) =~ ^[RSDT]$ ]] && return 0; done; return 1; }
if ! running sge_execd; then
    setsid $REAP /usr/sbin/sge_execd >"$CFG/execd.out" 2>&1 </dev/null & # Must start as root (it creates each job's tmpdir for the job's user).
    log "sge_execd started"
fi

# 4. wait for the queue instance (clearing an error state left by an earlier run)
qmod -c "all.q@$HOST" >/dev/null 2>&1 || true
deadline=$((SECONDS + TIMEOUT))
while ((SECONDS < deadline)); do
    st=$(qstat -f -q "all.q@$HOST" 2>/dev/null | awk -v q="all.q@$HOST" '$1==q {print $6}')
    if [[ -n $(qstat -f -q "all.q@$HOST" 2>/dev/null | awk -v q="all.q@$HOST" '$1==q') ]]; then
        if [[ -z $st ]]; then log "queue all.q@$HOST is up"; exit 0; fi
        [[ $st == *E* ]] && qmod -c "all.q@$HOST" >/dev/null 2>&1 || true
    fi
    sleep 0.5
done
log "timed out; qstat -f says:"
qstat -f >&2 || true
exit 1

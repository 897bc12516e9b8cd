#!/usr/bin/env bash
# sge-down.sh - stop the Grid Engine daemons sge-up.sh started: delete every
# job, ask execd and qmaster to shut down (qconf -ke, -km), and wait until
# their PID files' processes are gone. Idempotent. The packages and the
# configuration stay (sge-up.sh is quick the second time).
set -uo pipefail
export SGE_ROOT=/var/lib/gridengine SGE_CELL=default
log() { printf '[sge-down] %s\n' "$*" >&2; }
command -v qconf >/dev/null || exit 0
if qconf -sh >/dev/null 2>&1; then
    qdel -f -u '*' >/dev/null 2>&1 || true
    qconf -ke all >/dev/null 2>&1 || true
    sleep 1
    qconf -km >/dev/null 2>&1 || true
fi
for f in /var/spool/gridengine/qmaster/qmaster.pid /var/spool/gridengine/execd/*/execd.pid; do
    [[ -s $f ]] || continue
    pid=$(cat "$f")
    running() { [[ $(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) =~ ^[RSDT]$ ]]; }
    for _ in $(seq 100); do running || break; sleep 0.1; done
    if running; then
        log "$f ($pid) still running; sending TERM"
        kill -TERM "$pid"
        for _ in $(seq 100); do running || break; sleep 0.1; done
    fi
done
log "stopped"
exit 0

#!/usr/bin/env bash
# nfs-uml.sh: run a command against a real Linux NFS server with two
# independent NFS clients, on a machine whose own kernel has no NFS.
#
# It boots Debian's User-Mode Linux kernel (package user-mode-linux: Linux as
# an ordinary process) with the host's / as its root filesystem (hostfs).
# Inside the guest, kernel nfsd exports a tmpfs and mounts it twice:
#   $NFS_A  client A, the guest's main network namespace
#   $NFS_B  client B, its own network namespace and NFS client identity
# then runs the command (host binaries work unchanged; cwd is kept) and
# powers off. The exit status is the command's.
#
# Usage: nfs-uml.sh [-v 4.2|3] [-o extra,mount,options] -- command [args...]
#        nfs-uml.sh --deps   install the packages it needs when missing, and exit
# Prebuild Go binaries on the host: compiling inside the guest is slow.
# Env: NFS_UML_MEM (768M), NFS_UML_DIR (/tmp/skillpilot-uml),
#      NFS_UML_TIMEOUT (1800 s), NFS_UML_DEBUG=1 (timestamped set-up steps).
set -euo pipefail

deps_only=""
[[ ${1:-} == --deps ]] && { deps_only=1; shift; set -- true; }
VERS=4.2
OPTS=""
while getopts "v:o:" o; do
  case $o in v) VERS=$OPTARG ;; o) OPTS=,$OPTARG ;; *) exit 2 ;; esac
done
shift $((OPTIND - 1))
[[ ${1:-} == -- ]] && shift
(($#)) || { echo "usage: $0 [-v 4.2|3] [-o opts] -- command..." >&2; exit 2; }

need=()
command -v linux.uml >/dev/null || need+=(user-mode-linux)
command -v rpc.nfsd >/dev/null || need+=(nfs-kernel-server)
command -v rpcbind >/dev/null || need+=(rpcbind)
command -v modprobe >/dev/null || need+=(kmod)
command -v ip >/dev/null || need+=(iproute2)
if ((${#need[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null 2>&1 || {
    apt-get update -q >/dev/null
    apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
  }
fi

[[ -n $deps_only ]] && exit 0

DIR=${NFS_UML_DIR:-/tmp/skillpilot-uml}
MEM=${NFS_UML_MEM:-768M}
KVER=$(ls /usr/lib/uml/modules | sort -V | tail -1)
mkdir -p "$DIR/modroot/lib"
ln -sfn /usr/lib/uml/modules "$DIR/modroot/lib/modules"
RUN=$(mktemp -d "$DIR/run.XXXXXX")
printf '%q ' "$@" >"$RUN/cmd"
pwd >"$RUN/cwd"
env | grep -E '^(PATH|HOME|GO[A-Z0-9_]*|TERM|LANG|CI|SP_[A-Z_]*)=' | sed 's/^/export /; s/=/="/; s/$/"/' >"$RUN/env" || true
SRC=/srv/exp
[[ $VERS == 4* ]] && SRC=/   # NFSv4: the export is the fsid=0 pseudo-root

cat >"$RUN/init" <<EOF
#!/bin/bash
# PID 1 of the guest.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
RUN=$RUN
off() { sync; /usr/bin/python3 -c 'import ctypes; ctypes.CDLL(None).reboot(0x4321FEDC)'; }
fail() { echo "nfs-uml: set-up failed: \$*" >&2; echo 99 >\$RUN/rc; off; }
step() { [[ -n "${NFS_UML_DEBUG:-}" ]] && echo "nfs-uml[\$(cut -d' ' -f1 /proc/uptime)] \$*" >&2 || true; }
set -e
trap 'fail "line \$LINENO: \$BASH_COMMAND"' ERR
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mountpoint -q /dev || mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm; mount -t devpts devpts /dev/pts; mount -t tmpfs tmpfs /dev/shm
for d in /run /srv /mnt /var/lib/nfs; do mount -t tmpfs tmpfs \$d; done
mkdir -p /var/lib/nfs/sm /var/lib/nfs/sm.bak /var/lib/nfs/v4recovery /var/lib/nfs/rpc_pipefs /srv/exp /mnt/a /mnt/b /run/netns
chmod 1777 /srv/exp; touch /var/lib/nfs/etab /var/lib/nfs/rmtab
chown statd /var/lib/nfs/sm /var/lib/nfs/sm.bak 2>/dev/null || true
ip link set lo up
step modules
M="modprobe -d $DIR/modroot -S $KVER"
\$M lockd nlm_grace_period=10 nlm_timeout=3
\$M nfsd; \$M nfsv3; \$M nfsv4; \$M veth
mount -t nfsd nfsd /proc/fs/nfsd
mount -t rpc_pipefs rpc_pipefs /var/lib/nfs/rpc_pipefs
echo 10 >/proc/fs/nfsd/nfsv4leasetime
echo 10 >/proc/fs/nfsd/nfsv4gracetime
step network
ip netns add cb
ip link add vh type veth peer name vc
ip link set vc netns cb
ip addr add 10.99.0.1/24 dev vh; ip link set vh up
ip netns exec cb ip addr add 10.99.0.2/24 dev vc
ip netns exec cb ip link set vc up; ip netns exec cb ip link set lo up
# Two NFSv4 client identities, or the server takes B for A rebooted.
echo skillpilot-client-a >/sys/fs/nfs/net/nfs_client/identifier
ip netns exec cb sh -c 'echo skillpilot-client-b >/sys/fs/nfs/net/nfs_client/identifier'
step nfsd
rpcbind -w
rpc.statd --no-notify || echo 'nfs-uml: rpc.statd failed (NFSv3 locks will not work)' >&2
exportfs -o rw,sync,no_root_squash,no_subtree_check,insecure,fsid=0 127.0.0.1:/srv/exp
exportfs -o rw,sync,no_root_squash,no_subtree_check,insecure,fsid=0 10.99.0.2:/srv/exp
rpc.mountd
rpc.nfsd 4
step mounts
mount -t nfs -o vers=$VERS$OPTS 127.0.0.1:$SRC /mnt/a
nsenter --net=/run/netns/cb mount -t nfs -o vers=$VERS$OPTS 10.99.0.1:$SRC /mnt/b
# Wait out the grace period: until both clients can create and lock.
for i in \$(seq 60); do
  timeout 5 flock -n /mnt/a/.ready true 2>/dev/null && timeout 5 flock -n /mnt/b/.ready true 2>/dev/null && break
  sleep 0.5
done
rm -f /srv/exp/.ready
echo "nfs-uml: NFS v$VERS$OPTS ready after \$(cut -d' ' -f1 /proc/uptime)s of guest uptime" >&2
trap - ERR; set +e
. \$RUN/env
export NFS_SERVER_DIR=/srv/exp NFS_A=/mnt/a NFS_B=/mnt/b
cd "\$(cat \$RUN/cwd)"
bash -c "\$(cat \$RUN/cmd)" </dev/null
echo \$? >\$RUN/rc
umount /mnt/b /mnt/a 2>/dev/null || true
off
EOF
chmod +x "$RUN/init"

# UML's stdout/stderr carry the guest console; kernel messages suppressed by "quiet".
# It runs in the background so that a timeout or a signal can stop it by PID.
TIMEOUT=${NFS_UML_TIMEOUT:-1800}
UMLPID=""
cleanup() {
    if [[ -n $UMLPID ]] && kill -0 "$UMLPID" 2>/dev/null; then
        kill -TERM "$UMLPID" 2>/dev/null
        for _ in $(seq 50); do kill -0 "$UMLPID" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$UMLPID" 2>/dev/null || true
    fi
    rm -rf "$RUN"
}
trap cleanup EXIT
trap 'exit 143' TERM INT
TMPDIR=/dev/shm linux.uml mem="$MEM" root=/dev/root rootfstype=hostfs rootflags=/ rw \
    init="$RUN/init" con0=fd:0,fd:1 con=null ssl=null quiet loglevel=3 </dev/null &
UMLPID=$!
deadline=$((SECONDS + TIMEOUT))
while kill -0 "$UMLPID" 2>/dev/null; do
    if ((SECONDS >= deadline)); then
        echo "nfs-uml: timed out after ${TIMEOUT}s; stopping the guest" >&2
        exit 124
    fi
    sleep 0.5
done
wait "$UMLPID" 2>/dev/null || true
rc=$(cat "$RUN/rc" 2>/dev/null || echo 98)
exit "$rc"

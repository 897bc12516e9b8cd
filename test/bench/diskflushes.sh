# diskflushes DIR: how many cache flushes the disk under DIR's filesystem
# has completed (field 16 of /sys/dev/block/MAJ:MIN/stat, Linux 5.5 and
# later), or "" where that cannot be read (a network filesystem, tmpfs).
# Sourced by syscalls_per_command.sh and minloop_per_command.sh: the
# flushes, not the system calls, bound a backlog's pace on a fast disk.
diskflushes() {
  local mm
  mm=$(findmnt -no MAJ:MIN -T "$1" 2>/dev/null | tr -d ' ') || return 0
  awk 'NF >= 17 {print $16}' "/sys/dev/block/$mm/stat" 2>/dev/null || true
}
# perflush N BEFORE AFTER: flushes per command, or n/a.
perflush() {
  if [ -n "$2" ] && [ -n "$3" ]; then awk -v n="$1" -v a="$2" -v b="$3" 'BEGIN{printf "%.2f", (b-a)/n}'; else echo n/a; fi
}

#!/usr/bin/env python3
"""subreaper.py CMD [ARG...]: run CMD as a child subreaper and reap it and
every descendant orphaned under it (a daemon that forks and lets its parent
exit, as sge_qmaster and sge_execd do); exit with CMD's status once none is
left. Where PID 1 does not reap orphans (a container's init that is not an
init), a daemon started without it stays a zombie after it stops, which is
what scripts/sge-down.sh left. Linux only (prctl
PR_SET_CHILD_SUBREAPER)."""

import ctypes
import os
import sys

PR_SET_CHILD_SUBREAPER = 36


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: subreaper.py CMD [ARG...]")
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        sys.exit("subreaper: prctl: %s" % os.strerror(ctypes.get_errno()))
    pid = os.fork()
    if pid == 0:
        try:
            os.execvp(sys.argv[1], sys.argv[1:])
        finally:
            os._exit(127)
    rc = 0
    while True:
        try:
            p, status = os.wait()
        except ChildProcessError:
            break  # No child left: every descendant was reaped.
        if p == pid:
            rc = os.waitstatus_to_exitcode(status) if hasattr(os, "waitstatus_to_exitcode") else status >> 8
    sys.exit(rc)


if __name__ == "__main__":
    main()

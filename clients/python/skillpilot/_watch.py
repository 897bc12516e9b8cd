"""Wake-ups for waits: an inotify watch on one session directory.

A wait that polls sleeps between looks (1 ms, then doubling); on Linux and
a local filesystem it can instead sleep until the runner renames a file into
the directory it waits on, as the Go master's waits do. The watch is only a
hint that something changed: every decision is still made by reading the
files (through SessionFS), and the wait still looks at least as often as it
would without a watch, so a lost event, a watch that cannot be had (no
inotify, too many instances, not Linux) or a filesystem whose changes
inotify does not see (NFS) only costs latency. Standard library only
(ctypes).
"""

import ctypes
import os
import select
from typing import Any, Optional

_IN_CLOSE_WRITE = 0x00000008
_IN_MOVED_TO = 0x00000080
_IN_CREATE = 0x00000100
_IN_ONLYDIR = 0x01000000
_IN_DONT_FOLLOW = 0x02000000
_IN_NONBLOCK = 0o4000
_IN_CLOEXEC = 0o2000000

_libc: Any = None


def _lib() -> Any:
    """libc with inotify, or None (not Linux, no ctypes)."""
    global _libc
    if _libc is None:
        try:
            lib = ctypes.CDLL(None, use_errno=True)
            lib.inotify_init1.argtypes = [ctypes.c_int]
            lib.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
            _libc = lib
        except (OSError, AttributeError):
            _libc = False
    return _libc or None


class DirWatch:
    """An inotify instance watching one directory (not followed if it is a
    symlink) for files created or renamed into it."""

    def __init__(self, path: str) -> None:
        lib = _lib()
        if lib is None:
            raise OSError("inotify is not available")
        fd = lib.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        if fd < 0:
            e = ctypes.get_errno()
            raise OSError(e, "inotify_init1: %s" % os.strerror(e))
        mask = _IN_CREATE | _IN_MOVED_TO | _IN_CLOSE_WRITE | _IN_ONLYDIR | _IN_DONT_FOLLOW
        if lib.inotify_add_watch(fd, os.fsencode(path), mask) < 0:
            e = ctypes.get_errno()
            os.close(fd)
            raise OSError(e, "inotify_add_watch %s: %s" % (path, os.strerror(e)))
        self.fd: Optional[int] = fd
        self._poll = select.poll()
        self._poll.register(fd, select.POLLIN)

    def drain(self) -> None:
        """Forget the events so far (call it before looking at the files)."""
        if self.fd is None:
            return
        try:
            while os.read(self.fd, 1 << 14):
                pass
        except (BlockingIOError, InterruptedError):
            pass

    def sleep(self, seconds: float) -> None:
        """Sleep until an event arrives or seconds have passed."""
        if self.fd is None:
            return
        try:
            self._poll.poll(max(0, int(seconds * 1000 + 0.999)))
        except OSError:
            pass

    def __del__(self) -> None:
        # A Session dropped without close() releases its instance (the
        # kernel allows few per user: 128 by default).
        try:
            self.close()
        except Exception:  # pragma: no cover - interpreter shutdown
            pass

    def close(self) -> None:
        if self.fd is not None:
            fd, self.fd = self.fd, None
            self._poll.unregister(fd)
            os.close(fd)

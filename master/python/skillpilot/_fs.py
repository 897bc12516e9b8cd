"""File primitives of the Python master (PROTOCOL.md sections 2, 8, 13, 16).

Every file in a session is input: reads never follow symlinks, never block
on a FIFO and are bounded in size. Writes are atomic (a dot-file in the same
directory, then rename) with mode 0660 whatever the umask, like the Go master's:
group read is what a runner of a group-shared session needs (PROTOCOL.md,
"Trust and permissions"); in a private session the 0700 directory keeps
everyone else out.
"""

import errno
import json
import os
import secrets
import stat
from typing import Any, Dict, Optional, Tuple

from .errors import MasterError

FILE_MODE = 0o660
DIR_MODE = 0o700

# MAX_READ bounds every file the master reads (the runner's own limit for
# command files is 16 MiB; results, state and replies are far smaller).
MAX_READ = 16 << 20

_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)

# Filesystem types (as /proc/self/mountinfo names them) on which a free
# flock proves nothing and inotify sees no other host's changes; the same
# list as the Go master's (fsq.FSType).
_NETWORK_FS = {"cifs", "smb", "smb2", "smb3", "smbfs", "9p", "ceph", "lustre", "gpfs", "afs", "coda"}


def revalidate(directory: str) -> None:
    """Open and close a directory. On NFS this makes the client revalidate
    it, dropping cached negative lookups, so a file another host just
    created becomes visible at once instead of after 30-60 s. Errors are
    ignored: the lookup that follows reports them."""
    try:
        os.close(os.open(directory, os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC))
    except OSError:
        pass


def write_atomic(path: str, data: bytes, mode: int = FILE_MODE) -> None:
    """Replace path with data: a reader sees the old file or the new one,
    never a part. Not fsynced (like the Go master's commands: a file lost to
    a machine crash before the runner saw it was never acknowledged)."""
    d, base = os.path.split(path)
    tmp = os.path.join(d, ".%s.%d.%s.tmp" % (base, os.getpid(), secrets.token_hex(4)))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC, mode)
    try:
        try:
            os.fchmod(fd, mode)  # Independent of the umask, as the Go master's.
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
        finally:
            os.close(fd)
        os.rename(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def create_exclusive(path: str, mode: int = FILE_MODE) -> bool:
    """Create an empty file if no file of that name exists (O_EXCL, atomic
    on local filesystems and on NFS v3 and v4). Returns False if it exists."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC, mode)
    except FileExistsError:
        return False
    try:
        os.fchmod(fd, mode)
    finally:
        os.close(fd)
    return True


def read_small(path: str, limit: int = MAX_READ) -> Optional[bytes]:
    """Return the content of a regular file, or None if it does not exist.
    A symlink, FIFO, directory or a file larger than limit raises
    MasterError (a session holds none where SkillPilot writes a file)."""
    try:
        fd = os.open(path, os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise MasterError("%s: is a symlink, refused" % path) from e
        raise MasterError("%s: %s" % (path, e.strerror)) from e
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise MasterError("%s: not a regular file" % path)
        if st.st_size > limit:
            raise MasterError("%s: %d bytes, more than the limit of %d" % (path, st.st_size, limit))
        chunks = []
        total = 0
        while True:
            b = os.read(fd, 1 << 16)
            if not b:
                break
            total += len(b)
            if total > limit:
                raise MasterError("%s: more than the limit of %d bytes" % (path, limit))
            chunks.append(b)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_range(path: str, offset: int = 0, length: int = -1) -> bytes:
    """Bytes [offset, offset+length) of a regular file (length < 0: to the
    end); b"" if the file does not exist yet. Like read_small, refuses
    symlinks and anything that is not a regular file."""
    try:
        fd = os.open(path, os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC)
    except FileNotFoundError:
        return b""
    except OSError as e:
        raise MasterError("%s: %s" % (path, "is a symlink, refused" if e.errno == errno.ELOOP else e.strerror)) from e
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise MasterError("%s: not a regular file" % path)
        chunks = []
        while length != 0:
            b = os.pread(fd, 1 << 16 if length < 0 else min(length, 1 << 16), offset)
            if not b:
                break
            chunks.append(b)
            offset += len(b)
            if length > 0:
                length -= len(b)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_json(path: str) -> Optional[Dict[str, Any]]:
    """Parse a JSON object file; None if it does not exist. A file that is
    not a JSON object raises MasterError."""
    data = read_small(path)
    if data is None:
        return None
    try:
        v = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise MasterError("%s: not valid JSON: %s" % (path, e)) from e
    if not isinstance(v, dict):
        raise MasterError("%s: not a JSON object" % path)
    return v


def read_json_quiet(path: str) -> Optional[Dict[str, Any]]:
    """read_json that returns None on any error (for liveness probes)."""
    try:
        return read_json(path)
    except (MasterError, OSError):
        return None


def _unescape_mount(s: str) -> str:
    out, i = [], 0
    while i < len(s):
        if s[i] == "\\" and i + 3 < len(s) and s[i + 1:i + 4].isdigit():
            out.append(chr(int(s[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


def fs_type(path: str) -> Tuple[str, bool]:
    """The filesystem type under path and whether it is a network (or FUSE)
    filesystem. Read from /proc/self/mountinfo (Linux); elsewhere, or when
    it cannot be read, ("unknown", True): a free lock then proves nothing
    and the heartbeat alone decides liveness, which is always correct."""
    try:
        real = os.path.realpath(path)
        best, best_type = "", "unknown"
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                left, sep, right = line.partition(" - ")
                fields = left.split()
                if not sep or len(fields) < 5:
                    continue
                mnt = _unescape_mount(fields[4])
                inside = real == mnt or real.startswith(mnt.rstrip("/") + "/")
                if inside and len(mnt) >= len(best):
                    best, best_type = mnt, right.split()[0]
        if not best:
            return "unknown", True
    except OSError:
        return "unknown", True
    network = best_type in _NETWORK_FS or best_type.startswith("nfs") or best_type.startswith("fuse")
    return best_type, network


def lock_held(path: str) -> bool:
    """Probe the runner's flock with a shared lock: True if it is held (or
    the probe cannot tell), False if it is free or the file is missing."""
    try:
        import fcntl
    except ImportError:  # Not POSIX: let the heartbeat decide.
        return True
    try:
        fd = os.open(path, os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC)
    except FileNotFoundError:
        return False
    except OSError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return True
    finally:
        os.close(fd)  # Closing releases a lock we took.
    return False

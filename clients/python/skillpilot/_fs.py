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
from typing import Any, Dict, List, Optional, Tuple

from .errors import MasterError

FILE_MODE = 0o660
DIR_MODE = 0o700
# The session directories masters write into (PROTOCOL.md section 20): the
# ones a master may have to make (seq/ in a session an older runner made).
_SESSION_DIRS = ("queue", "ctl", "seq", "state")

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


def _refused(path: str, e: OSError) -> MasterError:
    """The MasterError (io_error) for an open that failed on a symlink, a
    non-directory component or any other reason."""
    if e.errno in (errno.ELOOP, errno.EMLINK):
        return MasterError("%s: is a symlink, refused" % path)
    if e.errno == errno.ENOTDIR:
        return MasterError("%s: not a directory (or a symlink), refused" % path)
    return MasterError("%s: %s" % (path, e.strerror))


def _open_dir_at(dfd: Optional[int], name: str, follow: bool) -> int:
    """Open the directory name (relative to dfd, or a path when dfd is None)
    for use as a dir_fd. follow=False refuses a symlink (O_NOFOLLOW)."""
    flags = os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC | (0 if follow else _O_NOFOLLOW)
    if dfd is None:
        return os.open(name, flags)
    return os.open(name, flags, dir_fd=dfd)


def _write_at(dfd: int, base: str, data: bytes, mode: int, durable: bool) -> None:
    """write_atomic relative to the directory dfd: a dot-file created with
    O_EXCL beside base, then renamed onto it (both relative to dfd). With
    durable, the file is fsynced before the rename and dfd after it."""
    tmp = ".%s.%d.%s.tmp" % (base, os.getpid(), secrets.token_hex(4))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC, mode, dir_fd=dfd)
    try:
        try:
            os.fchmod(fd, mode)  # Independent of the umask, as the Go master's.
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, base, src_dir_fd=dfd, dst_dir_fd=dfd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dfd)
        except OSError:
            pass
        raise
    if durable:
        try:
            os.fsync(dfd)
        except OSError:
            pass  # Some filesystems cannot fsync a directory; the rename stands.


def _lstat_at(dfd: int, base: str, follow: bool = False) -> int:
    """st_mode of base in dfd (0 if it does not exist)."""
    try:
        return os.stat(base, dir_fd=dfd, follow_symlinks=follow).st_mode
    except OSError:
        return 0


def _create_at(dfd: int, base: str, mode: int) -> bool:
    try:
        fd = os.open(base, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC, mode, dir_fd=dfd)
    except FileExistsError:
        return False
    try:
        os.fchmod(fd, mode)
    finally:
        os.close(fd)
    return True


def _open_read_at(dfd: int, base: str, shown: str) -> Optional[int]:
    """A file descriptor of the regular file base in dfd, opened without
    following a symlink or blocking on a FIFO; None if it does not exist."""
    try:
        fd = os.open(base, os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC, dir_fd=dfd)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise _refused(shown, e) from e
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise MasterError("%s: not a regular file" % shown)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _read_fd(fd: int, shown: str, limit: int) -> bytes:
    st = os.fstat(fd)
    if st.st_size > limit:
        raise MasterError("%s: %d bytes, more than the limit of %d" % (shown, st.st_size, limit))
    chunks = []
    total = 0
    while True:
        b = os.read(fd, 1 << 16)
        if not b:
            break
        total += len(b)
        if total > limit:
            raise MasterError("%s: more than the limit of %d bytes" % (shown, limit))
        chunks.append(b)
    return b"".join(chunks)


def _pread_fd(fd: int, offset: int, length: int) -> bytes:
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


def _parse_json(data: bytes, shown: str) -> Dict[str, Any]:
    try:
        v = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise MasterError("%s: not valid JSON: %s" % (shown, e)) from e
    if not isinstance(v, dict):
        raise MasterError("%s: not a JSON object" % shown)
    return v


def _flock_probe(fd: int) -> bool:
    try:
        import fcntl
    except ImportError:  # Not POSIX: let the heartbeat decide.
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return True
    return False  # Closing the fd releases a lock we took.


class _PathDir:
    """The parent directory of a caller's path, as a dir fd (the path
    itself may hold symlinks: the caller chose it)."""

    def __init__(self, path: str) -> None:
        d, self.base = os.path.split(path)
        self.fd = _open_dir_at(None, d or ".", follow=True)

    def __enter__(self) -> "_PathDir":
        return self

    def __exit__(self, *exc: Any) -> None:
        os.close(self.fd)


def revalidate(directory: str) -> None:
    """Open and close a directory. On NFS this makes the client revalidate
    it, dropping cached negative lookups, so a file another host just
    created becomes visible at once instead of after 30-60 s. Errors are
    ignored: the lookup that follows reports them."""
    try:
        os.close(_open_dir_at(None, directory, follow=True))
    except OSError:
        pass


def write_atomic(path: str, data: bytes, mode: int = FILE_MODE, durable: bool = False) -> None:
    """Replace path with data: a reader sees the old file or the new one,
    never a part. Not fsynced unless durable (like the Go master's
    commands: a file lost to a machine crash before the runner saw it was
    never acknowledged)."""
    with _PathDir(path) as p:
        _write_at(p.fd, p.base, data, mode, durable)


def create_exclusive(path: str, mode: int = FILE_MODE) -> bool:
    """Create an empty file if no file of that name exists (O_EXCL, atomic
    on local filesystems and on NFS v3 and v4). Returns False if it exists."""
    with _PathDir(path) as p:
        return _create_at(p.fd, p.base, mode)


def read_small(path: str, limit: int = MAX_READ) -> Optional[bytes]:
    """Return the content of a regular file, or None if it does not exist.
    A symlink, FIFO, directory or a file larger than limit raises
    MasterError (a session holds none where SkillPilot writes a file)."""
    try:
        p = _PathDir(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise _refused(path, e) from e
    with p:
        fd = _open_read_at(p.fd, p.base, path)
        if fd is None:
            return None
        try:
            return _read_fd(fd, path, limit)
        finally:
            os.close(fd)


def read_range(path: str, offset: int = 0, length: int = -1) -> bytes:
    """Bytes [offset, offset+length) of a regular file (length < 0: to the
    end); b"" if the file does not exist yet. Like read_small, refuses
    symlinks and anything that is not a regular file."""
    try:
        p = _PathDir(path)
    except FileNotFoundError:
        return b""
    except OSError as e:
        raise _refused(path, e) from e
    with p:
        fd = _open_read_at(p.fd, p.base, path)
        if fd is None:
            return b""
        try:
            return _pread_fd(fd, offset, length)
        finally:
            os.close(fd)


def read_json(path: str) -> Optional[Dict[str, Any]]:
    """Parse a JSON object file; None if it does not exist. A file that is
    not a JSON object raises MasterError."""
    data = read_small(path)
    return None if data is None else _parse_json(data, path)


def read_json_quiet(path: str) -> Optional[Dict[str, Any]]:
    """read_json that returns None on any error (for liveness probes)."""
    try:
        return read_json(path)
    except (MasterError, OSError):
        return None


def read_text(path: str, encoding: str = "utf-8") -> str:
    """A file the user named (submit -f FILE), read whole as text. Unlike
    session files it may be anything the user can read (a FIFO included).
    Bytes that are not UTF-8 become U+FFFD, as the Go CLI and this CLI's
    stdin read them (a payload is JSON text)."""
    with open(path, encoding=encoding, errors="replace") as f:
        return f.read()


def read_user_bytes(path: str, limit: int) -> bytes:
    """At most limit bytes of a file the user named (send --file)."""
    with open(path, "rb") as f:
        return f.read(limit)


def abspath(directory: str) -> str:
    """The absolute form of a directory the user named."""
    return os.path.abspath(directory)


class SessionFS:
    """Every file operation of the Python master on one session directory.

    Names are relative to the session root: sub is a directory such as
    "queue" or "ctl/ack" and name one entry in it. Each operation opens the
    root (the caller's path, which may contain symlinks), then every
    component of sub relative to it with O_DIRECTORY | O_NOFOLLOW, and acts
    on name relative to that directory's fd (os.open, os.rename, os.stat,
    os.unlink with dir_fd=): a session directory swapped for a symlink is
    refused (MasterError, io_error), never followed out of the session.
    Opening the directories afresh each time is also what makes an NFS
    client revalidate them (see revalidate). Reads never block (O_NONBLOCK),
    never follow a symlink (O_NOFOLLOW), accept only regular files and are
    bounded in size; writes are atomic (temporary dot-file with O_EXCL,
    then rename in the same directory).
    """

    def __init__(self, root: str, member: bool = False) -> None:
        self.root = root
        # local: the session is on a local filesystem (Session sets it from
        # fs_type), where revalidate has nothing to drop and is skipped.
        self.local = False
        # member: root is a pool's member (session, relative): its last
        # component is opened relative to its parent and never followed,
        # so a member swapped for a symlink is refused by every operation,
        # however late the swap.
        self.member = member

    def _open_root(self) -> int:
        if not self.member:
            return _open_dir_at(None, self.root, follow=True)
        parent, base = os.path.split(os.path.normpath(self.root))
        pfd = _open_dir_at(None, parent, follow=True)
        try:
            return _open_dir_at(pfd, base, follow=False)
        except FileNotFoundError:
            raise
        except OSError as e:
            raise _refused(self.root, e) from e
        finally:
            os.close(pfd)

    def path(self, sub: str, name: str = "") -> str:
        """The path of sub/name, for messages and for the caller's eyes only."""
        parts = [self.root] + [c for c in sub.split("/") if c]
        if name:
            parts.append(name)
        return os.path.join(*parts)

    def _dir(self, sub: str) -> int:
        """An fd of root/sub, no symlink followed below root. Raises
        FileNotFoundError when a component is missing, MasterError when one
        is a symlink or not a directory."""
        fd = self._open_root()
        walked = self.root
        for comp in sub.split("/"):
            if not comp:
                continue
            if comp in (".", ".."):
                os.close(fd)
                raise MasterError("%s: %r is not a session directory name" % (self.root, sub))
            walked = os.path.join(walked, comp)
            try:
                nfd = _open_dir_at(fd, comp, follow=False)
            except FileNotFoundError:
                raise
            except OSError as e:
                raise _refused(walked, e) from e
            finally:
                os.close(fd)
            fd = nfd
        return fd

    @staticmethod
    def _check_name(name: str) -> None:
        if not name or "/" in name or name in (".", ".."):
            raise MasterError("%r is not a file name" % name)

    def revalidate(self, sub: str = "") -> None:
        """Open and close root/sub (NFS: drop cached negative lookups).
        Errors are ignored: the lookup that follows reports them. Nothing
        to do on a local filesystem (local), whose lookups are never stale."""
        if self.local:
            return
        try:
            os.close(self._dir(sub))
        except (OSError, MasterError):
            pass

    def is_dir(self, sub: str) -> bool:
        """Whether root/sub is a directory (a symlink to one counts: this
        only tells a session from another directory; every operation below
        refuses the symlink)."""
        parent, _, last = sub.rpartition("/")
        try:
            fd = self._dir(parent)
        except (OSError, MasterError):
            return False
        try:
            return stat.S_ISDIR(_lstat_at(fd, last, follow=True))
        finally:
            os.close(fd)

    def is_plain_dir(self, sub: str) -> bool:
        """Whether root/sub is a directory and not a symlink to one."""
        parent, _, last = sub.rpartition("/")
        try:
            fd = self._dir(parent)
        except (OSError, MasterError):
            return False
        try:
            return stat.S_ISDIR(_lstat_at(fd, last))
        finally:
            os.close(fd)

    def mkdir(self, sub: str, mode: int = DIR_MODE) -> None:
        """Create root/sub (its parent must exist) with exactly mode
        whatever the umask, keeping the setgid bit a shared parent passes
        on; FileExistsError if it exists."""
        parent, _, last = sub.rpartition("/")
        fd = self._dir(parent)
        try:
            os.mkdir(last, mode, dir_fd=fd)
            dfd = _open_dir_at(fd, last, follow=False)
            try:
                want = mode | (os.fstat(dfd).st_mode & stat.S_ISGID)
                if stat.S_IMODE(os.fstat(dfd).st_mode) != want:
                    os.fchmod(dfd, want)
            finally:
                os.close(dfd)
        finally:
            os.close(fd)

    def mkdir_master(self, sub: str) -> None:
        """Make root/sub, if missing, as a master makes a directory
        (PROTOCOL.md 19.1, "Files"; the Go master's sessionio.MkdirMaster):
        a session directory of the protocol (seq/) gets the runner's mode
        for it, 0700 in a private session and 2770 in a group-shared one
        (setgid on the session directory), since the runner refuses a
        group-writable one in a private session; any other (withdrawn/,
        affinity/) 0770. Whatever the umask."""
        mode = 0o770
        if sub in _SESSION_DIRS:
            fd = self._open_root()
            try:
                shared = bool(os.fstat(fd).st_mode & stat.S_ISGID)
            finally:
                os.close(fd)
            mode = 0o770 | stat.S_ISGID if shared else 0o700
        try:
            self.mkdir(sub, mode)
        except FileExistsError:
            pass

    def read(self, sub: str, name: str, limit: int = MAX_READ) -> Optional[bytes]:
        """The content of the regular file sub/name, or None if it (or sub)
        does not exist. A symlink, FIFO, directory, a file over limit or a
        symlinked directory raises MasterError."""
        self._check_name(name)
        shown = self.path(sub, name)
        try:
            dfd = self._dir(sub)
        except FileNotFoundError:
            return None
        except OSError as e:
            raise _refused(shown, e) from e
        try:
            fd = _open_read_at(dfd, name, shown)
        finally:
            os.close(dfd)
        if fd is None:
            return None
        try:
            return _read_fd(fd, shown, limit)
        finally:
            os.close(fd)

    def read_range(self, sub: str, name: str, offset: int = 0, length: int = -1,
                   missing: Optional[bytes] = b"") -> Optional[bytes]:
        """Bytes [offset, offset+length) of sub/name (length < 0: to the
        end); ``missing`` (b"") if it does not exist. Refuses what read
        refuses."""
        self._check_name(name)
        shown = self.path(sub, name)
        try:
            dfd = self._dir(sub)
        except FileNotFoundError:
            return missing
        except OSError as e:
            raise _refused(shown, e) from e
        try:
            fd = _open_read_at(dfd, name, shown)
        finally:
            os.close(dfd)
        if fd is None:
            return missing
        try:
            return _pread_fd(fd, offset, length)
        finally:
            os.close(fd)

    def read_json(self, sub: str, name: str, limit: int = MAX_READ) -> Optional[Dict[str, Any]]:
        """sub/name parsed as a JSON object; None if it does not exist."""
        data = self.read(sub, name, limit)
        return None if data is None else _parse_json(data, self.path(sub, name))

    def read_json_quiet(self, sub: str, name: str, limit: int = MAX_READ) -> Optional[Dict[str, Any]]:
        """read_json that returns None on any error (liveness probes, pools)."""
        try:
            return self.read_json(sub, name, limit)
        except (MasterError, OSError):
            return None

    def write_atomic(self, sub: str, name: str, data: bytes, mode: int = FILE_MODE, durable: bool = False) -> None:
        """Replace sub/name with data atomically (see write_atomic). A
        symlinked sub raises MasterError: nothing is written through it."""
        self._check_name(name)
        dfd = self._dir(sub)
        try:
            _write_at(dfd, name, data, mode, durable)
        finally:
            os.close(dfd)

    def create_exclusive(self, sub: str, name: str, mode: int = FILE_MODE) -> bool:
        """Create the empty file sub/name with O_EXCL; False if it exists."""
        self._check_name(name)
        dfd = self._dir(sub)
        try:
            return _create_at(dfd, name, mode)
        finally:
            os.close(dfd)

    def list(self, sub: str) -> List[str]:
        """The names in sub (OSError if it cannot be listed, MasterError if
        it is a symlink)."""
        dfd = self._dir(sub)
        try:
            return os.listdir(dfd)
        finally:
            os.close(dfd)

    def exists(self, sub: str, name: str) -> bool:
        """Whether sub/name exists (as anything, a symlink included)."""
        try:
            dfd = self._dir(sub)
        except (OSError, MasterError):
            return False
        try:
            return _lstat_at(dfd, name) != 0
        finally:
            os.close(dfd)

    def stat(self, sub: str, name: str) -> os.stat_result:
        """lstat of sub/name (no symlink followed)."""
        self._check_name(name)
        dfd = self._dir(sub)
        try:
            return os.stat(name, dir_fd=dfd, follow_symlinks=False)
        finally:
            os.close(dfd)

    def withdraw(self, sub: str, name: str) -> bool:
        """Remove sub/name (a request the runner has not taken); False if
        it was already gone."""
        self._check_name(name)
        dfd = self._dir(sub)
        try:
            os.unlink(name, dir_fd=dfd)
            return True
        except FileNotFoundError:
            return False
        finally:
            os.close(dfd)

    def claim(self, sub: str, name: str, to_sub: str, to_name: str) -> bool:
        """Rename sub/name to to_sub/to_name (the same filesystem); False if
        sub/name was already gone (another rename of it won). On NFS a
        retried rename can say ENOENT although it succeeded: the target is
        looked at then."""
        self._check_name(name)
        self._check_name(to_name)
        sfd = self._dir(sub)
        try:
            dfd = self._dir(to_sub)
            try:
                try:
                    os.rename(name, to_name, src_dir_fd=sfd, dst_dir_fd=dfd)
                    return True
                except FileNotFoundError:
                    return _lstat_at(dfd, to_name) != 0
            finally:
                os.close(dfd)
        finally:
            os.close(sfd)

    def lock_held(self, sub: str, name: str) -> bool:
        """Probe the runner's flock on sub/name with a shared lock: True if
        it is held (or the probe cannot tell), False if it is free or the
        file is missing."""
        try:
            dfd = self._dir(sub)
        except FileNotFoundError:
            return False
        except (OSError, MasterError):
            return True
        try:
            fd = os.open(name, os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC, dir_fd=dfd)
        except FileNotFoundError:
            return False
        except OSError:
            return True
        finally:
            os.close(dfd)
        try:
            return _flock_probe(fd)
        finally:
            os.close(fd)

    def fs_type(self) -> Tuple[str, bool]:
        """The filesystem type under the session (see fs_type)."""
        return fs_type(self.root)

    def parent(self) -> "SessionFS":
        """The directory holding this one (a pool, or the user's)."""
        return SessionFS(os.path.dirname(self.root))

    def session(self, name: str) -> "SessionFS":
        """The session name inside this directory (a pool), e.g. "s01"."""
        self._check_name(name)
        return SessionFS(os.path.join(self.root, name), member=True)

    def relative(self, rel: str) -> "SessionFS":
        """The directory rel (e.g. "../s02" from a forward record) beside or
        below this one, normalised."""
        return SessionFS(os.path.normpath(os.path.join(self.root, rel)), member=True)

    def link_exclusive(self, sub: str, name: str, data: bytes, mode: int = FILE_MODE) -> bool:
        """Create sub/name with data unless it exists (a temporary file
        hard-linked into place): True if this call created it."""
        self._check_name(name)
        dfd = self._dir(sub)
        try:
            tmp = ".%s.%s.tmp" % (name, secrets.token_hex(8))
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC, mode, dir_fd=dfd)
            try:
                with os.fdopen(fd, "wb") as f:
                    os.fchmod(f.fileno(), mode)  # Whatever the umask: an affinity pin is the pool's, group-shared.
                    f.write(data)
                os.link(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd, follow_symlinks=False)
                return True
            except FileExistsError:
                return False
            finally:
                os.unlink(tmp, dir_fd=dfd)
        finally:
            os.close(dfd)

    def touch_mtime(self, sub: str, name: str, mode: int = FILE_MODE) -> float:
        """Set sub/name's mtime to now (creating it, mode 0660 whatever the
        umask) and return it as the filesystem's clock (on NFS the server
        sets it)."""
        self._check_name(name)
        dfd = self._dir(sub)
        try:
            try:
                os.utime(name, None, dir_fd=dfd, follow_symlinks=False)
            except FileNotFoundError:
                fd = os.open(name, os.O_WRONLY | os.O_CREAT | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC, mode, dir_fd=dfd)
                try:
                    if stat.S_ISREG(os.fstat(fd).st_mode) and stat.S_IMODE(os.fstat(fd).st_mode) != mode:
                        os.fchmod(fd, mode)
                finally:
                    os.close(fd)
            return os.stat(name, dir_fd=dfd, follow_symlinks=False).st_mtime_ns / 1e9
        finally:
            os.close(dfd)


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
    """Probe the runner's flock on path (see SessionFS.lock_held)."""
    d, base = os.path.split(path)
    return SessionFS(d or ".").lock_held("", base)

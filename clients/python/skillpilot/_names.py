"""Names of a session (PROTOCOL.md sections 2, 3 and 5) and seq allocation."""

import re
import secrets
import time
from typing import Any, Dict, Optional, Tuple, Union

from . import _fs
from .errors import MasterError, UsageError

PROTOCOL_VERSION = 1
SEQ_WIDTH = 10

DIR_QUEUE, DIR_INFLIGHT, DIR_RESULT, DIR_OUTPUT = "queue", "inflight", "result", "output"
DIR_CTL, DIR_ACK, DIR_STATE, DIR_SEQ, DIR_LOG = "ctl", "ctl/ack", "state", "seq", "log"
# Pools (PROTOCOL.md 18.4) and withdraw (section 19): moved/ holds a command a
# mover claimed, forward/ where it went, withdrawn/ what a withdraw took back.
DIR_MOVED, DIR_FORWARD, DIR_WITHDRAWN = "moved", "forward", "withdrawn"

# The session's fixed files as (directory, name), the arguments of
# _fs.SessionFS's methods: no other module joins a session path.
STATE = (DIR_STATE, "state.json")
HEARTBEAT = (DIR_STATE, "heartbeat.json")
LEASE = (DIR_STATE, "lease.json")
LOCK = (DIR_STATE, "runner.lock")
SPOOL = (DIR_LOG, "session.out")
SEQ_HINT = (DIR_SEQ, "hint")
# The pruned index (PROTOCOL.md section 23): the older generation first.
# The current file first: the runner's rotation renames it to the older
# one, so a line is in the file read first or, moved by a rotation between
# the two reads, in the second (the other order could miss it).
PRUNED_FILES = ((DIR_LOG, "pruned.log"), (DIR_LOG, "pruned.log.1"))
MAX_PRUNED = 512 << 20
FILE_STATE, FILE_HEARTBEAT, FILE_LEASE, FILE_LOCK, FILE_SPOOL, FILE_SEQ_HINT = (
    "/".join(f) for f in (STATE, HEARTBEAT, LEASE, LOCK, SPOOL, SEQ_HINT))

KINDS = ("tcl", "sh")  # built in; a runner's driver names other kinds (valid_kind)
_KIND_RE = re.compile(r"[a-z][a-z0-9_-]{0,31}\Z")
_CMD_ID = re.compile(r"[A-Za-z0-9._-]{1,128}\Z")
_NAME = re.compile(r"(cmd|req)_([0-9]{1,18})_(.+)\.json\Z", re.S)


def valid_id(cmd_id: str) -> bool:
    """A safe cmd_id or req_id: 1-128 of [A-Za-z0-9._-], not "." or ".."."""
    return bool(_CMD_ID.match(cmd_id)) and cmd_id not in (".", "..")


def valid_kind(kind: Any) -> bool:
    """tcl, sh, or a driver's kind (yosys, ngspice, a --driver file's):
    1-32 characters of [a-z0-9_-] starting with a letter (PROTOCOL.md 4)."""
    return isinstance(kind, str) and _KIND_RE.match(kind) is not None


def command_name(seq: int, cmd_id: str) -> str:
    """cmd_<seq, 10 digits>_<cmd_id>.json"""
    return "cmd_%0*d_%s.json" % (SEQ_WIDTH, seq, cmd_id)


def request_name(seq: int, req_id: str) -> str:
    """req_<seq, 10 digits>_<req_id>.json: a control request in ctl/."""
    return "req_%0*d_%s.json" % (SEQ_WIDTH, seq, req_id)


def parse_name(name: str, prefix: str = "cmd") -> Optional[Tuple[int, str]]:
    """(seq, id) of cmd_<seq>_<id>.json (or req_...), None for any other
    name. The id is matched exactly: cmd_1_a_b.json has id "a_b", never "b"."""
    m = _NAME.match(name)
    if not m or m.group(1) != prefix or not valid_id(m.group(3)):
        return None
    return int(m.group(2)), m.group(3)


def find_pruned(data: bytes, name: Optional[str], cmd_id: str) -> Optional[Tuple[str, str, str]]:
    """The line of the pruned index (``<name> <status> <end_ts>``) for
    command file ``name``, or else for ``cmd_id`` (the whole cmd_id, the
    lowest seq), as (name, status, end_ts); None when it holds none. A torn
    last line and lines that do not parse are skipped."""
    found = None
    lines = data.split(b"\n")
    for raw in lines[:-1]:  # The last piece is b"" or a torn line.
        parts = raw.split()
        if len(parts) != 3:
            continue
        n = parts[0].decode("utf-8", "replace")
        parsed = parse_name(n)
        if parsed is None or not valid_id(parsed[1]):
            continue
        if (name is not None and n != name) or (name is None and parsed[1] != cmd_id):
            continue
        if found is None or parsed[0] < found[0] or name is not None:
            found = (parsed[0], n, parts[1].decode("ascii", "replace"), parts[2].decode("ascii", "replace"))
    return None if found is None else found[1:]


def output_name(command_file: str) -> str:
    return command_file[:-len(".json")] + ".out"


def new_id() -> str:
    """A UUID version 7: 48 bits of Unix milliseconds, then random bits,
    so that ids sort by creation time."""
    b = bytearray(secrets.token_bytes(16))
    b[0:6] = int(time.time() * 1000).to_bytes(6, "big")
    b[6] = (b[6] & 0x0F) | 0x70
    b[8] = (b[8] & 0x3F) | 0x80
    h = b.hex()
    return "%s-%s-%s-%s-%s" % (h[:8], h[8:12], h[12:16], h[16:20], h[20:])


def now_iso(after: float = 0.0) -> str:
    """RFC 3339 UTC with milliseconds (informational timestamps), of now
    plus after seconds."""
    t = time.time() + after
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".%03dZ" % int((t % 1) * 1000)


def _session_fs(session: "Union[str, _fs.SessionFS]") -> _fs.SessionFS:
    return session if isinstance(session, _fs.SessionFS) else _fs.SessionFS(session)


def _read_hint(sfs: _fs.SessionFS) -> Optional[int]:
    try:
        data = sfs.read(*SEQ_HINT, limit=64)
    except MasterError:
        return None
    if data is None:
        return None
    text = data.decode("ascii", "replace").strip()
    return int(text) if text.isdigit() and len(text) <= 18 else None


def _max_reserved(sfs: _fs.SessionFS) -> int:
    try:
        names = sfs.list(DIR_SEQ)
    except FileNotFoundError as e:
        raise MasterError("no seq/ directory in the session: %s" % sfs.path(DIR_SEQ)) from e
    return max([int(n) for n in names if n.isdigit() and len(n) <= 18] or [0])


def alloc_seq(session: "Union[str, _fs.SessionFS]") -> int:
    """Reserve the next seq by exclusive create in seq/ (PROTOCOL.md section
    5): the same scheme as every SkillPilot master, on any host. session is
    a session directory or its SessionFS."""
    sfs = _session_fs(session)
    n = reserve_seq(sfs)
    write_hint(sfs, n)
    return n


def reserve_seq(sfs: _fs.SessionFS) -> int:
    """alloc_seq without updating seq/hint: the caller calls write_hint
    after the work the seq is for (as the Go master writes the hint in the
    background), so the runner sees a command one atomic write sooner."""
    n = _read_hint(sfs)
    if n is None:
        n = _max_reserved(sfs)
    tries = 0
    while True:
        n += 1
        try:
            if sfs.create_exclusive(DIR_SEQ, "%0*d" % (SEQ_WIDTH, n)):
                break
        except OSError as e:
            raise MasterError("reserve seq %d: %s" % (n, e)) from e
        tries += 1
        if tries % 64 == 0:
            n = max(n, _max_reserved(sfs))
    return n


def write_hint(sfs: _fs.SessionFS, n: int) -> None:
    """Raise seq/hint to n (best effort: a lost or late hint costs the next
    allocator a few EEXIST, never a wrong seq)."""
    cur = _read_hint(sfs)
    if cur is None or cur < n:
        try:
            sfs.write_atomic(*SEQ_HINT, b"%d\n" % n)
        except (OSError, MasterError):
            pass  # Best effort: a lost hint costs the next allocator a few EEXIST.


_TRACE_ID = re.compile(r"[!-~]{1,128}\Z")
_LABEL_KEY = re.compile(r"[a-z_][a-z0-9_]{0,62}\Z")


def check_correlation(trace_id: Optional[str], labels: Optional[Dict[str, str]]) -> None:
    """PROTOCOL.md section 4, Correlation: trace_id 1-128 printable ASCII
    without spaces; at most 16 labels, keys [a-z0-9_] not starting with a
    digit (at most 63), values at most 256 bytes of UTF-8 without control
    characters."""
    if trace_id not in (None, "") and (not isinstance(trace_id, str) or not _TRACE_ID.match(trace_id)):
        raise UsageError("trace_id %r: 1-128 printable ASCII characters without spaces" % (trace_id,))
    if labels is None:
        return
    if not isinstance(labels, dict) or len(labels) > 16:
        raise UsageError("labels: a dict of at most 16 entries")
    for k, v in labels.items():
        if not isinstance(k, str) or not _LABEL_KEY.match(k):
            raise UsageError("labels: key %r must be 1-63 characters of [a-z0-9_], not starting with a digit" % (k,))
        if not isinstance(v, str):
            raise UsageError("labels.%s: a str of at most 256 bytes (not %s)" % (k, "None" if v is None else type(v).__name__))
        try:
            size = len(v.encode("utf-8"))
        except UnicodeEncodeError as e:  # A lone surrogate ("\ud800") has no UTF-8.
            raise UsageError("labels.%s: is not valid UTF-8 (%s at index %d)" % (k, ascii(v[e.start]), e.start)) from None
        if size > 256:
            raise UsageError("labels.%s: a str of at most 256 bytes" % k)
        if any(ord(c) < 0x20 or 0x7f <= ord(c) < 0xa0 for c in v):
            raise UsageError("labels.%s: must not contain control characters" % k)


def check_id(cmd_id: str, what: str = "cmd_id") -> str:
    if not isinstance(cmd_id, str) or not valid_id(cmd_id):
        raise UsageError("invalid %s %r: 1-128 characters of [A-Za-z0-9._-]" % (what, cmd_id))
    return cmd_id


def parse_ref(ref: Any) -> "Tuple[Optional[str], str]":
    """A reference to a command, by one rule in every master (PROTOCOL.md
    section 19, "Naming a command"): a command file's name, or a path ending
    in one (queue/cmd_<seq>_<id>.json), is exactly that file: (name, cmd_id);
    a cmd_id is (None, cmd_id). Anything else is a UsageError."""
    if not isinstance(ref, str) or not ref:
        raise UsageError("a cmd_id or command file name is required")
    base = ref.rsplit("/", 1)[-1]
    parsed = parse_name(base)
    if parsed is not None:
        return base, parsed[1]
    if base != ref:
        raise UsageError("%r is not a command file's name (cmd_<seq>_<cmd_id>.json)" % (ref,))
    return None, check_id(ref)
